#loc1 = loc("model.py":14:0)
#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @main(%arg0: tensor<4x4xf32> loc("model.py":14:0)) -> tensor<4x4xf32> {
    %cst = arith.constant 0.000000e+00 : f32 loc(#loc1)
    %cst_0 = arith.constant dense_resource<torch_tensor_4_4_torch.float32> : tensor<4x4xf32> loc(#loc1)
    %cst_1 = arith.constant 1.000000e+00 : f32 loc(#loc)
    %0 = tensor.empty() : tensor<4x4xf32> loc(#loc1)
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<4x4xf32>) -> tensor<4x4xf32> loc(#loc1)
    %2 = linalg.matmul ins(%arg0, %cst_0 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%1 : tensor<4x4xf32>) -> tensor<4x4xf32> loc(#loc1)
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%2 : tensor<4x4xf32>) outs(%0 : tensor<4x4xf32>) {
    ^bb0(%in: f32 loc("model.py":14:0), %out: f32 loc("model.py":14:0)):
      %4 = arith.addf %in, %cst_1 : f32 loc(#loc1)
      linalg.yield %4 : f32 loc(#loc1)
    } -> tensor<4x4xf32> loc(#loc1)
    return %3 : tensor<4x4xf32> loc(#loc1)
  } loc(#loc1)
} loc(#loc)
#loc = loc(unknown)

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_4_4_torch.float32: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041"
    }
  }
#-}

