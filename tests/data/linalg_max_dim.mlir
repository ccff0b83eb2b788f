#loc = loc(unknown)
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
module {
  func.func @aten_op(%arg0: tensor<4x8xf32> loc(unknown)) -> (tensor<4xf32>, tensor<4xi64>) {
    %c0_i64 = arith.constant 0 : i64 loc(#loc)
    %cst = arith.constant 0xFF800000 : f32 loc(#loc)
    %0 = tensor.empty() : tensor<4xi64> loc(#loc)
    %1 = linalg.fill ins(%c0_i64 : i64) outs(%0 : tensor<4xi64>) -> tensor<4xi64> loc(#loc)
    %2 = tensor.empty() : tensor<4xf32> loc(#loc)
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<4xf32>) -> tensor<4xf32> loc(#loc)
    %4:2 = linalg.generic {indexing_maps = [#map, #map1, #map1], iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<4x8xf32>) outs(%3, %1 : tensor<4xf32>, tensor<4xi64>) {
    ^bb0(%in: f32 loc(unknown), %out: f32 loc(unknown), %out_0: i64 loc(unknown)):
      %5 = linalg.index 1 : index loc(#loc)
      %6 = arith.index_cast %5 : index to i64 loc(#loc)
      %7 = arith.maximumf %in, %out : f32 loc(#loc)
      %8 = arith.cmpf ogt, %in, %out : f32 loc(#loc)
      %9 = arith.select %8, %6, %out_0 : i64 loc(#loc)
      linalg.yield %7, %9 : f32, i64 loc(#loc)
    } -> (tensor<4xf32>, tensor<4xi64>) loc(#loc)
    return %4#0, %4#1 : tensor<4xf32>, tensor<4xi64> loc(#loc)
  } loc(#loc)
} loc(#loc)

