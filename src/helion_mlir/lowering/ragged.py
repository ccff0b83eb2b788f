"""The padding lanes of ragged tiles: the last tile of a loop whose block size does not
divide the extent holds lanes past the end (see :class:`~.values.Tile`). Which dims of a
value are such tiles, and the value with those lanes set to a fill (``_mask_to``, and the
reductions that must not read them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from ..mlir_types import element_type
from .context import RuleContext
from .emitter import Emitter
from .padding import padded_dims
from .values import Scalar, Tensor, Tile

__all__ = ["mask_lanes", "padding_extents", "ragged_dims"]


def ragged_dims(ctx: RuleContext, node: fx.Node, rank: int) -> list[tuple[int, Tile]]:
    """(dimension, tile) for every dimension of ``node``'s value that is a ragged active tile."""
    val = node.meta.get("val")
    found = []
    if isinstance(val, torch.Tensor):
        for dim, size in enumerate(val.shape[-rank:] if rank else []):
            tile = ctx.tile_of(size)
            if tile is not None and tile.ragged:
                found.append((dim + len(val.shape) - rank, tile))
    return found


def padding_extents(ctx: RuleContext, node: fx.Node, rank: int, source: Any = None) -> list[tuple[int, Scalar | int]]:
    """(dimension, extent) for every dimension of ``node``'s value whose lanes past ``extent``
    are padding: ragged active tiles, and Helion's padded whole dims when the value of
    ``source`` (default ``node``) derives from a load of one (see :mod:`.padding`)."""
    source = node if source is None else source
    padded = padded_dims(ctx.model.graphs, source) if isinstance(source, fx.Node) else []
    return [(dim, tile.extent) for dim, tile in ragged_dims(ctx, node, rank)] + padded


def mask_lanes(emit: Emitter, value: Tensor, dims: list[tuple[int, Scalar | int]], fill: Any) -> Tensor:
    """``value`` with every lane past the extent of its dim in ``dims`` set to ``fill``."""
    if not dims:
        return value
    elt = element_type(value.dtype)

    def body(args: list[str], index_of: Callable[[int], str]) -> str:
        cond = emit.lanes_in_bounds([(index_of(dim), extent) for dim, extent in dims])
        fill_c = emit.convert(fill, elt)
        out = emit.assign("masked", f"arith.select {cond}, {args[0]}, {fill_c.ssa} : {elt}")
        return out

    return emit.elementwise([value], value.shape, value.dtype, body, hint="mask")
