module {
  func.func @aten_op() -> tensor<4x4xf32> {
    %cst = arith.constant dense<0xFF800000> : tensor<4x4xf32> loc(#loc)
    return %cst : tensor<4x4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)

