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

from collections.abc import Callable

import torch
from helion.language import matmul_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import LOW_PRECISION_FLOATS, element_type
from ..aten_calls import lower_aten_op
from ..context import RuleContext
from ..emitter import Emitter
from ..helion_compat import original_args
from ..registry import register_lowering
from ..values import Scalar, Tensor


@register_lowering(matmul_ops.dot)
def lower_dot(ctx: RuleContext, node: fx.Node) -> Tensor:
    """``hl.dot(a, b, acc, out_dtype)`` as Helion computes it: an accumulator of the inputs'
    dtype or of f32 (and no other ``out_dtype``) is the matmul's own; any other (an f16
    accumulator of bf16 inputs) is added to the product, which is computed on its own and
    rounded to the accumulator's dtype first."""
    a, b = ctx.tensor(node.args[0]), ctx.tensor(node.args[1])
    acc_arg = node.args[2] if len(node.args) > 2 else node.kwargs.get("acc")
    out_dtype = node.args[3] if len(node.args) > 3 else node.kwargs.get("out_dtype")
    result_dtype: torch.dtype = node.meta["val"].dtype
    if a.rank != b.rank or a.rank not in (2, 3):
        raise HelionMLIRError(f"dot of ranks {a.rank} and {b.rank} is not supported (2-D or batched 3-D)")
    emit = ctx.emit
    acc = ctx.tensor(acc_arg) if acc_arg is not None else None
    product_dtype = out_dtype or (torch.int32 if torch.int8 in (a.dtype, b.dtype) else torch.float32)
    # Integer sums are exact in either form; Helion fuses only these float accumulators.
    fusable = (torch.promote_types(a.dtype, b.dtype), torch.float32, torch.int32)
    if acc is not None and acc.dtype in fusable and out_dtype in (None, acc.dtype):
        return emit.cast(_matmul(emit, a, b, emit.cast(acc, result_dtype), result_dtype), result_dtype)
    accumulate_in = torch.float32 if _is_narrow_float(product_dtype) else product_dtype
    product = emit.cast(_matmul(emit, a, b, None, accumulate_in), product_dtype)
    if acc is None:
        return emit.cast(product, result_dtype)
    return _add(emit, emit.cast(acc, result_dtype), emit.cast(product, result_dtype))


def _add(emit: Emitter, x: Tensor, y: Tensor) -> Tensor:
    """``x + y`` of one dtype, broadcast to the shape they share."""
    op = "arith.addf" if x.dtype.is_floating_point else "arith.addi"
    elt = element_type(x.dtype)

    def body(args: list[str], _index: Callable[[int], str]) -> str:
        return emit.assign("acc", f"{op} {args[0]}, {args[1]} : {elt}")

    return emit.elementwise([x, y], y.shape, x.dtype, body, hint="dotacc")


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
