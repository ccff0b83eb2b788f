#loc = loc(unknown)
module {
  func.func @aten_op(%arg0: !torch.vtensor<[4,8],f32> loc(unknown)) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],si64>) {
    %int1 = torch.constant.int 1 loc(#loc)
    %false = torch.constant.bool false loc(#loc)
    %values, %indices = torch.aten.max.dim %arg0, %int1, %false : !torch.vtensor<[4,8],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4],f32>, !torch.vtensor<[4],si64> loc(#loc)
    return %values, %indices : !torch.vtensor<[4],f32>, !torch.vtensor<[4],si64> loc(#loc)
  } loc(#loc)
} loc(#loc)

