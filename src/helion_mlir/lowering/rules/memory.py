"""Loads and stores on host tensors (``hl.load``/``hl.store`` and subscripts).

Design (see docs/lowering.md): tile-shaped values always have the static tile shape
from the config. A load of a ragged edge tile reads only the in-bounds part
(``tensor.extract_slice`` with ``affine``/``arith`` extents) and places it in a tile
filled with zeros, which is Helion's value for masked lanes of a load; a store writes
only the in-bounds part back (``tensor.insert_slice``). Tensor indices gather and
scatter element by element with Helion's Cartesian-product semantics; atomics
(:mod:`.atomics`) reuse the scatter. How an index addresses the host tensor is
:mod:`..indexing`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from helion.language import memory_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import PACKED_PAIR_DTYPES, element_type
from ..context import RuleContext
from ..emitter import Emitter
from ..indexing import (
    AccessKind,
    DimAccess,
    add_new_axes,
    extract_valid,
    host_accesses,
    pad_to_tile,
    resolve_index,
    settle_unit_dims,
    specialized_sizes,
    ssa_or_int,
    valid_lane_condition,
    valid_lanes,
    value_dynamic_sizes,
    value_extents,
    value_shape,
)
from ..jagged import index_dims, jagged_condition, jagged_lane_mask, mask_jagged, value_dims
from ..registry import register_lowering
from ..values import HostTensor, Scalar, Tensor
from .views import expand_dims, subscript_value


def _insert_element(emit: Emitter, element: str, dest: Tensor, coords: list[str]) -> str:
    """Store one element into ``dest`` as a one-element ``tensor.insert_slice``.

    Not ``tensor.insert``: IREE 3.13's runtime transfers a row stride plus one element for a
    ``tensor.insert`` into the last row of a 2-D tensor in a loop and fails with OUT_OF_RANGE
    (docs/downstream.md); the slice form reads the same to every consumer.
    """
    piece_type = f"tensor<{'1x' * dest.rank}{element_type(dest.dtype)}>"
    piece = emit.assign("elt", f"tensor.from_elements {element} : {piece_type}")
    stored = emit.fresh("ins")
    ones = ", ".join(["1"] * dest.rank)
    emit.op(f"{stored} = tensor.insert_slice {piece} into {dest.ssa}[{', '.join(coords)}] [{ones}] [{ones}]"
             f" : {piece_type} into {dest.type}")
    return stored


def _coordinates(emit: Emitter, host: Tensor, accesses: Sequence[DimAccess], index_of: Callable[[int], str],
                 index_elements: dict[int, str]) -> list[str]:
    """Host coordinates of the value lane at ``index_of`` (clamped in bounds; masked lanes are
    discarded by the caller). ``index_elements`` maps access position -> index-tensor element."""
    coords: list[str] = []
    out_dim = 0
    host_axis = 0
    for pos, a in enumerate(accesses):
        if a.kind is AccessKind.NEWAXIS:
            out_dim += 1
            continue
        if a.kind is AccessKind.SCALAR:
            coords.append(emit.index(a.offset).ssa)
        elif a.broadcast:
            coords.append(emit.index(0).ssa)
            out_dim += 1
        elif a.kind is AccessKind.SLICE:
            lane = index_of(out_dim)
            if a.step != 1:
                scaled = emit.assign("lane", f"arith.muli {lane}, {emit.index(a.step).ssa} : index")
                lane = scaled
            pos_ssa = emit.assign("pos", f"arith.addi {emit.index(a.offset).ssa}, {lane} : index")
            coords.append(clamp_index(emit, pos_ssa, host, host_axis) if a.padded else pos_ssa)
            out_dim += 1
        else:  # tensor
            assert a.index is not None
            raw = index_elements[pos]
            as_index = emit.assign("idx", f"arith.index_cast {raw} : {element_type(a.index.dtype)} to index")
            coords.append(clamp_index(emit, as_index, host, host_axis))
            out_dim += a.index.rank
        host_axis += 1
    return coords


def clamp_index(emit: Emitter, ssa: str, host: Tensor, axis: int) -> str:
    """The ``index`` value ``ssa`` clamped into ``[0, size)`` of ``host``'s dimension ``axis``."""
    size = emit.index(emit.dim(host, axis))
    last = emit.assign("last", f"arith.subi {size.ssa}, {emit.index(1).ssa} : index")
    low = emit.assign("clamp", f"arith.maxsi {ssa}, {emit.index(0).ssa} : index")
    high = emit.assign("clamp", f"arith.minsi {low}, {last} : index")
    return high


