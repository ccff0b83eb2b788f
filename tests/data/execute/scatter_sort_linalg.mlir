// Emitted by torch-mlir 20261001 (FxImporter, then the linalg-on-tensors pipeline) for
// (x.index_put((idx,), src, accumulate=True), torch.sort(x, dim=1).values) with
// x: 6x4 f32, idx: 4 i64, src: 4x4 f32.
#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @scatter_sort(%arg0: tensor<6x4xf32>, %arg1: tensor<4xi64>, %arg2: tensor<4x4xf32>) -> (tensor<6x4xf32>, tensor<6x4xf32>) {
    %expanded = tensor.expand_shape %arg1 [[0, 1]] output_shape [4, 1] : tensor<4xi64> into tensor<4x1xi64>
    %expanded_0 = tensor.expand_shape %arg2 [[0], [1, 2]] output_shape [4, 1, 4] : tensor<4x4xf32> into tensor<4x1x4xf32>
    %0 = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false) ins(%expanded_0, %expanded : tensor<4x1x4xf32>, tensor<4x1xi64>) outs(%arg0 : tensor<6x4xf32>) {
    ^bb0(%arg3: f32, %arg4: f32):
      %4 = arith.addf %arg4, %arg3 : f32
      tm_tensor.yield %4 : f32
    } -> tensor<6x4xf32>
    %1 = tensor.empty() : tensor<6x4xi64>
    %2 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel"]} outs(%1 : tensor<6x4xi64>) {
    ^bb0(%out: i64):
      %4 = linalg.index 1 : index
      %5 = arith.index_cast %4 : index to i64
      linalg.yield %5 : i64
    } -> tensor<6x4xi64>
    %3:2 = tm_tensor.sort dimension(1) outs(%arg0, %2 : tensor<6x4xf32>, tensor<6x4xi64>) {
    ^bb0(%arg3: f32, %arg4: f32, %arg5: i64, %arg6: i64):
      %4 = arith.cmpf ole, %arg3, %arg4 : f32
      tm_tensor.yield %4 : i1
    } -> tensor<6x4xf32>, tensor<6x4xi64>
    return %0, %3#0 : tensor<6x4xf32>, tensor<6x4xf32>
  }
}
