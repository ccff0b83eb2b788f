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
from typing import TYPE_CHECKING, Any

import torch
from helion.language import memory_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import PACKED_PAIR_DTYPES, element_type
from ..indexing import (
    DimAccess,
    add_new_axes,
    extract_valid,
    host_accesses,
    host_operand,
    pad_to_tile,
    resolve_index,
    specialized_sizes,
    ssa_or_int,
    valid_lane_condition,
    value_dynamic_sizes,
    value_extents,
    value_shape,
)
from ..registry import register_lowering
from ..values import HostRef, Scalar, Tensor
from .views import expand_dims, subscript_value

if TYPE_CHECKING:
    from ..visitor import IRVisitor


def _insert_element(v: "IRVisitor", element: str, dest: Tensor, coords: list[str]) -> str:
    """Store one element into ``dest`` as a one-element ``tensor.insert_slice``.

    Not ``tensor.insert``: IREE 3.13's runtime transfers a row stride plus one element for a
    ``tensor.insert`` into the last row of a 2-D tensor in a loop and fails with OUT_OF_RANGE
    (docs/downstream.md); the slice form reads the same to every consumer.
    """
    piece_type = f"tensor<{'1x' * dest.rank}{element_type(dest.dtype)}>"
    piece = v.ops.fresh("elt")
    v.ops.op(f"{piece} = tensor.from_elements {element} : {piece_type}")
    stored = v.ops.fresh("ins")
    ones = ", ".join(["1"] * dest.rank)
    v.ops.op(f"{stored} = tensor.insert_slice {piece} into {dest.ssa}[{', '.join(coords)}] [{ones}] [{ones}]"
             f" : {piece_type} into {dest.type}")
    return stored


def _coordinates(v: "IRVisitor", host: Tensor, accesses: Sequence[DimAccess], index_of: Callable[[int], str],
                 index_elements: dict[int, str]) -> list[str]:
    """Host coordinates of the value lane at ``index_of`` (clamped in bounds; masked lanes are
    discarded by the caller). ``index_elements`` maps access position -> index-tensor element."""
    coords: list[str] = []
    out_dim = 0
    host_axis = 0
    for pos, a in enumerate(accesses):
        if a.kind == "newaxis":
            out_dim += 1
            continue
        if a.kind == "scalar":
            coords.append(v.ops.index(a.offset).ssa)
        elif a.kind == "slice":
            lane = index_of(out_dim)
            if a.step != 1:
                scaled = v.ops.fresh("lane")
                v.ops.op(f"{scaled} = arith.muli {lane}, {v.ops.index(a.step).ssa} : index")
                lane = scaled
            pos_ssa = v.ops.fresh("pos")
            v.ops.op(f"{pos_ssa} = arith.addi {v.ops.index(a.offset).ssa}, {lane} : index")
            coords.append(_clamp(v, pos_ssa, host, host_axis) if a.padded else pos_ssa)
            out_dim += 1
        else:  # tensor
            assert a.index is not None
            raw = index_elements[pos]
            as_index = v.ops.fresh("idx")
            v.ops.op(f"{as_index} = arith.index_cast {raw} : {element_type(a.index.dtype)} to index")
            coords.append(_clamp(v, as_index, host, host_axis))
            out_dim += a.index.rank
        host_axis += 1
    return coords


def _clamp(v: "IRVisitor", ssa: str, host: Tensor, axis: int) -> str:
    size = v.ops.index(v.ops.dim(host, axis))
    last = v.ops.fresh("last")
    v.ops.op(f"{last} = arith.subi {size.ssa}, {v.ops.index(1).ssa} : index")
    low = v.ops.fresh("clamp")
    v.ops.op(f"{low} = arith.maxsi {ssa}, {v.ops.index(0).ssa} : index")
    high = v.ops.fresh("clamp")
    v.ops.op(f"{high} = arith.minsi {low}, {last} : index")
    return high


def _index_tensor_maps(accesses: Sequence[DimAccess], rank: int) -> tuple[list[Tensor], list[str], dict[int, int]]:
    """Index tensors as generic inputs with the maps that select their value dims."""
    tensors: list[Tensor] = []
    maps: list[str] = []
    which: dict[int, int] = {}
    dims = [f"d{i}" for i in range(rank)]
    out_dim = 0
    for pos, a in enumerate(accesses):
        if a.kind in ("slice", "newaxis"):
            out_dim += 1
        elif a.kind == "tensor":
            assert a.index is not None
            sel = dims[out_dim: out_dim + a.index.rank]
            which[pos] = len(tensors)
            tensors.append(a.index)
            maps.append(f"affine_map<({', '.join(dims)}) -> ({', '.join(sel)})>")
            out_dim += a.index.rank
    return tensors, maps, which


