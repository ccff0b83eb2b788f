"""Tile queries, masking and tensor creation.

``tile.index`` is the vector of positions a tile covers; ``tile.begin``/``end``/``id``
are scalars of the active tile loop. ``_mask_to`` sets the padding lanes of ragged
tiles (see :class:`helion_mlir.lowering.values.Tile`), the lanes past a jagged tile's
row ends and the padding lanes of a padded whole dim (:mod:`..padding`) to the value a
reduction or dot needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from helion.language import _tracing_ops, creation_ops, tile_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import element_type
from ..context import RuleContext
from ..jagged import mask_jagged, value_dims
from ..padding import is_padded_whole_dim
from ..ragged import mask_lanes, padding_extents
from ..registry import register_lowering
from ..symbolic import TileProperty, tile_scalar
from ..values import Scalar, Tensor, Tile


def active_tile(ctx: RuleContext, arg: Any) -> Tile:
    """The active tile a tile argument (a block-size node) refers to."""
    tile = ctx.tile_of(arg.meta.get("val") if isinstance(arg, fx.Node) else arg)
    if tile is None:
        raise HelionMLIRError(f"{arg} is not a tile of an enclosing loop")
    return tile


@register_lowering(tile_ops.tile_index)
def lower_tile_index(ctx: RuleContext, node: fx.Node) -> Tensor:
    """``tile.index``: the positions a tile covers, its offset plus ``linalg.index``, in the
    node's dtype (as long as the tile's extent when its block size is known only at run time)."""
    tile = active_tile(ctx, node.args[0])
    dtype = node.meta["val"].dtype
    emit = ctx.emit
    offset = emit.index(tile.offset)

    def body(_args: list[str], index_of: Callable[[int], str]) -> str:
        pos = emit.assign("pos", f"arith.addi {offset.ssa}, {index_of(0)} : index")
        return emit.convert(Scalar(pos, "index"), element_type(dtype)).ssa

    dynamic = [] if tile.size is not None else [emit.index(tile.extent)]
    return emit.elementwise([], (tile.size,), dtype, body, hint="tile_index", dynamic_sizes=dynamic)


def _tile_property(what: TileProperty) -> Callable[[RuleContext, fx.Node], Scalar | int]:
    def rule(ctx: RuleContext, node: fx.Node) -> Scalar | int:
        return tile_scalar(ctx.emit, active_tile(ctx, node.args[0]), what)

    rule.__name__ = f"lower_tile_{what.value}"
    rule.__doc__ = f"``tile.{what.value}`` of the active tile."
    return rule


for _target, _what in ((tile_ops.tile_begin, TileProperty.BEGIN), (tile_ops.tile_end, TileProperty.END),
                       (tile_ops.tile_id, TileProperty.ID), (tile_ops.tile_count, TileProperty.COUNT)):
    register_lowering(_target)(_tile_property(_what))


@register_lowering(tile_ops.tile_block_size)
def lower_tile_block_size(ctx: RuleContext, node: fx.Node) -> Scalar | int:
    return active_tile(ctx, node.args[0]).block_size


@register_lowering(_tracing_ops._mask_to)
def lower_mask_to(ctx: RuleContext, node: fx.Node) -> Tensor:
    value = ctx.tensor(node.args[0])
    fill = node.args[1]
    if isinstance(fill, (fx.Node, torch.SymInt, torch.SymFloat, torch.SymBool)):
        fill = ctx.value(fill) if isinstance(fill, fx.Node) else ctx.eval_symbolic(fill)
    masked = mask_lanes(ctx.emit, value, padding_extents(ctx, node, value.rank, source=node.args[0]), fill)
    return mask_jagged(ctx, value_dims(node), masked, fill)


@register_lowering(creation_ops.full)
def lower_full(ctx: RuleContext, node: fx.Node) -> Tensor:
    """``hl.full`` (and ``hl.zeros``, which calls it): a tensor of a static or run-time shape
    filled with a number or a scalar value."""
    shape_arg, value_arg, dtype = node.args[0], node.args[1], node.args[2]
    sizes = [ctx.value(s) for s in shape_arg]
    if not all(isinstance(s, (int, Scalar)) for s in sizes):
        raise HelionMLIRError(f"tensor sizes {sizes} are not integers")
    meta = node.meta.get("val")
    if isinstance(meta, torch.Tensor) and meta.dim() == len(sizes):  # Helion pads hl.full([56]) to 64 lanes
        sizes = [m if isinstance(s, int) and is_padded_whole_dim(m, s) else s for s, m in zip(sizes, meta.shape)]
    shape = [s if isinstance(s, int) else None for s in sizes]
    dynamic = [ctx.emit.index(s) for s in sizes if isinstance(s, Scalar)]
    value = ctx.value(value_arg)
    if isinstance(value, Tensor):
        value = ctx.scalar(value_arg, element_type(dtype))
    return ctx.emit.fill(shape, dtype, value, dynamic)


@register_lowering(_tracing_ops._constant_tensor)
def lower_constant_tensor(ctx: RuleContext, node: fx.Node) -> Tensor:
    value, dtype = node.args[0], node.args[1]
    return ctx.emit.fill((), dtype, value)
