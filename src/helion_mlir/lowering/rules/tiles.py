"""Tile queries, masking and tensor creation.

``tile.index`` is the vector of positions a tile covers; ``tile.begin``/``end``/``id``
are scalars of the active tile loop. ``_mask_to`` sets the padding lanes of ragged
tiles (see :class:`helion_mlir.lowering.values.Tile`) to the value a reduction or dot needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from helion.language import _tracing_ops, creation_ops, tile_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import element_type
from ..registry import register_lowering
from ..symbolic import tile_scalar
from ..values import Scalar, Tensor, Tile

if TYPE_CHECKING:
    from ..visitor import IRVisitor


def active_tile(v: "IRVisitor", arg: Any) -> Tile:
    """The active tile a tile argument (a block-size node) refers to."""
    val = arg.meta.get("val") if isinstance(arg, fx.Node) else arg
    block_id = v.model.block_id_of(val)
    if block_id is None or block_id not in v.tiles:
        raise HelionMLIRError(f"{arg} is not a tile of an enclosing loop")
    return v.tiles[block_id]


@register_lowering(tile_ops.tile_index)
def lower_tile_index(v: "IRVisitor", node: fx.Node) -> Tensor:
    tile = active_tile(v, node.args[0])
    dtype = node.meta["val"].dtype
    offset = v.ops.index(tile.offset)

    def body(_args: list[str], index_of: Callable[[int], str]) -> str:
        pos = v.ops.fresh("pos")
        v.ops.op(f"{pos} = arith.addi {offset.ssa}, {index_of(0)} : index")
        return v.ops.convert(Scalar(pos, "index"), element_type(dtype)).ssa

    dynamic = [] if tile.size is not None else [v.ops.index(tile.extent)]
    return v.ops.elementwise([], (tile.size,), dtype, body, hint="tile_index", dynamic_sizes=dynamic)


@register_lowering(tile_ops.tile_begin)
def lower_tile_begin(v: "IRVisitor", node: fx.Node) -> Scalar | int:
    return tile_scalar(v, active_tile(v, node.args[0]), "begin")


@register_lowering(tile_ops.tile_end)
def lower_tile_end(v: "IRVisitor", node: fx.Node) -> Scalar | int:
    return tile_scalar(v, active_tile(v, node.args[0]), "end")


@register_lowering(tile_ops.tile_id)
def lower_tile_id(v: "IRVisitor", node: fx.Node) -> Scalar | int:
    return tile_scalar(v, active_tile(v, node.args[0]), "id")


@register_lowering(tile_ops.tile_count)
def lower_tile_count(v: "IRVisitor", node: fx.Node) -> Scalar | int:
    return tile_scalar(v, active_tile(v, node.args[0]), "count")


@register_lowering(tile_ops.tile_block_size)
def lower_tile_block_size(v: "IRVisitor", node: fx.Node) -> Scalar | int:
    return active_tile(v, node.args[0]).block_size


def ragged_dims(v: "IRVisitor", node: fx.Node, rank: int) -> list[tuple[int, Tile]]:
    """(dimension, tile) for every dimension of ``node``'s value that is a ragged active tile."""
    val = node.meta.get("val")
    found = []
    if isinstance(val, torch.Tensor):
        for dim, size in enumerate(val.shape[-rank:] if rank else []):
            block_id = v.model.block_id_of(size)
            if block_id is not None and block_id in v.tiles and v.tiles[block_id].ragged:
                found.append((dim + len(val.shape) - rank, v.tiles[block_id]))
    return found


def mask_lanes(v: "IRVisitor", value: Tensor, dims: list[tuple[int, Tile]], fill: Any) -> Tensor:
    """``value`` with every lane outside the tiles' extents set to ``fill``."""
    if not dims:
        return value
    elt = element_type(value.dtype)

    def body(args: list[str], index_of: Callable[[int], str]) -> str:
        cond = v.ops.lanes_in_bounds([(index_of(dim), tile.extent) for dim, tile in dims])
        fill_c = v.ops.convert(fill, elt)
        out = v.ops.fresh("masked")
        v.ops.op(f"{out} = arith.select {cond}, {args[0]}, {fill_c.ssa} : {elt}")
        return out

    return v.ops.elementwise([value], value.shape, value.dtype, body, hint="mask")


@register_lowering(_tracing_ops._mask_to)
def lower_mask_to(v: "IRVisitor", node: fx.Node) -> Tensor:
    value = v.tensor(node.args[0])
    fill = node.args[1]
    if isinstance(fill, (fx.Node, torch.SymInt, torch.SymFloat, torch.SymBool)):
        fill = v.value(fill) if isinstance(fill, fx.Node) else v.eval_symbolic(fill)
    return mask_lanes(v, value, ragged_dims(v, node, value.rank), fill)


@register_lowering(creation_ops.full)
def lower_full(v: "IRVisitor", node: fx.Node) -> Tensor:
    shape_arg, value_arg, dtype = node.args[0], node.args[1], node.args[2]
    sizes = [v.value(s) for s in shape_arg]
    if not all(isinstance(s, (int, Scalar)) for s in sizes):
        raise HelionMLIRError(f"tensor sizes {sizes} are not integers")
    shape = [s if isinstance(s, int) else None for s in sizes]
    dynamic = [v.ops.index(s) for s in sizes if isinstance(s, Scalar)]
    value = v.value(value_arg)
    if isinstance(value, Tensor):
        value = v.scalar(value_arg, element_type(dtype))
    return v.ops.fill(shape, dtype, value, dynamic)


@register_lowering(_tracing_ops._constant_tensor)
def lower_constant_tensor(v: "IRVisitor", node: fx.Node) -> Tensor:
    value, dtype = node.args[0], node.args[1]
    return v.ops.fill((), dtype, value)
