"""Views of device values: ``subscript`` (new axes, slices), ``split``, ``join`` and ``alias``."""

from __future__ import annotations

import torch
from helion.language import view_ops
from torch import fx

from ...errors import HelionMLIRError
from ..context import RuleContext
from ..helion_compat import original_args
from ..packed_pairs import unpack_pair_halves
from ..padding import widened
from ..registry import register_lowering
from ..unit_dims import subscript_value
from ..values import Tensor


@register_lowering(view_ops.subscript)
def lower_subscript(ctx: RuleContext, node: fx.Node) -> Tensor:
    value = subscript_value(ctx.emit, ctx.tensor(node.args[0]), list(node.args[1]))
    return widened(ctx.emit, value, node.meta.get("val"))  # Helion pads hl.arange(37)[None, :] to 64 lanes


@register_lowering(view_ops.split)
def lower_split(ctx: RuleContext, node: fx.Node) -> tuple[Tensor, Tensor]:
    value = ctx.tensor(node.args[0])
    if value.shape[-1] not in (2, None):
        raise HelionMLIRError("split needs a last dimension of size 2")
    return unpack_pair_halves(ctx.emit, value)


@register_lowering(view_ops.join)
def lower_join(ctx: RuleContext, node: fx.Node) -> Tensor:
    """``hl.join(a, b)``: both operands cast to the result dtype and broadcast to one shape,
    inserted as the two entries of a new last dimension of size 2."""
    a, b = ctx.tensor(node.args[0]), ctx.tensor(node.args[1])
    shape = ctx.static_shape(node.meta["val"])[:-1]
    emit = ctx.emit
    a = emit.broadcast_to(emit.cast(a, node.meta["val"].dtype), shape)
    b = emit.broadcast_to(emit.cast(b, node.meta["val"].dtype), shape)
    dims = [emit.dim(a, i) if d is None else d for i, d in enumerate(shape)]
    out = emit.empty(tuple(shape) + (2,), a.dtype, [d for d in dims if not isinstance(d, int)])
    rank = len(shape) + 1
    sizes = ", ".join([str(d) if isinstance(d, int) else d.ssa for d in dims] + ["1"])
    strides = ", ".join(["1"] * rank)
    for which, part in enumerate((a, b)):
        offsets = ", ".join(["0"] * (rank - 1) + [str(which)])
        nxt = Tensor(emit.fresh("join"), out.shape, out.dtype)
        emit.op(f"{nxt.ssa} = tensor.insert_slice {part.ssa} into {out.ssa}[{offsets}] [{sizes}] [{strides}] : {part.type} into {out.type}")
        out = nxt
    return out


@register_lowering(torch.ops.aten.alias.default)
def lower_alias(ctx: RuleContext, node: fx.Node) -> Tensor:
    """``aten.alias`` (Helion puts one after ``.view(dtype)``): under value semantics, its input."""
    recorded = original_args(node)
    return ctx.tensor((recorded[1] if recorded is not None else node.args)[0])
