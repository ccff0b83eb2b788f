"""``hl.load`` and ``hl.store`` (and subscripts of host tensors): what a load reads and a
store writes is :mod:`..memory_access`'s (slices of the in-bounds part, gathers and
scatters, checks); these rules add what the nodes themselves say: the ``extra_mask``
operand, the lanes past a jagged tile's row end, and indexing a device value."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from helion.language import memory_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import PACKED_PAIR_DTYPES, element_type
from ..bounds import guarded_update, truthy
from ..context import RuleContext
from ..emitter import Emitter
from ..indexing import (
    AccessKind,
    extract_valid,
    new_axis_dims,
    settle_unit_dims,
    without_new_axes,
)
from ..jagged import (
    index_dims,
    jagged_condition,
    jagged_lane_mask,
    mask_jagged,
    value_dims,
)
from ..memory_access import (
    accesses_of,
    fit_to,
    insert_valid,
    load_value,
    positions_inside,
    scatter,
    valid_region,
    value_to_store,
)
from ..padding import padded_extent, widened
from ..ragged import mask_lanes
from ..registry import register_lowering
from ..unit_dims import drop_unit_dims, expand_dims, subscript_value
from ..values import Tensor


def _mask_for(emit: Emitter, mask: Tensor, value: Tensor) -> Tensor:
    """``mask`` as it lines up with ``value``: one entry per pair of a packed value."""
    if value.dtype not in PACKED_PAIR_DTYPES:
        return mask
    return emit.broadcast_to(expand_dims(emit, mask, [mask.rank]), value.shape)


def _apply_extra_mask(emit: Emitter, value: Tensor, mask: Tensor | None, fill: Any = 0) -> Tensor:
    if mask is None:
        return value
    mask = _mask_for(emit, mask, value)
    fill_c = emit.const(fill, element_type(value.dtype))

    def body(args: list[str], _i: Callable[[int], str]) -> str:
        cond = truthy(emit, args[1], mask.dtype)
        out = emit.assign("m", f"arith.select {cond}, {args[0]}, {fill_c.ssa} : {element_type(value.dtype)}")
        return out

    return emit.elementwise([value, mask], value.shape, value.dtype, body, hint="masked")


def _mask_arg(ctx: RuleContext, node: fx.Node, position: int) -> Tensor | None:
    """The optional ``extra_mask`` operand at ``position``."""
    return ctx.tensor(node.args[position]) if len(node.args) > position and node.args[position] is not None else None


def refuse_stack_tensor(node: fx.Node) -> None:
    """Refuse a memory operation on an ``hl.stacktensor_like`` (Helion passes it as the pair
    ``(tensor_like, dev_ptrs)``): it addresses memory through pointers read at run time."""
    if isinstance(node.args[0], tuple):
        raise HelionMLIRError(
            "memory operations on a stack tensor (hl.stacktensor_like) are not supported: it addresses tensors "
            "through device pointers read at run time, and the emitted function holds tensors as values, never "
            "memory at an address; pass the tensors as arguments (or torch.stack them) instead")


@register_lowering(memory_ops.load)
def lower_load(ctx: RuleContext, node: fx.Node) -> Tensor:
    """``hl.load(x, index, extra_mask)`` (and ``x[index]``): the addressed lanes of a host
    tensor (positions outside it read 0, a gather element by element), lanes past a
    jagged tile's row end and lanes ``extra_mask`` masks reading 0; indexing a device value
    with ``None`` and ``:`` is a reshape."""
    refuse_stack_tensor(node)
    host = ctx.host(node.args[0])
    if host is None:  # indexing a device value, e.g. tile.index[:, None]
        source = ctx.value(node.args[0])
        if not isinstance(source, Tensor):
            raise HelionMLIRError("memory operations need a host tensor as their first argument")
        return widened(ctx.emit, subscript_value(ctx.emit, source, list(node.args[1])), node.meta.get("val"))
    settle_unit_dims(ctx, host.name, node.args[1])
    emit = ctx.emit
    mask = _mask_arg(ctx, node, 2)
    accesses = accesses_of(ctx, host, node.args[1], node, masked=mask is not None)
    lanes = mask
    if mask is not None and host.value.dtype in PACKED_PAIR_DTYPES:  # one entry per pair
        lanes = expand_dims(emit, mask, [mask.rank])
    value = load_value(ctx, host.value, host.name, accesses, lanes)
    value = mask_jagged(ctx, value_dims(node), value, 0)  # lanes past a jagged tile's row end read 0
    return _apply_extra_mask(emit, value, mask)


def _select_tensors(emit: Emitter, mask: Tensor, a: Tensor, b: Tensor) -> Tensor:
    def body(args: list[str], _i: Callable[[int], str]) -> str:
        cond = truthy(emit, args[0], mask.dtype)
        out = emit.assign("sel", f"arith.select {cond}, {args[1]}, {args[2]} : {element_type(a.dtype)}")
        return out

    return emit.elementwise([mask, a, b], a.shape, a.dtype, body, hint="select")


@register_lowering(memory_ops.store, writes=0)
def lower_store(ctx: RuleContext, node: fx.Node) -> None:
    """``x[index] = value``: the destination's new value is the old one with the
    addressed lanes replaced (in-bounds lanes of a tile; element by element for a scatter);
    a store at a position outside the destination does nothing. Lanes past a jagged
    tile's row end are not stored, as lanes ``extra_mask`` masks."""
    refuse_stack_tensor(node)
    host = ctx.destination
    dest = host.value
    value_node = node.args[2]
    extra_mask = _mask_arg(ctx, node, 3)
    accesses = accesses_of(ctx, host, node.args[1], value_node, masked=extra_mask is not None)
    emit = ctx.emit
    value = value_to_store(emit, ctx.value(value_node), dest, accesses)
    dims = index_dims(ctx, node.args[1], value.rank)
    mask = _lanes_of(emit, fit_to(emit, _mask_for(emit, extra_mask, value), value.shape), value) if extra_mask is not None else None
    units = new_axis_dims(accesses)  # x[None, :, j] = v: the unit dims of None entries address nothing
    if units:
        value = drop_unit_dims(emit, value, units)
        mask = drop_unit_dims(emit, mask, units) if mask is not None else None
        dims = [d for axis, d in enumerate(dims) if axis not in units]
        accesses = without_new_axes(accesses)
    if any(a.kind is AccessKind.TENSOR for a in accesses):
        mask = _and_masks(emit, mask, jagged_lane_mask(ctx, dims, value))
        mask = _and_masks(emit, mask, _real_lanes(emit, value, node.args[1]))
        ctx.write(scatter(emit, dest, host.name, accesses, value, mask, lambda old, new, _t: new, keep_old=False)[0])
        return None
    valid = valid_region(emit, value, accesses)
    on = valid_region(emit, mask, accesses) if mask is not None else None
    inside = positions_inside(emit, dest, host.name, accesses, mask)
    jagged = jagged_condition(ctx, dims) is not None

    def store(current: list[Tensor]) -> list[Tensor]:
        kept = valid if on is None else _select_tensors(emit, on, valid, extract_valid(emit, current[0], accesses))
        if jagged:
            kept = mask_jagged(ctx, dims, kept, extract_valid(emit, current[0], accesses))
        return [insert_valid(emit, current[0], kept, accesses)]

    ctx.write(guarded_update(emit, inside, store, [dest])[0])
    return None


