"""``hl.dot``, and torch's matmuls of 8-bit float tiles: tile matrix products.

Operands keep their dtypes; ``linalg.matmul`` extends them to the accumulator type, so
bf16 x bf16 (or f8 x f8) with an f32 accumulator computes in f32 exactly as the kernel
asks. Without an accumulator a half-precision or 8-bit float product still accumulates
in f32 and is rounded once.

``torch.matmul`` / ``mm`` / ``bmm`` / ``addmm`` / ``baddbmm`` of float8 tiles return float8
in torch, computed in f32 and rounded once; torch-mlir's lowerings would accumulate in
float8 itself, so those are lowered here too, as are operands of mixed dtypes (an f32
accumulator with bf16 factors: torch refuses them, Helion's ``tl.dot`` accumulates in the
result's dtype). Other matmuls still go through torch-mlir.
"""

from __future__ import annotations

import torch
from helion.language import matmul_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import LOW_PRECISION_FLOATS, element_type
from ..context import RuleContext
from ..emitter import Emitter
from ..helion_compat import original_args
from ..registry import register_lowering
from ..values import Scalar, Tensor
from .aten import lower_aten_op


@register_lowering(matmul_ops.dot)
def lower_dot(ctx: RuleContext, node: fx.Node) -> Tensor:
    a, b = ctx.tensor(node.args[0]), ctx.tensor(node.args[1])
    acc_arg = node.args[2] if len(node.args) > 2 else None
    result_dtype: torch.dtype = node.meta["val"].dtype
    if a.rank != b.rank or a.rank not in (2, 3):
        raise HelionMLIRError(f"dot of ranks {a.rank} and {b.rank} is not supported (2-D or batched 3-D)")
    accumulate_in = result_dtype
    if acc_arg is None and _is_narrow_float(result_dtype):
        accumulate_in = torch.float32
    acc = ctx.emit.cast(ctx.tensor(acc_arg), accumulate_in) if acc_arg is not None else None
    return ctx.emit.cast(_matmul(ctx.emit, a, b, acc, accumulate_in), result_dtype)


def _is_narrow_float(dtype: torch.dtype) -> bool:
    return dtype in (torch.float16, torch.bfloat16) or (dtype.is_floating_point and dtype.itemsize == 1)


def _matmul(emit: Emitter, a: Tensor, b: Tensor, acc: Tensor | None, accumulate_in: torch.dtype) -> Tensor:
    """``acc + a @ b`` (2-D, or batched 3-D) accumulated in ``accumulate_in``."""
    shape = tuple(a.shape[:-1]) + (b.shape[-1],)
    if acc is not None:
        init = emit.broadcast_to(acc, shape)
    else:  # dynamic result dims (whole dims with static_shapes=False) take their size from the operands
        sizes = [emit.dim(a, axis) for axis in range(a.rank - 1)] + [emit.dim(b, b.rank - 1)]
        init = emit.fill(shape, accumulate_in, 0, [size for size in sizes if isinstance(size, Scalar)])
    op = "linalg.matmul" if a.rank == 2 else "linalg.batch_matmul"
    result = Tensor(emit.fresh("dot"), shape, accumulate_in)
    emit.op(f"{result.ssa} = {op} ins({a.ssa}, {b.ssa} : {a.type}, {b.type}) outs({init.ssa} : {init.type}) -> {init.type}")
    return result


_aten = torch.ops.aten
_WITH_INPUT = (_aten.addmm.default, _aten.baddbmm.default)


@register_lowering(_aten.mm.default, _aten.bmm.default, _aten.addmm.default, _aten.baddbmm.default)
def lower_torch_matmul(ctx: RuleContext, node: fx.Node) -> Tensor:
    """Float8 operands: f32 accumulation rounded once, as torch computes; others: torch-mlir."""
    recorded = original_args(node)
    args = tuple(recorded[1]) if recorded is not None else tuple(node.args)
    kwargs = dict(recorded[2]) if recorded is not None else dict(node.kwargs)
    operands = [ctx.tensor(arg) for arg in args[:3 if node.target in _WITH_INPUT else 2]]
    mixed = len({t.dtype for t in operands}) > 1  # torch refuses them; Helion accumulates as tl.dot does
    if not mixed and not any(element_type(t.dtype) in LOW_PRECISION_FLOATS for t in operands):
        return lower_aten_op(ctx, node)
    if kwargs.get("beta", 1) != 1 or kwargs.get("alpha", 1) != 1:  # Helion 1.5.1 refuses them at bind
        raise HelionMLIRError("addmm/baddbmm of float8 or mixed-dtype tiles with beta or alpha is not supported")
    result_dtype: torch.dtype = node.meta["val"].dtype
    accumulate_in = torch.float32 if _is_narrow_float(result_dtype) else result_dtype
    acc = ctx.emit.cast(operands[0], accumulate_in) if node.target in _WITH_INPUT else None
    a, b = operands[-2:]
    return ctx.emit.cast(_matmul(ctx.emit, a, b, acc, accumulate_in), result_dtype)