def gather(v: "IRVisitor", host: Tensor, accesses: Sequence[DimAccess], fill: Any = 0) -> Tensor:
    """A load with tensor indices: one ``tensor.extract`` per lane inside a ``linalg.generic``."""
    out_shape = value_shape(accesses)
    rank = len(out_shape)
    tensors, maps, which = _index_tensor_maps(accesses, rank)
    dims = [f"d{i}" for i in range(rank)]
    maps.append(f"affine_map<({', '.join(dims)}) -> ({', '.join(dims)})>")
    init = v.ops.empty(out_shape, host.dtype, value_dynamic_sizes(v, accesses))
    result = Tensor(v.ops.fresh("gather"), tuple(out_shape), host.dtype)
    ins = f" ins({', '.join(t.ssa for t in tensors)} : {', '.join(t.type for t in tensors)})" if tensors else ""
    iterators = ", ".join(['"parallel"'] * rank)
    header = (f"{result.ssa} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iterators}]}}"
              f"{ins} outs({init.ssa} : {init.type}) {{")
    block_args = [v.ops.fresh("ix") for _ in tensors]
    out_arg = v.ops.fresh("out")
    decls = ", ".join([f"{b}: {element_type(t.dtype)}" for b, t in zip(block_args, tensors)] + [f"{out_arg}: {element_type(host.dtype)}"])
    cache: dict[int, str] = {}

    def index_of(d: int) -> str:
        if d not in cache:
            cache[d] = v.ops.fresh("i")
            v.ops.op(f"{cache[d]} = linalg.index {d} : index")
        return cache[d]

    with v.ops.region(header, f"}} -> {result.type}"):
        v.builder.emit(f"^bb0({decls}):")
        coords = _coordinates(v, host, accesses, index_of, {pos: block_args[i] for pos, i in which.items()})
        elem = v.ops.fresh("elt")
        v.ops.op(f"{elem} = tensor.extract {host.ssa}[{', '.join(coords)}] : {host.type}")
        cond = valid_lane_condition(v, accesses, index_of)
        if cond is not None:
            fill_c = v.ops.const(fill, element_type(host.dtype))
            sel = v.ops.fresh("sel")
            v.ops.op(f"{sel} = arith.select {cond}, {elem}, {fill_c.ssa} : {element_type(host.dtype)}")
            elem = sel
        v.ops.op(f"linalg.yield {elem} : {element_type(host.dtype)}")
    return result


