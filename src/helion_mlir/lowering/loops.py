"""Tile loops: a nest of ``scf.for`` over the tiles of some block ids, each level
activating its :class:`Tile` in the kernel state. Used for the kernel's top-level grid and
for device loops and rolled reductions (by the rules, through their context)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from .emitter import Emitter
from .values import JaggedEnds, Scalar, Tile, Value

__all__ = ["TileScope", "emit_tile_loops"]


class TileScope(Protocol):
    """Where tile loops activate their tiles (the :class:`~.kernel_state.KernelState`)."""

    emit: Emitter
    tiles: dict[int, Tile]  # block id -> its active tile

    def block_size(self, block_id: int) -> int | Scalar: ...


def _tile_for(state: TileScope, block_id: int, iv: Scalar, begin: Any, end: Any, size: "int | Scalar",
              divisible: bool, stride: "int | Scalar", range_exprs: tuple[Any, Any] | None) -> Tile:
    state.emit.know_at_most(begin, iv)  # the offset lies in the loop's range
    state.emit.know_at_most(iv, end)
    if divisible:
        return Tile(block_id, iv, size, size, begin, end, stride=stride if stride != size else None,
                    range_exprs=range_exprs)
    emit = state.emit
    remaining = emit.binary("arith.subi", emit.index(end), iv)
    extent = emit.min_index(emit.index(size), remaining)
    if isinstance(size, Scalar):  # a runtime block size: values hold exactly the in-bounds lanes
        return Tile(block_id, iv, None, extent, begin, end, step=size, range_exprs=range_exprs)
    return Tile(block_id, iv, size, extent, begin, end, range_exprs=range_exprs)


def emit_tile_loops(
    state: TileScope,
    block_ids: Sequence[int],
    begins: Sequence[Any],
    ends: Sequence[Any],
    steps: Sequence[int | None],
    carried: list[Value],
    body: Callable[[list[Value]], Sequence[Value]],
    ranges: Sequence[tuple[Any, Any] | None] | None = None,
    jagged: Mapping[int, JaggedEnds] | None = None,
) -> list[Value]:
    """A nest of ``scf.for`` over the tiles of ``block_ids``; ``body(carried) -> next``.

    Each level activates its :class:`Tile` (static size from the config; extent clipped
    with ``arith.minsi`` unless the range is known to divide evenly). A runtime block size
    steps the loop by an ``index`` value and gives tiles of dynamic size. ``ranges`` are
    the loops' begins and ends as expressions of the kernel's symbols, where known. A
    block in ``jagged`` is a jagged tile with those ends per lane of its parent tiles.
    """
    if not block_ids:
        return list(body(carried))
    ranges = list(ranges) if ranges is not None else [None] * len(block_ids)
    jagged = jagged or {}
    block_id, begin, end, step = block_ids[0], begins[0], ends[0], steps[0]
    size = 1 if step is not None else state.block_size(block_id)
    stride = step if step is not None else size
    divisible = size == 1 or (
        isinstance(size, int) and isinstance(begin, int) and isinstance(end, int) and (end - begin) % size == 0
    )
    previous = state.tiles.get(block_id)
    emit = state.emit

    def level(iv: Scalar, current: list[Value]) -> list[Value]:
        tile = _tile_for(state, block_id, iv, begin, end, size, divisible, stride, ranges[0])
        state.tiles[block_id] = dataclasses.replace(tile, jagged=jagged.get(block_id))
        return emit_tile_loops(state, block_ids[1:], begins[1:], ends[1:], steps[1:], current, body, ranges[1:],
                               jagged)

    try:
        return emit.for_loop(emit.index(begin), emit.index(end), emit.index(stride), carried, level, hint="tiles")
    finally:
        if previous is None:
            state.tiles.pop(block_id, None)
        else:
            state.tiles[block_id] = previous
