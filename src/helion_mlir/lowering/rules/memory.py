"""Loads, stores and atomics on host tensors.

Design (see docs/lowering.md): tile-shaped values always have the static tile shape
from the config. A load of a ragged edge tile reads only the in-bounds part
(``tensor.extract_slice`` with ``affine``/``arith`` extents) and places it in a tile
filled with zeros, which is Helion's value for masked lanes of a load; a store writes
only the in-bounds part back (``tensor.insert_slice``). Tensor indices gather and
scatter element by element with Helion's Cartesian-product semantics. Atomics are
read-modify-write on the destination value and return the old values; the emitted
program is sequential in value semantics, so they are exact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from helion.language import memory_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import PACKED_PAIR_DTYPES, element_type
from ..registry import register_lowering
from ..values import HostRef, Scalar, Tensor
from .views import expand_dims, subscript_value

if TYPE_CHECKING:
    from ..visitor import IRVisitor


@dataclasses.dataclass(frozen=True)
class DimAccess:
    """How one index entry addresses the host tensor and shapes the value.

    ``kind`` is ``slice`` (a tile, a whole dimension or a static slice: one value dim of
    static ``size`` whose first ``extent`` lanes are in bounds), ``scalar`` (one position,
    no value dim), ``tensor`` (positions from an index tensor, whose dims become value
    dims) or ``newaxis`` (a unit value dim, no host dim).
    """

    kind: str
    offset: Scalar | int = 0
    extent: Scalar | int = 1
    size: int | None = 1
    step: int = 1
    index: Tensor | None = None
    index_extents: tuple[Scalar | int, ...] = ()  # in-bounds lanes of each index-tensor dim

    @property
    def padded(self) -> bool:
        if self.kind != "slice" or self.size is None:  # a dynamic dim holds exactly its lanes
            return False
        return not (isinstance(self.extent, int) and self.extent == self.size)


def host_operand(v: "IRVisitor", arg: Any) -> tuple[str, Tensor]:
    ref = v.value(arg)
    if not isinstance(ref, HostRef):
        raise HelionMLIRError("memory operations need a host tensor as their first argument")
    return ref.name, v.state[ref.name]


def specialized_sizes(v: "IRVisitor", name: str, host: Tensor) -> tuple[int | None, ...]:
    """The sizes Helion fixed for a host tensor's dims (``hl.specialize`` under
    ``static_shapes=False`` leaves the function's dim dynamic but the size known)."""
    fake = next((a.fake for a in v.model.args if a.name == name), None)
    if not isinstance(fake, torch.Tensor) or fake.dim() != host.rank:
        return (None,) * host.rank
    return tuple(_fixed_size(size) for size in fake.shape)


def _fixed_size(size: Any) -> int | None:
    """An int size, or the number a symbolic size was specialized to, else None."""
    if isinstance(size, int):
        return size
    expr = size.node.expr
    fixed = size.node.shape_env.replacements.get(expr, expr)
    return int(fixed) if getattr(fixed, "is_Integer", False) else None


def resolve_index(v: "IRVisitor", host: Tensor, index: Sequence[Any], value_shape: Sequence[Any] | None,
                  known_sizes: Sequence[int | None] = ()) -> list[DimAccess]:
    """One :class:`DimAccess` per index entry (``None`` entries included); ``known_sizes``
    are host dims of a dynamic type whose size is nevertheless fixed (see
    :func:`specialized_sizes`)."""
    accesses: list[DimAccess] = []
    host_dim = 0
    value_dim = 0

    def value_size_symbol() -> Any:
        if value_shape is not None and value_dim < len(value_shape):
            return value_shape[value_dim]
        return None

    for entry in index:
        if entry is None:
            accesses.append(DimAccess("newaxis"))
            value_dim += 1
            continue
        if host_dim >= host.rank:
            raise HelionMLIRError(f"too many indices for a tensor of rank {host.rank}")
        if isinstance(entry, slice):
            known = known_sizes[host_dim] if host_dim < len(known_sizes) else None
            accesses.append(_slice_access(v, host, host_dim, entry, value_size_symbol(), known))
            host_dim += 1
            value_dim += 1
            continue
        if isinstance(entry, fx.Node):
            val = entry.meta.get("val")
            if isinstance(val, torch.Tensor):
                idx = v.tensor(entry)
                accesses.append(DimAccess("tensor", index=idx, size=None, index_extents=_lane_extents(v, val, idx)))
                host_dim += 1
                value_dim += idx.rank
                continue
            block_id = v.model.block_id_of(val)
            if block_id is not None and block_id in v.tiles:
                tile = v.tiles[block_id]
                accesses.append(DimAccess("slice", tile.offset, tile.extent, tile.size))
                host_dim += 1
                value_dim += 1
                continue
            accesses.append(DimAccess("scalar", offset=v.ops.index(v.scalar(entry, "index"))))
            host_dim += 1
            continue
        if isinstance(entry, int):
            offset = entry if entry >= 0 else _add_size(v, host, host_dim, entry)
            accesses.append(DimAccess("scalar", offset=offset))
            host_dim += 1
            continue
        raise HelionMLIRError(f"unsupported index entry {entry!r}")
    while host_dim < host.rank:  # trailing dims not indexed: whole dims
        known = known_sizes[host_dim] if host_dim < len(known_sizes) else None
        accesses.append(_slice_access(v, host, host_dim, slice(None), None, known))
        host_dim += 1
    return accesses