def load_value(v: "IRVisitor", host: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    if any(a.kind == "tensor" for a in accesses):
        return gather(v, host, accesses)
    valid = extract_valid(v, host, accesses)
    return add_new_axes(v, pad_to_tile(v, valid, accesses), accesses)


def _mask_for(v: "IRVisitor", mask: Tensor, value: Tensor) -> Tensor:
    """``mask`` as it lines up with ``value``: one entry per pair of a packed value."""
    if value.dtype not in PACKED_PAIR_DTYPES:
        return mask
    return v.ops.broadcast_to(expand_dims(v, mask, [mask.rank]), value.shape)


def _apply_extra_mask(v: "IRVisitor", value: Tensor, mask_arg: Any, fill: Any = 0) -> Tensor:
    if mask_arg is None:
        return value
    mask = _mask_for(v, v.tensor(mask_arg), value)
    fill_c = v.ops.const(fill, element_type(value.dtype))

    def body(args: list[str], _i: Callable[[int], str]) -> str:
        cond = truthy(v, args[1], mask.dtype)
        out = v.ops.fresh("m")
        v.ops.op(f"{out} = arith.select {cond}, {args[0]}, {fill_c.ssa} : {element_type(value.dtype)}")
        return out

    return v.ops.elementwise([value, mask], value.shape, value.dtype, body, hint="masked")


def truthy(v: "IRVisitor", ssa: str, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return ssa
    lines_zero = v.ops.const(0, element_type(dtype))
    out = v.ops.fresh("t")
    pred = "cmpf une" if dtype.is_floating_point else "cmpi ne"
    v.ops.op(f"{out} = arith.{pred}, {ssa}, {lines_zero.ssa} : {element_type(dtype)}")
    return out


@register_lowering(memory_ops.load)
def lower_load(v: "IRVisitor", node: fx.Node) -> Tensor:
    source = v.value(node.args[0])
    if isinstance(source, Tensor):  # indexing a device value, e.g. tile.index[:, None]
        return subscript_value(v, source, list(node.args[1]))
    name, host = host_operand(v, node.args[0])
    val = node.meta.get("val")
    accesses = resolve_index(v, host, node.args[1], list(val.shape) if isinstance(val, torch.Tensor) else None,
                             specialized_sizes(v, name, host))
    value = load_value(v, host, accesses)
    extra_mask = node.args[2] if len(node.args) > 2 else None
    return _apply_extra_mask(v, value, extra_mask)


def value_to_store(v: "IRVisitor", arg: Any, host: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    shape = value_shape(accesses)
    value = v.value(arg)
    if isinstance(value, HostRef):
        value = v.state[value.name]
    if isinstance(value, (int, float, bool, Scalar)):
        return v.ops.fill(shape, host.dtype, value)
    if not isinstance(value, Tensor):
        raise HelionMLIRError(f"cannot store {value!r}")
    value = v.ops.cast(value, host.dtype)
    lead = len(shape) - value.rank
    # A dynamic target dim takes the value's own size there.
    shape = [s if s is not None or i < lead else value.shape[i - lead] for i, s in enumerate(shape)]
    if lead > 0 or any(a != b for a, b in zip(value.shape, shape[lead:])):
        value = v.ops.broadcast_to(value, shape)
    return value


def valid_region(v: "IRVisitor", value: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    """The in-bounds lanes of a tile-shaped value."""
    slices = [a for a in accesses if a.kind == "slice"]
    if not any(a.padded for a in slices):
        return value
    zeros = ", ".join("0" for _ in slices)
    sizes = ", ".join(ssa_or_int(a.extent) for a in slices)
    ones = ", ".join("1" for _ in slices)
    shape = tuple(a.extent if isinstance(a.extent, int) else None for a in slices)
    result = Tensor(v.ops.fresh("valid"), shape, value.dtype)
    v.ops.op(f"{result.ssa} = tensor.extract_slice {value.ssa}[{zeros}] [{sizes}] [{ones}] : {value.type} to {result.type}")
    return result


def insert_valid(v: "IRVisitor", dest: Tensor, valid: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    hosts = host_accesses(accesses)
    offsets = ", ".join(ssa_or_int(a.offset) for a in hosts)
    sizes = ", ".join(ssa_or_int(a.extent) if a.kind == "slice" else "1" for a in hosts)
    strides = ", ".join(str(a.step) if a.kind == "slice" else "1" for a in hosts)
    result = dest.renamed(v.ops.fresh("stored"))
    v.ops.op(f"{result.ssa} = tensor.insert_slice {valid.ssa} into {dest.ssa}[{offsets}] [{sizes}] [{strides}] : {valid.type} into {dest.type}")
    return result


def _select_tensors(v: "IRVisitor", mask: Tensor, a: Tensor, b: Tensor) -> Tensor:
    def body(args: list[str], _i: Callable[[int], str]) -> str:
        cond = truthy(v, args[0], mask.dtype)
        out = v.ops.fresh("sel")
        v.ops.op(f"{out} = arith.select {cond}, {args[1]}, {args[2]} : {element_type(a.dtype)}")
        return out

    return v.ops.elementwise([mask, a, b], a.shape, a.dtype, body, hint="select")


@register_lowering(memory_ops.store)
def lower_store(v: "IRVisitor", node: fx.Node) -> None:
    name, dest = host_operand(v, node.args[0])
    index = node.args[1]
    value_node = node.args[2]
    value_meta = value_node.meta.get("val") if isinstance(value_node, fx.Node) else None
    accesses = resolve_index(v, dest, index, list(value_meta.shape) if isinstance(value_meta, torch.Tensor) else None,
                             specialized_sizes(v, name, dest))
    if any(a.kind == "newaxis" for a in accesses):
        raise HelionMLIRError("stores through a None (new axis) index are not supported")
    extra_mask = node.args[3] if len(node.args) > 3 else None
    value = value_to_store(v, value_node, dest, accesses)
    if any(a.kind == "tensor" for a in accesses):
        mask = v.ops.broadcast_to(_mask_for(v, v.tensor(extra_mask), value), value.shape) if extra_mask is not None else None
        v.state[name] = scatter(v, dest, accesses, value, mask, lambda old, new, _t: new, keep_old=False)[0]
        return None
    valid = valid_region(v, value, accesses)
    if extra_mask is not None:
        mask = valid_region(v, v.ops.broadcast_to(_mask_for(v, v.tensor(extra_mask), value), value.shape), accesses)
        old = extract_valid(v, dest, accesses)
        valid = _select_tensors(v, mask, valid, old)
    v.state[name] = insert_valid(v, dest, valid, accesses)
    return None


# -- element-by-element read-modify-write (scatters, atomics with tensor indices) ----------
Combine = Callable[[str, str, str], str]


def scatter(v: "IRVisitor", dest: Tensor, accesses: Sequence[DimAccess], value: Tensor, mask: Tensor | None,
            combine: Combine, extra: Tensor | None = None, *, keep_old: bool = True) -> tuple[Tensor, Tensor | None]:
    """Visit every in-bounds lane of ``value`` in order; write ``combine(old, new, extra)`` at its
    host coordinates. Returns the new destination and, with ``keep_old``, a tile of the old
    values (without it, no tile is built or carried through the lane loops)."""
    shape = value_shape(accesses)
    elt = element_type(dest.dtype)
    olds = [v.ops.fill(shape, dest.dtype, 0, value_dynamic_sizes(v, accesses))] if keep_old else []
    carried_in: list[Any] = [dest] + olds
    extents = value_extents(accesses)

    def nest(depth: int, ivs: list[Scalar], carried: list[Any]) -> list[Any]:
        if depth == len(shape):
            return element(ivs, carried)

        def body(iv: Scalar, cur: list[Any]) -> list[Any]:
            return nest(depth + 1, ivs + [iv], cur)

        return v.ops.for_loop(0, extents[depth], 1, carried, body, hint="lane")

    def element(ivs: list[Scalar], carried: list[Any]) -> list[Any]:
        cur_dest = carried[0]
        lanes = ", ".join(iv.ssa for iv in ivs)
        index_elements: dict[int, str] = {}
        out_dim = 0
        for pos, a in enumerate(accesses):
            if a.kind == "tensor":
                assert a.index is not None
                sel = ", ".join(iv.ssa for iv in ivs[out_dim: out_dim + a.index.rank])
                ie = v.ops.fresh("ie")
                v.ops.op(f"{ie} = tensor.extract {a.index.ssa}[{sel}] : {a.index.type}")
                index_elements[pos] = ie
                out_dim += a.index.rank
            elif a.kind in ("slice", "newaxis"):
                out_dim += 1
        coords = _coordinates(v, cur_dest, accesses, lambda d: ivs[d].ssa, index_elements)
        coord_text = ", ".join(coords)
        new = v.ops.fresh("new")
        v.ops.op(f"{new} = tensor.extract {value.ssa}[{lanes}] : {value.type}")
        old = v.ops.fresh("old")
        v.ops.op(f"{old} = tensor.extract {cur_dest.ssa}[{coord_text}] : {cur_dest.type}")
        extra_elt = None
        if extra is not None:
            extra_elt = v.ops.fresh("x")
            v.ops.op(f"{extra_elt} = tensor.extract {extra.ssa}[{lanes}] : {extra.type}")
        combined = combine(old, new, extra_elt or "")
        if mask is not None:
            m = v.ops.fresh("mk")
            v.ops.op(f"{m} = tensor.extract {mask.ssa}[{lanes}] : {mask.type}")
            cond = truthy(v, m, mask.dtype)
            keep = v.ops.fresh("keep")
            v.ops.op(f"{keep} = arith.select {cond}, {combined}, {old} : {elt}")
            combined = keep
        stored = _insert_element(v, combined, cur_dest, coords)
        updated = [cur_dest.renamed(stored)]
        if keep_old:
            cur_olds = carried[1]
            rec = v.ops.fresh("rec")
            v.ops.op(f"{rec} = tensor.insert {old} into {cur_olds.ssa}[{lanes}] : {cur_olds.type}")
            updated.append(Tensor(rec, cur_olds.shape, cur_olds.dtype))
        return updated

    result = nest(0, [], carried_in)
    return result[0], (result[1] if keep_old else None)