def _real_lanes(emit: Emitter, value: Tensor, index: Sequence[Any]) -> Tensor | None:
    """An i1 tensor of ``value``'s shape, true on the lanes inside the real size of each padded
    whole dim (:mod:`..padding`) of the index tensors; None when they have none. A scatter's
    positions in the padding lanes (``rows[:, None] * d + hl.arange(d)[None, :]`` over 16 lanes
    for ``d = 12``) address other elements of the tensor: Helion's code masks them, so no lane
    there is stored. Dims are read from Helion's shapes, where a tile's size is a symbol and a
    padded whole dim a number, never from the emitted shape (a tile of 16 is not padding)."""
    dims: dict[int, int] = {}
    for entry in index:
        val = entry.meta.get("val") if isinstance(entry, fx.Node) else None
        if not isinstance(val, torch.Tensor) or val.dim() > value.rank:
            continue
        offset = value.rank - val.dim()  # index tensors broadcast from the right
        for axis, size in enumerate(val.shape):
            if (extent := padded_extent(size)) is not None and value.shape[offset + axis] == size:
                dims[offset + axis] = extent
    if not dims:
        return None
    return mask_lanes(emit, emit.fill(value.shape, torch.bool, True), sorted(dims.items()), False)


def _lanes_of(emit: Emitter, mask: Tensor, value: Tensor) -> Tensor:
    """``mask`` broadcast to ``value``'s lanes, a unit dim to a dynamic one too (``fit_to`` keeps
    a unit dim where the target is dynamic: ``keep[tile][:, None]`` against ``d`` dynamic columns
    stayed one column wide, and the scatter read it at every column, past its end)."""
    if mask.shape == value.shape:
        return mask
    return emit.elementwise([value, mask], value.shape, mask.dtype, lambda args, _index: args[1], hint="mask")


def _and_masks(emit: Emitter, a: Tensor | None, b: Tensor | None) -> Tensor | None:
    if a is None or b is None:
        return a if b is None else b

    def body(args: list[str], _i: Callable[[int], str]) -> str:
        return emit.assign("both", f"arith.andi {truthy(emit, args[0], a.dtype)}, {args[1]} : i1")

    return emit.elementwise([a, b], b.shape, torch.bool, body, hint="mask")