def _lane_extents(v: "IRVisitor", meta: torch.Tensor, value: Tensor) -> tuple[Scalar | int, ...]:
    """For each dim of an index tensor, how many lanes are in bounds (ragged tiles)."""
    extents: list[Scalar | int] = []
    for axis, size in enumerate(value.shape):
        block_id = v.model.block_id_of(meta.shape[axis]) if axis < meta.dim() else None
        tile = v.tiles.get(block_id) if block_id is not None else None
        if tile is not None and tile.ragged and size == tile.size:
            extents.append(tile.extent)
        else:
            extents.append(size if size is not None else v.ops.dim(value, axis))
    return tuple(extents)


def _add_size(v: "IRVisitor", host: Tensor, axis: int, negative: int) -> Scalar | int:
    size = v.ops.dim(host, axis)
    if isinstance(size, int):
        return size + negative
    return v.ops.binary("arith.addi", size, v.ops.index(negative))


def _slice_access(v: "IRVisitor", host: Tensor, axis: int, sl: slice, size_symbol: Any,
                  known_size: int | None = None) -> DimAccess:
    block_id = v.model.block_id_of(size_symbol)
    if sl == slice(None) and block_id is not None and block_id in v.tiles:
        tile = v.tiles[block_id]
        return DimAccess("slice", tile.offset, tile.extent, tile.size)
    dim_size = v.ops.dim(host, axis)
    if sl == slice(None):
        if not isinstance(dim_size, int) and known_size is not None:
            dim_size = known_size  # Helion specialized this dynamic host dim (hl.specialize)
        return DimAccess("slice", 0, dim_size, dim_size if isinstance(dim_size, int) else None)
    if not isinstance(dim_size, int):
        raise HelionMLIRError("static slices of dynamic dimensions are not supported")
    start, stop, step = sl.indices(dim_size)
    count = max(0, (stop - start + step - 1) // step)
    size = count
    if block_id is not None and block_id in v.tiles:
        size = v.tiles[block_id].size
    return DimAccess("slice", start, count, size, step)


def _value_shape(accesses: Sequence[DimAccess]) -> list[int | None]:
    shape: list[int | None] = []
    for a in accesses:
        if a.kind == "slice":
            shape.append(a.size)
        elif a.kind == "newaxis":
            shape.append(1)
        elif a.kind == "tensor":
            assert a.index is not None
            shape.extend(a.index.shape)
    return shape


def _value_dynamic_sizes(v: "IRVisitor", accesses: Sequence[DimAccess]) -> list[Scalar]:
    """The sizes of the dynamic dims of :func:`_value_shape`, in order (for ``tensor.empty``)."""
    sizes: list[Scalar] = []
    for a in accesses:
        if a.kind == "slice" and a.size is None:
            sizes.append(v.ops.index(a.extent))
        elif a.kind == "tensor":
            assert a.index is not None
            sizes += [v.ops.index(v.ops.dim(a.index, axis)) for axis, d in enumerate(a.index.shape) if d is None]
    return sizes


def _static(x: Scalar | int) -> str:
    return str(x) if isinstance(x, int) else x.ssa


def _host_accesses(accesses: Sequence[DimAccess]) -> list[DimAccess]:
    return [a for a in accesses if a.kind != "newaxis"]


def extract_valid(v: "IRVisitor", host: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    """The in-bounds region a slice-only index addresses (scalar dims dropped)."""
    hosts = _host_accesses(accesses)
    offsets = ", ".join(_static(a.offset) for a in hosts)
    sizes = ", ".join(_static(a.extent) if a.kind == "slice" else "1" for a in hosts)
    strides = ", ".join(str(a.step) if a.kind == "slice" else "1" for a in hosts)
    shape = tuple(a.extent if isinstance(a.extent, int) else None for a in hosts if a.kind == "slice")
    result = Tensor(v.ops.fresh("slice"), shape, host.dtype)
    v.ops.op(
        f"{result.ssa} = tensor.extract_slice {host.ssa}[{offsets}] [{sizes}] [{strides}] : {host.type} to {result.type}"
    )
    return result


def pad_to_tile(v: "IRVisitor", valid: Tensor, accesses: Sequence[DimAccess], fill: Any = 0) -> Tensor:
    """Place the in-bounds region in a tile of the static tile shape filled with ``fill``."""
    slices = [a for a in accesses if a.kind == "slice"]
    if not any(a.padded for a in slices):
        return valid
    shape = tuple(a.size for a in slices)
    dynamic = [v.ops.index(a.extent) for a in slices if a.size is None]  # whole dims: exactly their lanes
    base = v.ops.fill(shape, valid.dtype, fill, dynamic)
    zeros = ", ".join("0" for _ in slices)
    sizes = ", ".join(_static(a.extent) for a in slices)
    ones = ", ".join("1" for _ in slices)
    result = Tensor(v.ops.fresh("tile"), shape, valid.dtype)
    v.ops.op(f"{result.ssa} = tensor.insert_slice {valid.ssa} into {base.ssa}[{zeros}] [{sizes}] [{ones}] : {valid.type} into {base.type}")
    return result


def _add_new_axes(v: "IRVisitor", value: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    if not any(a.kind == "newaxis" for a in accesses):
        return value
    out_shape = _value_shape(accesses)
    groups: list[list[int]] = []
    pending: list[int] = []
    for pos, a in enumerate([a for a in accesses if a.kind in ("slice", "newaxis")]):
        pending.append(pos)
        if a.kind == "slice":
            groups.append(pending)
            pending = []
    if pending:
        if groups:
            groups[-1].extend(pending)
        else:
            groups = []  # rank-0 source: empty reassociation
    result = Tensor(v.ops.fresh("expand"), tuple(out_shape), value.dtype)
    dims = ", ".join("?" if s is None else str(s) for s in out_shape)
    reassoc = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
    sizes = []
    for pos, s in enumerate(out_shape):
        sizes.append(str(s) if s is not None else v.ops.dim(value, _source_dim(groups, pos)).ssa)  # type: ignore[union-attr]
    del dims
    v.ops.op(f"{result.ssa} = tensor.expand_shape {value.ssa} {reassoc} output_shape [{', '.join(sizes)}] : {value.type} into {result.type}")
    return result


def _source_dim(groups: list[list[int]], pos: int) -> int:
    for i, g in enumerate(groups):
        if pos in g:
            return i
    raise HelionMLIRError("bad reassociation")


def _valid_lane_condition(v: "IRVisitor", accesses: Sequence[DimAccess], index_of: Callable[[int], str]) -> str | None:
    """An ``i1`` that is true for lanes inside every ragged slice and index-tensor dimension
    (None if all lanes are)."""
    bounds: list[tuple[str, Scalar | int]] = []
    out_dim = 0
    for a in accesses:
        if a.kind == "slice":
            if a.padded:
                bounds.append((index_of(out_dim), a.extent))
            out_dim += 1
        elif a.kind == "newaxis":
            out_dim += 1
        elif a.kind == "tensor":
            assert a.index is not None
            for axis, extent in enumerate(a.index_extents):
                if not (isinstance(extent, int) and extent == a.index.shape[axis]):
                    bounds.append((index_of(out_dim + axis), extent))
            out_dim += a.index.rank
    return v.ops.lanes_in_bounds(bounds)


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
    out_shape = _value_shape(accesses)
    rank = len(out_shape)
    tensors, maps, which = _index_tensor_maps(accesses, rank)
    dims = [f"d{i}" for i in range(rank)]
    maps.append(f"affine_map<({', '.join(dims)}) -> ({', '.join(dims)})>")
    init = v.ops.empty(out_shape, host.dtype, _value_dynamic_sizes(v, accesses))
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
        cond = _valid_lane_condition(v, accesses, index_of)
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
    return _add_new_axes(v, pad_to_tile(v, valid, accesses), accesses)


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
    shape = _value_shape(accesses)
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
    sizes = ", ".join(_static(a.extent) for a in slices)
    ones = ", ".join("1" for _ in slices)
    shape = tuple(a.extent if isinstance(a.extent, int) else None for a in slices)
    result = Tensor(v.ops.fresh("valid"), shape, value.dtype)
    v.ops.op(f"{result.ssa} = tensor.extract_slice {value.ssa}[{zeros}] [{sizes}] [{ones}] : {value.type} to {result.type}")
    return result


def insert_valid(v: "IRVisitor", dest: Tensor, valid: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    hosts = _host_accesses(accesses)
    offsets = ", ".join(_static(a.offset) for a in hosts)
    sizes = ", ".join(_static(a.extent) if a.kind == "slice" else "1" for a in hosts)
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
    shape = _value_shape(accesses)
    elt = element_type(dest.dtype)
    olds = [v.ops.fill(shape, dest.dtype, 0, _value_dynamic_sizes(v, accesses))] if keep_old else []
    carried_in: list[Any] = [dest] + olds
    extents: list[Scalar | int] = []
    for a in accesses:
        if a.kind == "slice":
            extents.append(a.extent)
        elif a.kind == "newaxis":
            extents.append(1)
        elif a.kind == "tensor":
            extents.extend(a.index_extents)

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
