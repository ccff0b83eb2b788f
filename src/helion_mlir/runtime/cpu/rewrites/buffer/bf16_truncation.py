"""A definition of ``__truncsfbf2`` (f32 -> bf16) in the module, for the JIT.

bf16 conversions are expanded to integer ops (``arith-expand{include-bf16=true}``), but
LLVM's optimizer recognizes that idiom and turns it back into an ``fptrunc``, which x86
lowers to a call of this compiler-rt helper; the in-process JIT has no compiler-rt. The
definition is ``optnone`` so that the optimizer cannot fold it into a call of itself.
"""

from __future__ import annotations

from torch_mlir import ir

__all__ = ["define_bf16_truncation"]

_TRUNCSFBF2 = """
func.func private @__truncsfbf2(%x: f32) -> bf16 attributes {passthrough = ["noinline", "optnone"]} {
  %bits = arith.bitcast %x : f32 to i32
  %c16 = arith.constant 16 : i32
  %c1 = arith.constant 1 : i32
  %bias = arith.constant 32767 : i32
  %quiet_nan = arith.constant 32704 : i16
  %high = arith.shrui %bits, %c16 : i32
  %lsb = arith.andi %high, %c1 : i32
  %rounding = arith.addi %bias, %lsb : i32
  %rounded = arith.addi %bits, %rounding : i32
  %shifted = arith.shrui %rounded, %c16 : i32
  %narrow = arith.trunci %shifted : i32 to i16
  %is_nan = arith.cmpf uno, %x, %x : f32
  %result = arith.select %is_nan, %quiet_nan, %narrow : i16
  %as_bf16 = arith.bitcast %result : i16 to bf16
  return %as_bf16 : bf16
}
"""


def define_bf16_truncation(module: ir.Module) -> None:
    """Add ``@__truncsfbf2`` (round to nearest even, NaN kept quiet) when the module uses bf16."""
    if "bf16" not in str(module.operation):
        return
    helper = ir.Module.parse(_TRUNCSFBF2)
    for op in helper.body.operations:
        op.operation.clone(ir.InsertionPoint(module.body))