def _index_tensor_maps(accesses: Sequence[DimAccess], rank: int) -> tuple[list[Tensor], list[str], dict[int, int]]:
    """Index tensors as generic inputs with the maps that select their value dims."""
    tensors: list[Tensor] = []
    maps: list[str] = []
    which: dict[int, int] = {}
    dims = [f"d{i}" for i in range(rank)]
    out_dim = 0
    for pos, a in enumerate(accesses):
        if a.kind in (AccessKind.SLICE, AccessKind.NEWAXIS):
            out_dim += 1
        elif a.kind is AccessKind.TENSOR:
            assert a.index is not None
            sel = dims[out_dim: out_dim + a.index.rank]
            which[pos] = len(tensors)
            tensors.append(a.index)
            maps.append(f"affine_map<({', '.join(dims)}) -> ({', '.join(sel)})>")
            out_dim += a.index.rank
    return tensors, maps, which


def gather(emit: Emitter, host: Tensor, accesses: Sequence[DimAccess], fill: Any = 0) -> Tensor:
    """A load with tensor indices: one ``tensor.extract`` per lane inside a ``linalg.generic``."""
    out_shape = value_shape(accesses)
    rank = len(out_shape)
    tensors, maps, which = _index_tensor_maps(accesses, rank)
    dims = [f"d{i}" for i in range(rank)]
    maps.append(f"affine_map<({', '.join(dims)}) -> ({', '.join(dims)})>")
    init = emit.empty(out_shape, host.dtype, value_dynamic_sizes(emit, accesses))
    result = Tensor(emit.fresh("gather"), tuple(out_shape), host.dtype)
    ins = f" ins({', '.join(t.ssa for t in tensors)} : {', '.join(t.type for t in tensors)})" if tensors else ""
    iterators = ", ".join(['"parallel"'] * rank)
    header = (f"{result.ssa} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iterators}]}}"
              f"{ins} outs({init.ssa} : {init.type}) {{")
    block_args = [emit.fresh("ix") for _ in tensors]
    out_arg = emit.fresh("out")
    decls = ", ".join([f"{b}: {element_type(t.dtype)}" for b, t in zip(block_args, tensors)] + [f"{out_arg}: {element_type(host.dtype)}"])
    cache: dict[int, str] = {}

    def index_of(d: int) -> str:
        if d not in cache:
            cache[d] = emit.fresh("i")
            emit.op(f"{cache[d]} = linalg.index {d} : index")
        return cache[d]

    with emit.region(header, f"}} -> {result.type}"):
        emit.block_header(decls)
        coords = _coordinates(emit, host, accesses, index_of, {pos: block_args[i] for pos, i in which.items()})
        elem = emit.assign("elt", f"tensor.extract {host.ssa}[{', '.join(coords)}] : {host.type}")
        cond = valid_lane_condition(emit, accesses, index_of)
        if cond is not None:
            fill_c = emit.const(fill, element_type(host.dtype))
            sel = emit.assign("sel", f"arith.select {cond}, {elem}, {fill_c.ssa} : {element_type(host.dtype)}")
            elem = sel
        emit.op(f"linalg.yield {elem} : {element_type(host.dtype)}")
    return result


