"""Integer divisions and remainders of tile values: checked mode raises for a zero divisor in a
lane the kernel computes, as torch raises ``ZeroDivisionError``.

Unchecked, a division by zero gives a defined value (docs/abi.md, "Integer division by zero"):
the CPU pipelines guard every division, and in checked mode they assert each device scalar
divisor non-zero (``runtime/cpu/rewrites/tensor/integer_division.py``). A division of tile
values is a linalg body there, whose lanes past a ragged tile's end (or Helion's padded whole
dim, or a jagged row's end) divide by the zeros their loads pad with: the pipeline cannot tell
them from the others, the lowering can. So here, in checked mode, before such a division
(``//``, ``%``, ``torch.remainder``, ``torch.fmod``, ``torch.div`` with a rounding mode, by a
tensor or a scalar), an ``any`` reduction finds a real lane whose divisor is 0 and a
``cf.assert`` with the pipeline's message (:data:`~helion_mlir.errors.DIVISION_BY_ZERO_CHECK`)
refuses it, which the call raises as ``DivisionByZeroError`` naming the kernel line. The
division itself goes through torch-mlir as every ATen op.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from ...errors import DIVISION_BY_ZERO_CHECK
from ...mlir_types import element_type
from ..aten_calls import aligned_to_result, lower_aten_op, traced_call
from ..bounds import any_lane
from ..context import RuleContext
from ..emitter import broadcast_shapes
from ..jagged import jagged_condition, value_dims
from ..ragged import padding_extents
from ..registry import register_lowering
from ..values import Tensor

aten = torch.ops.aten

#: The ATen ops that divide (integers, when their result is an integer): the divisor is
#: their second argument.
INTEGER_DIVISIONS = (
    aten.floor_divide.default, aten.floor_divide.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode,
    aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor, aten.fmod.Tensor, aten.fmod.Scalar,
)


@register_lowering(*INTEGER_DIVISIONS)
def lower_division(ctx: RuleContext, node: fx.Node) -> Any:
    """The division through torch-mlir, after checked mode's check of its integer divisor."""
    meta = node.meta.get("val")
    if ctx.emit.checked and isinstance(meta, torch.Tensor) and _is_integer(meta.dtype):
        _check_divisor(ctx, node)
    return lower_aten_op(ctx, node)


def _is_integer(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def _check_divisor(ctx: RuleContext, node: fx.Node) -> None:
    """Assert that no lane of ``node``'s result the kernel computes divides by zero."""
    args, _kwargs = traced_call(node)
    dividend, divisor = aligned_to_result(ctx, node, args[:2], [ctx.value(a) for a in args[:2]])
    tensors = [v for v in (divisor, dividend) if isinstance(v, Tensor)]
    if not tensors or (isinstance(divisor, (int, bool)) and divisor != 0):
        return  # numbers alone, or a literal divisor that is not 0
    emit = ctx.emit
    shape = broadcast_shapes(*(t.shape for t in tensors))
    padding = padding_extents(ctx, node, len(shape))
    jagged = jagged_condition(ctx, value_dims(node))
    scalar_is_zero = None
    if not isinstance(divisor, Tensor):  # as the division converts it, to the result's type
        elt = element_type(node.meta["val"].dtype)
        scalar_is_zero = emit.binary("arith.cmpi eq", emit.convert(divisor, elt), emit.const(0, elt)).ssa

    def by_zero(block_args: list[str], index_of: Callable[[int], str]) -> str:
        zero = scalar_is_zero
        if zero is None:
            elt = element_type(tensors[0].dtype)
            zero = emit.assign("byzero", f"arith.cmpi eq, {block_args[0]}, {emit.const(0, elt).ssa} : {elt}")
        for real in (emit.lanes_in_bounds([(index_of(dim), extent) for dim, extent in padding]),
                     jagged(index_of) if jagged is not None else None):
            if real is not None:
                zero = emit.assign("byzero", f"arith.andi {zero}, {real} : i1")
        return zero

    lanes = emit.elementwise(tensors, shape, torch.bool, by_zero, hint="byzero")
    none = emit.assign("nonzero", f"arith.xori {any_lane(emit, lanes)}, {emit.const(True, 'i1').ssa} : i1")
    emit.check(none, DIVISION_BY_ZERO_CHECK)
