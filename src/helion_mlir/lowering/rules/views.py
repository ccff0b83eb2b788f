"""Views of device values: ``subscript`` (new axes, slices), ``split``, ``join`` and ``alias``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from helion.language import view_ops
from torch import fx

from ...errors import HelionMLIRError
from ..context import RuleContext
from ..emitter import Emitter
from ..helion_compat import original_args
from ..padding import widened
from ..registry import register_lowering
from ..values import Tensor


def expand_dims(emit: Emitter, value: Tensor, new_axes: list[int]) -> Tensor:
    """Insert unit dimensions at the output positions ``new_axes``."""
    if not new_axes:
        return value
    out_rank = value.rank + len(new_axes)
    shape: list[int | None] = []
    source = iter(range(value.rank))
    groups: list[list[int]] = []
    pending: list[int] = []
    for pos in range(out_rank):
        if pos in new_axes:
            shape.append(1)
            pending.append(pos)
        else:
            src = next(source)
            shape.append(value.shape[src])
            groups.append(pending + [pos])
            pending = []
    if pending and groups:
        groups[-1].extend(pending)
    reassoc = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
    sizes = []
    for pos, size in enumerate(shape):
        if size is None:
            src = next(i for i, g in enumerate(groups) if pos in g)
            sizes.append(emit.dim(value, src).ssa)  # type: ignore[union-attr]
        else:
            sizes.append(str(size))
    result = Tensor(emit.fresh("expand"), tuple(shape), value.dtype)
    emit.op(f"{result.ssa} = tensor.expand_shape {value.ssa} {reassoc} output_shape [{', '.join(sizes)}] : {value.type} into {result.type}")
    return result


def drop_unit_dims(emit: Emitter, value: Tensor, axes: Sequence[int]) -> Tensor:
    """``value`` without its unit dimensions ``axes`` (the inverse of :func:`expand_dims`)."""
    if not axes:
        return value
    if any(value.shape[axis] != 1 for axis in axes):
        raise HelionMLIRError(f"dimensions {list(axes)} of a value of shape {value.shape} are not all of size 1")
    groups: list[list[int]] = []
    pending: list[int] = []
    for axis in range(value.rank):
        pending.append(axis)
        if axis not in axes:
            groups.append(pending)
            pending = []
    if pending and groups:
        groups[-1].extend(pending)
    reassoc = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
    result = Tensor(emit.fresh("collapse"), tuple(s for a, s in enumerate(value.shape) if a not in axes), value.dtype)
    emit.op(f"{result.ssa} = tensor.collapse_shape {value.ssa} {reassoc} : {value.type} into {result.type}")
    return result


def subscript_value(emit: Emitter, value: Tensor, index: list[object]) -> Tensor:
    """``value[index]`` for a device value and an index of ``None`` and ``:`` entries."""
    new_axes: list[int] = []
    for pos, entry in enumerate(index):
        if entry is None:
            new_axes.append(pos)
        elif not (isinstance(entry, slice) and entry == slice(None)):
            raise HelionMLIRError(f"index {entry!r} of a device value is not supported (only None and ':')")
    return expand_dims(emit, value, new_axes)


@register_lowering(view_ops.subscript)
def lower_subscript(ctx: RuleContext, node: fx.Node) -> Tensor:
    value = subscript_value(ctx.emit, ctx.tensor(node.args[0]), list(node.args[1]))
    return widened(ctx.emit, value, node.meta.get("val"))  # Helion pads hl.arange(37)[None, :] to 64 lanes


def _take_last(emit: Emitter, value: Tensor, which: int) -> Tensor:
    rank = value.rank
    offsets = ", ".join(["0"] * (rank - 1) + [str(which)])
    sizes = ", ".join([str(d) if d is not None else emit.dim(value, i).ssa for i, d in enumerate(value.shape[:-1])] + ["1"])  # type: ignore[union-attr]
    strides = ", ".join(["1"] * rank)
    result = Tensor(emit.fresh("half"), value.shape[:-1], value.dtype)
    emit.op(f"{result.ssa} = tensor.extract_slice {value.ssa}[{offsets}] [{sizes}] [{strides}] : {value.type} to {result.type}")
    return result


@register_lowering(view_ops.split)
def lower_split(ctx: RuleContext, node: fx.Node) -> tuple[Tensor, Tensor]:
    value = ctx.tensor(node.args[0])
    if value.shape[-1] not in (2, None):
        raise HelionMLIRError("split needs a last dimension of size 2")
    return _take_last(ctx.emit, value, 0), _take_last(ctx.emit, value, 1)


@register_lowering(view_ops.join)
def lower_join(ctx: RuleContext, node: fx.Node) -> Tensor:
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
