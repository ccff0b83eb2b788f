"""Jagged tiles: ``for tile_k in hl.jagged_tile(ends)`` inside tiles over ``ends``' dims.

Helion runs the loop to the largest end over the parent tiles' lanes (it traces
``ends.amax()`` as the loop's end) and masks every lane ``k`` of a parent lane ``b`` at or
past ``ends[b]``, as it masks padding: loads read 0 there, stores and atomics leave memory
alone, and ``_mask_to`` (before reductions and dots) sets its fill. The loop's
:class:`~.values.Tile` carries the ends (:class:`~.values.JaggedEnds`, set by the loop's
rule through :func:`jagged_ends`); :func:`jagged_condition` builds the per-lane condition
for a value from the size of each of its dims. Each dim of the ends goes to the value's dim
of the same tile, as Helion expands its jagged mask (``jagged_tile_expand_str``); a parent
tile of one lane that the value does not index is lane 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from helion._compiler.compile_environment import CompileEnvironment
from torch import fx

from ..errors import HelionMLIRError
from ..mlir_types import element_type
from .context import RuleContext
from .values import JaggedEnds, Tensor

__all__ = [
    "LaneCondition", "index_dims", "jagged_condition", "jagged_ends", "jagged_lane_mask", "mask_jagged", "value_dims",
]

#: Builds, inside a ``linalg.generic`` body, the ``i1`` of the lane ``index_of`` addresses.
LaneCondition = Callable[[Callable[[int], str]], str]


def jagged_ends(ctx: RuleContext, block_ids: Sequence[int], loop_inputs: Sequence[Any]) -> dict[int, JaggedEnds]:
    """The ends of each jagged tile among a device loop's blocks: the loop's first input, as
    Helion lifts it, is the tensor of ends."""
    found: dict[int, JaggedEnds] = {}
    for block_id in block_ids:
        if not ctx.model.bound.env.is_jagged_tile(block_id):
            continue
        parent = loop_inputs[0] if loop_inputs else None
        meta = parent.meta.get("val") if isinstance(parent, fx.Node) else None
        if not isinstance(meta, torch.Tensor):
            raise HelionMLIRError(f"the ends of the jagged tile over block {block_id} are not a tensor")
        found[block_id] = JaggedEnds(ctx.tensor(parent), tuple(ctx.model.block_id_of(size) for size in meta.shape))
    return found


def jagged_condition(ctx: RuleContext, dims: Sequence[Any]) -> LaneCondition | None:
    """For a value whose dims have the sizes ``dims`` (a tile's block symbol, an int, ...),
    the condition that a lane is before its row's end in every jagged tile among them; None
    when no dim is an active jagged tile."""
    blocks = [ctx.model.block_id_of(size) for size in dims]
    checks: list[tuple[int, Any, list[int | None]]] = []
    for dim, block in enumerate(blocks):
        tile = ctx.tile(block) if block is not None else None
        if tile is None or tile.jagged is None:
            continue
        lanes: list[int | None] = []
        for parent, size in zip(tile.jagged.parent_blocks, tile.jagged.ends.shape):
            if parent is not None and parent in blocks:
                lanes.append(blocks.index(parent))
            elif size == 1:
                lanes.append(None)
            else:
                raise HelionMLIRError(
                    f"a value over the jagged tile of block {block} without its parent tile of block {parent}: "
                    "index it together with the parent tile (x[tile_b, tile_k])")
        checks.append((dim, tile, lanes))
    if not checks:
        return None
    emit = ctx.emit

    def condition(index_of: Callable[[int], str]) -> str:
        found: str | None = None
        for dim, tile, lanes in checks:
            ends = tile.jagged.ends
            coords = ", ".join(index_of(lane) if lane is not None else emit.index(0).ssa for lane in lanes)
            end = emit.assign("end", f"tensor.extract {ends.ssa}[{coords}] : {ends.type}")
            end = emit.assign("end", f"arith.index_cast {end} : {element_type(ends.dtype)} to index")
            pos = emit.assign("pos", f"arith.addi {emit.index(tile.offset).ssa}, {index_of(dim)} : index")
            inside = emit.assign("inrow", f"arith.cmpi slt, {pos}, {end} : index")
            found = inside if found is None else emit.assign("inrow", f"arith.andi {found}, {inside} : i1")
        assert found is not None
        return found

    return condition


def mask_jagged(ctx: RuleContext, dims: Sequence[Any], value: Tensor, otherwise: Any) -> Tensor:
    """``value`` with every lane past its row's end of a jagged tile set to ``otherwise``: a
    number, or the lane of a tensor shaped like ``value``."""
    condition = jagged_condition(ctx, dims)
    if condition is None:
        return value
    emit = ctx.emit
    elt = element_type(value.dtype)
    inputs = [value] + ([otherwise] if isinstance(otherwise, Tensor) else [])

    def body(args: list[str], index_of: Callable[[int], str]) -> str:
        other = args[1] if len(args) > 1 else emit.convert(otherwise, elt).ssa
        return emit.assign("jagged", f"arith.select {condition(index_of)}, {args[0]}, {other} : {elt}")

    return emit.elementwise(inputs, value.shape, value.dtype, body, hint="jagged")


def jagged_lane_mask(ctx: RuleContext, dims: Sequence[Any], like: Tensor) -> Tensor | None:
    """An ``i1`` tensor shaped like ``like``: true on lanes before their row's end."""
    condition = jagged_condition(ctx, dims)
    if condition is None:
        return None
    return ctx.emit.elementwise([like], like.shape, torch.bool, lambda _args, index_of: condition(index_of),
                                hint="inrow")


def value_dims(node: fx.Node) -> list[Any]:
    """The size of each dim of ``node``'s value as Helion traced it (none for a non-tensor)."""
    meta = node.meta.get("val")
    return list(meta.shape) if isinstance(meta, torch.Tensor) else []


def index_dims(ctx: RuleContext, index: Sequence[Any], rank: int) -> list[Any]:
    """The size of each dim of the value ``index`` addresses (``rank`` dims), as its entries
    give them: a tile's block symbol, an index tensor's dims (index tensors broadcast
    together: their broadcast shape's, once), 1 for ``None``; None for a slice
    and for the whole dims after the entries."""
    dims: list[Any] = []
    tensors = [e.meta["val"] for e in index if isinstance(e, fx.Node) and isinstance(e.meta.get("val"), torch.Tensor)]
    together = len(tensors) > 1 and any(t.dim() > 1 for t in tensors)  # broadcast together (see ..indexing)
    for entry in index:
        if entry is None:
            dims.append(1)
        elif isinstance(entry, slice):
            dims.append(None)
        elif isinstance(entry, fx.Node):
            val = entry.meta.get("val")
            if isinstance(val, torch.Tensor) and together:
                if val is tensors[0]:
                    dims.extend(CompileEnvironment.current().tensor_indexer_broadcast_shape(tensors))
            elif isinstance(val, torch.Tensor):
                dims.extend(val.shape)
            elif ctx.tile_of(val) is not None:
                dims.append(val)
    return (dims + [None] * rank)[:rank]
