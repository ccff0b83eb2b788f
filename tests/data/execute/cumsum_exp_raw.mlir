// Emitted by torch-mlir 20261001 (FxImporter, raw torch dialect) for
// (torch.cumsum(x, 1), torch.exp(x) * y) on 5x13 f32 tensors.
module {
  func.func @cumsum_exp(%arg0: !torch.vtensor<[5,13],f32>, %arg1: !torch.vtensor<[5,13],f32>) -> (!torch.vtensor<[5,13],f32>, !torch.vtensor<[5,13],f32>) {
    %int1 = torch.constant.int 1
    %none = torch.constant.none
    %0 = torch.aten.cumsum %arg0, %int1, %none : !torch.vtensor<[5,13],f32>, !torch.int, !torch.none -> !torch.vtensor<[5,13],f32>
    %1 = torch.aten.exp %arg0 : !torch.vtensor<[5,13],f32> -> !torch.vtensor<[5,13],f32>
    %2 = torch.aten.mul.Tensor %1, %arg1 : !torch.vtensor<[5,13],f32>, !torch.vtensor<[5,13],f32> -> !torch.vtensor<[5,13],f32>
    return %0, %2 : !torch.vtensor<[5,13],f32>, !torch.vtensor<[5,13],f32>
  }
}