def load_value(emit: Emitter, host: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    if any(a.kind is AccessKind.TENSOR for a in accesses):
        return gather(emit, host, accesses)
    valid = extract_valid(emit, host, accesses)
    return add_new_axes(emit, pad_to_tile(emit, valid, accesses), accesses)


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


def truthy(emit: Emitter, ssa: str, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return ssa
    lines_zero = emit.const(0, element_type(dtype))
    out = emit.fresh("t")
    pred = "cmpf une" if dtype.is_floating_point else "cmpi ne"
    emit.op(f"{out} = arith.{pred}, {ssa}, {lines_zero.ssa} : {element_type(dtype)}")
    return out


def _mask_arg(ctx: RuleContext, node: fx.Node, position: int) -> Tensor | None:
    """The optional ``extra_mask`` operand at ``position``."""
    return ctx.tensor(node.args[position]) if len(node.args) > position and node.args[position] is not None else None


def accesses_of(ctx: RuleContext, host: HostTensor, index: Any, value_arg: Any) -> list[DimAccess]:
    """How ``index`` addresses ``host``, for a value shaped like ``value_arg``'s meta."""
    meta = value_arg.meta.get("val") if isinstance(value_arg, fx.Node) else None
    return resolve_index(ctx, host.value, index, list(meta.shape) if isinstance(meta, torch.Tensor) else None,
                         specialized_sizes(ctx, host.name, host.value))


@register_lowering(memory_ops.load)
def lower_load(ctx: RuleContext, node: fx.Node) -> Tensor:
    host = ctx.host(node.args[0])
    if host is None:  # indexing a device value, e.g. tile.index[:, None]
        source = ctx.value(node.args[0])
        if not isinstance(source, Tensor):
            raise HelionMLIRError("memory operations need a host tensor as their first argument")
        return subscript_value(ctx.emit, source, list(node.args[1]))
    settle_unit_dims(ctx, host.name, node.args[1])
    value = load_value(ctx.emit, host.value, accesses_of(ctx, host, node.args[1], node))
    value = mask_jagged(ctx, value_dims(node), value, 0)  # lanes past a jagged tile's row end read 0
    return _apply_extra_mask(ctx.emit, value, _mask_arg(ctx, node, 2))


def value_to_store(emit: Emitter, value: Any, host: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    """A lowered value (a tensor, or a number to fill with) shaped and typed for the lanes ``accesses`` address."""
    shape = value_shape(accesses)
    if isinstance(value, (int, float, bool, Scalar)):
        return emit.fill(shape, host.dtype, value)
    if not isinstance(value, Tensor):
        raise HelionMLIRError(f"cannot store {value!r}")
    value = emit.cast(value, host.dtype)
    lead = len(shape) - value.rank
    # A dynamic target dim takes the value's own size there.
    shape = [s if s is not None or i < lead else value.shape[i - lead] for i, s in enumerate(shape)]
    if lead > 0 or any(a != b for a, b in zip(value.shape, shape[lead:])):
        value = emit.broadcast_to(value, shape)
    return value


def valid_region(emit: Emitter, value: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    """The in-bounds lanes of a tile-shaped value, typed as the region the index addresses:
    dynamic where its extent is known only at run time, even where the value's size is
    static (a size Helion specialized, a unit tile of a dynamic dimension)."""
    slices = [a for a in accesses if a.kind is AccessKind.SLICE]
    shape = tuple(a.extent if isinstance(a.extent, int) else None for a in slices)
    if 0 in shape:  # no lanes (a slice MLIR would refuse, see indexing.extract_valid)
        return emit.empty(shape, value.dtype, [emit.index(a.extent) for a in slices if not isinstance(a.extent, int)])
    if any(a.padded for a in slices):
        result = Tensor(emit.fresh("valid"), shape, value.dtype)
        emit.op(f"{result.ssa} = tensor.extract_slice {value.ssa}{valid_lanes(slices)} : {value.type} to {result.type}")
        return result
    if value.shape == shape:
        return value
    result = Tensor(emit.fresh("valid"), shape, value.dtype)
    emit.op(f"{result.ssa} = tensor.cast {value.ssa} : {value.type} to {result.type}")
    return result


def insert_valid(emit: Emitter, dest: Tensor, valid: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    """``valid`` written over the region ``accesses`` address in ``dest``."""
    hosts = host_accesses(accesses)
    for axis, a in enumerate(hosts):
        if a.broadcast and a.extent != 1 and a.size != 1:
            raise HelionMLIRError(
                f"a write through dimension {axis} of size 1 indexed by a tile of more than one lane: every "
                "lane would write its one element (index it with a tile of block size 1, or with 0)")
    offsets = ", ".join(ssa_or_int(a.offset) for a in hosts)
    sizes = ", ".join(ssa_or_int(a.extent) if a.kind is AccessKind.SLICE else "1" for a in hosts)
    strides = ", ".join(str(a.step) if a.kind is AccessKind.SLICE else "1" for a in hosts)
    result = dest.renamed(emit.fresh("stored"))
    emit.op(f"{result.ssa} = tensor.insert_slice {valid.ssa} into {dest.ssa}[{offsets}] [{sizes}] [{strides}] : {valid.type} into {dest.type}")
    return result


def _select_tensors(emit: Emitter, mask: Tensor, a: Tensor, b: Tensor) -> Tensor:
    def body(args: list[str], _i: Callable[[int], str]) -> str:
        cond = truthy(emit, args[0], mask.dtype)
        out = emit.assign("sel", f"arith.select {cond}, {args[1]}, {args[2]} : {element_type(a.dtype)}")
        return out

    return emit.elementwise([mask, a, b], a.shape, a.dtype, body, hint="select")


@register_lowering(memory_ops.store, writes=0)
def lower_store(ctx: RuleContext, node: fx.Node) -> None:
    """``x[index] = value``: the destination's new value is the old one with the
    addressed lanes replaced (in-bounds lanes of a tile; element by element for a scatter).
    Lanes past a jagged tile's row end are not stored, as lanes ``extra_mask`` masks."""
    host = ctx.destination
    dest = host.value
    value_node = node.args[2]
    accesses = accesses_of(ctx, host, node.args[1], value_node)
    if any(a.kind is AccessKind.NEWAXIS for a in accesses):
        raise HelionMLIRError("stores through a None (new axis) index are not supported")
    emit = ctx.emit
    value = value_to_store(emit, ctx.value(value_node), dest, accesses)
    dims = index_dims(ctx, node.args[1], value.rank)
    extra_mask = _mask_arg(ctx, node, 3)
    if any(a.kind is AccessKind.TENSOR for a in accesses):
        mask = emit.broadcast_to(_mask_for(emit, extra_mask, value), value.shape) if extra_mask is not None else None
        mask = _and_masks(emit, mask, jagged_lane_mask(ctx, dims, value))
        ctx.write(scatter(emit, dest, accesses, value, mask, lambda old, new, _t: new, keep_old=False)[0])
        return None
    valid = valid_region(emit, value, accesses)
    if extra_mask is not None:
        mask = valid_region(emit, emit.broadcast_to(_mask_for(emit, extra_mask, value), value.shape), accesses)
        valid = _select_tensors(emit, mask, valid, extract_valid(emit, dest, accesses))
    if jagged_condition(ctx, dims) is not None:
        valid = mask_jagged(ctx, dims, valid, extract_valid(emit, dest, accesses))
    ctx.write(insert_valid(emit, dest, valid, accesses))
    return None


def _and_masks(emit: Emitter, a: Tensor | None, b: Tensor | None) -> Tensor | None:
    if a is None or b is None:
        return a if b is None else b

    def body(args: list[str], _i: Callable[[int], str]) -> str:
        return emit.assign("both", f"arith.andi {truthy(emit, args[0], a.dtype)}, {args[1]} : i1")

    return emit.elementwise([a, b], b.shape, torch.bool, body, hint="mask")


# -- element-by-element read-modify-write (scatters, atomics with tensor indices) ----------
Combine = Callable[[str, str, str], str]


def scatter(emit: Emitter, dest: Tensor, accesses: Sequence[DimAccess], value: Tensor, mask: Tensor | None,
            combine: Combine, extra: Tensor | None = None, *, keep_old: bool = True) -> tuple[Tensor, Tensor | None]:
    """Visit every in-bounds lane of ``value`` in order; write ``combine(old, new, extra)`` at its
    host coordinates. Returns the new destination and, with ``keep_old``, a tile of the old
    values (without it, no tile is built or carried through the lane loops)."""
    shape = value_shape(accesses)
    elt = element_type(dest.dtype)
    olds = [emit.fill(shape, dest.dtype, 0, value_dynamic_sizes(emit, accesses))] if keep_old else []
    carried_in: list[Any] = [dest] + olds
    extents = value_extents(accesses)

    def nest(depth: int, ivs: list[Scalar], carried: list[Any]) -> list[Any]:
        if depth == len(shape):
            return element(ivs, carried)

        def body(iv: Scalar, cur: list[Any]) -> list[Any]:
            return nest(depth + 1, ivs + [iv], cur)

        return emit.for_loop(0, extents[depth], 1, carried, body, hint="lane")

    def element(ivs: list[Scalar], carried: list[Any]) -> list[Any]:
        cur_dest = carried[0]
        lanes = ", ".join(iv.ssa for iv in ivs)
        index_elements: dict[int, str] = {}
        out_dim = 0
        for pos, a in enumerate(accesses):
            if a.kind is AccessKind.TENSOR:
                assert a.index is not None
                sel = ", ".join(iv.ssa for iv in ivs[out_dim: out_dim + a.index.rank])
                ie = emit.assign("ie", f"tensor.extract {a.index.ssa}[{sel}] : {a.index.type}")
                index_elements[pos] = ie
                out_dim += a.index.rank
            elif a.kind in (AccessKind.SLICE, AccessKind.NEWAXIS):
                out_dim += 1
        coords = _coordinates(emit, cur_dest, accesses, lambda d: ivs[d].ssa, index_elements)
        coord_text = ", ".join(coords)
        new = emit.assign("new", f"tensor.extract {value.ssa}[{lanes}] : {value.type}")
        old = emit.assign("old", f"tensor.extract {cur_dest.ssa}[{coord_text}] : {cur_dest.type}")
        extra_elt = None
        if extra is not None:
            extra_elt = emit.assign("x", f"tensor.extract {extra.ssa}[{lanes}] : {extra.type}")
        combined = combine(old, new, extra_elt or "")
        if mask is not None:
            m = emit.assign("mk", f"tensor.extract {mask.ssa}[{lanes}] : {mask.type}")
            cond = truthy(emit, m, mask.dtype)
            keep = emit.assign("keep", f"arith.select {cond}, {combined}, {old} : {elt}")
            combined = keep
        stored = _insert_element(emit, combined, cur_dest, coords)
        updated = [cur_dest.renamed(stored)]
        if keep_old:
            cur_olds = carried[1]
            rec = emit.assign("rec", f"tensor.insert {old} into {cur_olds.ssa}[{lanes}] : {cur_olds.type}")
            updated.append(Tensor(rec, cur_olds.shape, cur_olds.dtype))
        return updated

    result = nest(0, [], carried_in)
    return result[0], (result[1] if keep_old else None)
