#loc = loc(unknown)
module {
  func.func @aten_op(%arg0: tensor<4x8xf32> loc(unknown)) -> tensor<4x8xf32> {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32> loc(#loc)
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32> loc(#loc)
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32> loc(#loc)
    %1 = stablehlo.reshape %0 : (tensor<4xf32>) -> tensor<4x1xf32> loc(#loc)
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32> loc(#loc)
    %3 = stablehlo.subtract %arg0, %2 : tensor<4x8xf32> loc(#loc)
    %4 = stablehlo.exponential %3 : tensor<4x8xf32> loc(#loc)
    %5 = stablehlo.reduce(%4 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32> loc(#loc)
    %6 = stablehlo.reshape %5 : (tensor<4xf32>) -> tensor<4x1xf32> loc(#loc)
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32> loc(#loc)
    %8 = stablehlo.divide %4, %7 : tensor<4x8xf32> loc(#loc)
    return %8 : tensor<4x8xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)

