// Emitted by torch-mlir 20261001 (FxImporter, then the linalg-on-tensors pipeline) for
// (torch.cumsum(x, 1), torch.exp(x) * y) on 5x13 f32 tensors.
#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @cumsum_exp(%arg0: tensor<5x13xf32>, %arg1: tensor<5x13xf32>) -> (tensor<5x13xf32>, tensor<5x13xf32>) {
    %cst = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<5x13xf32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<5x13xf32>) -> tensor<5x13xf32>
    %2 = tensor.empty() : tensor<5xf32>
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<5xf32>) -> tensor<5xf32>
    %4:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%arg0 : tensor<5x13xf32>) outs(%1, %3 : tensor<5x13xf32>, tensor<5xf32>) {
    ^bb0(%arg2: f32, %arg3: f32):
      %7 = arith.addf %arg2, %arg3 : f32
      tm_tensor.yield %7 : f32
    } -> tensor<5x13xf32>, tensor<5xf32>
    %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0 : tensor<5x13xf32>) outs(%0 : tensor<5x13xf32>) {
    ^bb0(%in: f32, %out: f32):
      %7 = math.exp %in : f32
      linalg.yield %7 : f32
    } -> tensor<5x13xf32>
    %6 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%5, %arg1 : tensor<5x13xf32>, tensor<5x13xf32>) outs(%0 : tensor<5x13xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %7 = arith.mulf %in, %in_0 : f32
      linalg.yield %7 : f32
    } -> tensor<5x13xf32>
    return %4#0, %6 : tensor<5x13xf32>, tensor<5x13xf32>
  }
}
