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
from ..bounds import (
    all_of,
    any_lane,
    assumed_inside,
    canonical_sizes,
    check_message,
    guard_positions,
    guarded_update,
    guarded_value,
    in_range,
    nonempty,
    truthy,
    window_inside,
)
from ..context import RuleContext
from ..emitter import Emitter
from ..indexing import (
    AccessKind,
    DimAccess,
    add_new_axes,
    extract_valid,
    host_accesses,
    new_axis_dims,
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
    without_new_axes,
)
from ..jagged import index_dims, jagged_condition, jagged_lane_mask, mask_jagged, value_dims
from ..padding import widened
from ..registry import register_lowering
from ..values import HostTensor, Scalar, Tensor
from .views import drop_unit_dims, expand_dims, subscript_value


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
                 index_elements: dict[int, str]) -> tuple[list[str], list[int]]:
    """Host coordinates of the value lane at ``index_of``, and the host axes whose position
    may lie outside the tensor (scalars not known inside, index-tensor elements, clipped
    slices), which the caller guards (:func:`~..bounds.guard_positions`). Padding lanes of
    another slice are clamped in bounds (the caller discards them). ``index_elements`` maps
    access position -> index-tensor element."""
    coords: list[str] = []
    guarded: list[int] = []
    host_axis = 0
    for pos, a in enumerate(accesses):
        if a.kind is AccessKind.NEWAXIS:
            continue
        if a.kind is AccessKind.SCALAR:
            coords.append(emit.index(a.offset).ssa)
        elif a.broadcast:
            coords.append(emit.index(0).ssa)
        elif a.kind is AccessKind.SLICE:
            lane = index_of(a.value_dims[0])
            if a.step != 1:
                scaled = emit.assign("lane", f"arith.muli {lane}, {emit.index(a.step).ssa} : index")
                lane = scaled
            origin = a.base if a.base is not None else a.offset  # a clipped slice's lanes start at its base
            pos_ssa = emit.assign("pos", f"arith.addi {emit.index(origin).ssa}, {lane} : index")
            coords.append(_clamp_index(emit, pos_ssa, host, host_axis) if a.padded and a.inside else pos_ssa)
        else:  # tensor
            assert a.index is not None
            raw = index_elements[pos]
            coords.append(emit.assign("idx", f"arith.index_cast {raw} : {element_type(a.index.dtype)} to index"))
        if not a.inside:
            guarded.append(host_axis)
        host_axis += 1
    return coords, guarded


def _clamp_index(emit: Emitter, ssa: str, host: Tensor, axis: int) -> str:
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
    for pos, a in enumerate(accesses):
        if a.kind is AccessKind.TENSOR:
            assert a.index is not None
            which[pos] = len(tensors)
            tensors.append(a.index)
            maps.append(f"affine_map<({', '.join(dims)}) -> ({', '.join(dims[d] for d in a.value_dims)})>")
    return tensors, maps, which


def gather(ctx: RuleContext, host: Tensor, name: str, accesses: Sequence[DimAccess], mask: Tensor | None = None,
           fill: Any = 0) -> Tensor:
    """A load with tensor indices: one ``tensor.extract`` per lane inside a ``linalg.generic``.
    Padding lanes, lanes ``mask`` (broadcastable to the value) turns off and lanes whose
    position lies outside ``host`` read ``fill``; the generic runs only when the guarded
    dimensions are not empty (or, with launch checks, a launch checks that they are not)."""
    emit = ctx.emit
    out_shape = value_shape(accesses)
    rank = len(out_shape)
    tensors, maps, which = _index_tensor_maps(accesses, rank)
    dims = [f"d{i}" for i in range(rank)]
    identity = f"affine_map<({', '.join(dims)}) -> ({', '.join(dims)})>"
    if mask is not None:
        tensors.append(mask)
        maps.append(emit.broadcast_map(mask.shape, out_shape))
    maps.append(identity)
    guarded_axes = [axis for axis, a in enumerate(host_accesses(accesses)) if not a.inside]
    dynamic = value_dynamic_sizes(emit, accesses)

    def generic() -> Tensor:
        init = emit.empty(out_shape, host.dtype, dynamic)
        result = Tensor(emit.fresh("gather"), tuple(out_shape), host.dtype)
        ins = f" ins({', '.join(t.ssa for t in tensors)} : {', '.join(t.type for t in tensors)})" if tensors else ""
        iterators = ", ".join(['"parallel"'] * rank)
        header = (f"{result.ssa} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
                  f"iterator_types = [{iterators}]}}{ins} outs({init.ssa} : {init.type}) {{")
        block_args = [emit.fresh("ix") for _ in tensors]
        out_arg = emit.fresh("out")
        decls = ", ".join([f"{b}: {element_type(t.dtype)}" for b, t in zip(block_args, tensors)]
                          + [f"{out_arg}: {element_type(host.dtype)}"])
        cache: dict[int, str] = {}

        def index_of(d: int) -> str:
            if d not in cache:
                cache[d] = emit.assign("i", f"linalg.index {d} : index")
            return cache[d]

        with emit.region(header, f"}} -> {result.type}"):
            emit.block_header(decls)
            coords, guarded = _coordinates(emit, host, accesses, index_of,
                                           {pos: block_args[i] for pos, i in which.items()})
            lane = valid_lane_condition(emit, accesses, index_of)
            if mask is not None:
                on = truthy(emit, block_args[-1], mask.dtype)
                lane = on if lane is None else emit.assign("on", f"arith.andi {lane}, {on} : i1")
            coords, inside = guard_positions(emit, host, name, coords, guarded, lane)
            elem = emit.assign("elt", f"tensor.extract {host.ssa}[{', '.join(coords)}] : {host.type}")
            keep = all_of(emit, [c for c in (lane, inside) if c is not None])
            if keep is not None:
                fill_c = emit.const(fill, element_type(host.dtype))
                elem = emit.assign("sel", f"arith.select {keep}, {elem}, {fill_c.ssa} : {element_type(host.dtype)}")
            emit.op(f"linalg.yield {elem} : {element_type(host.dtype)}")
        return result

    def checked_at_launch(axis: int) -> bool:
        return emit.launch_checks and assumed_inside(ctx, name, axis, 0, 1)

    def one() -> Tensor:
        return _gather_one(emit, host, name, accesses, mask, fill)

    build = one if out_shape and all(d == 1 for d in out_shape) else generic
    return guarded_value(emit, nonempty(emit, host, guarded_axes, checked_at_launch), build,
                         lambda: emit.fill(out_shape, host.dtype, fill, dynamic), out_shape)


def _gather_one(emit: Emitter, host: Tensor, name: str, accesses: Sequence[DimAccess], mask: Tensor | None,
                fill: Any) -> Tensor:
    """A gather of one element as a one-element ``tensor.extract_slice`` at the coordinates
    its indices give (moved to 0 where they lie outside, the element then read as ``fill``).

    Not a ``linalg.generic`` extracting the element: compilers fold its unit dimensions, and
    MLIR's linalg vectorizer turns a 0-d ``linalg.generic`` that computes with a
    ``tensor.extract`` into invalid IR (``'arith.subf' op requires the same type for all
    operands``); IREE fuses such a gather into its consumer and fails on it
    (docs/downstream.md). The slice keeps the element in a tensor, whatever its type.
    """
    zero = emit.index(0).ssa

    def element(t: Tensor) -> str:
        return emit.assign("ie", f"tensor.extract {t.ssa}[{', '.join([zero] * t.rank)}] : {t.type}")

    index_elements = {pos: element(a.index) for pos, a in enumerate(accesses)
                      if a.kind is AccessKind.TENSOR and a.index is not None}
    coords, guarded = _coordinates(emit, host, accesses, lambda _d: zero, index_elements)
    lane = valid_lane_condition(emit, accesses, lambda _d: zero)
    if mask is not None:
        on = truthy(emit, element(mask), mask.dtype)
        lane = on if lane is None else emit.assign("on", f"arith.andi {lane}, {on} : i1")
    coords, inside = guard_positions(emit, host, name, coords, guarded, lane)
    ones = ", ".join(["1"] * host.rank)
    scalar_type = f"tensor<{element_type(host.dtype)}>"
    piece = emit.assign("one", f"tensor.extract_slice {host.ssa}[{', '.join(coords)}] [{ones}] [{ones}]"
                               f" : {host.type} to {scalar_type}")
    shape = tuple(value_shape(accesses))
    result = Tensor(emit.fresh("gather"), shape, host.dtype)
    emit.op(f"{result.ssa} = tensor.expand_shape {piece} [] output_shape [{', '.join(['1'] * len(shape))}]"
            f" : {scalar_type} into {result.type}")
    keep = all_of(emit, [c for c in (lane, inside) if c is not None])
    if keep is None:
        return result
    fill_c = emit.const(fill, element_type(host.dtype))

    def body(args: list[str], _index: Callable[[int], str]) -> str:
        return emit.assign("sel", f"arith.select {keep}, {args[0]}, {fill_c.ssa} : {element_type(host.dtype)}")

    return emit.elementwise([result], result.shape, result.dtype, body, hint="masked")


def positions_inside(emit: Emitter, host: Tensor, name: str, accesses: Sequence[DimAccess],
                     mask: Tensor | None = None) -> str | None:
    """For an index of slices and scalars: an ``i1`` true when every scalar position not known
    inside lies inside its dimension (None when there is none), which the access is guarded
    by; a slice that may run outside is clipped instead (:func:`~..indexing.clipped_slice`).
    In checked mode both are checked first, in every lane ``mask`` (broadcastable to the
    value; None: every lane) leaves on."""
    hosts = host_accesses(accesses)
    oks = {axis: in_range(emit, a.offset, emit.dim(host, axis)) for axis, a in enumerate(hosts)
           if a.kind is AccessKind.SCALAR and not a.inside}
    if emit.checked:
        _check_positions(emit, host, name, accesses, oks, mask)
    return all_of(emit, list(oks.values()))


def _check_positions(emit: Emitter, host: Tensor, name: str, accesses: Sequence[DimAccess], oks: dict[int, str],
                     mask: Tensor | None) -> None:
    """Checked mode: the scalar positions ``oks`` says are inside, and the lanes of each
    clipped slice, must lie inside ``host`` wherever ``mask`` leaves a lane on."""
    hosts = host_accesses(accesses)
    # host axis of each clipped slice -> its value dim
    windows = {axis: a.value_dims[0] for axis, a in enumerate(hosts) if a.kind is AccessKind.SLICE and a.clipped}
    if mask is None:
        for axis, ok in oks.items():
            emit.check(ok, check_message(name, axis, emit.dim(host, axis)))
        for axis in windows:
            a = hosts[axis]
            assert a.base is not None
            size = emit.dim(host, axis)
            emit.check(window_inside(emit, a.base, a.lanes, size), check_message(name, axis, size))
        return

    def lanes_on(outside_axis: int | None) -> str:
        """Whether some lane is on (and, with ``outside_axis``, lies outside that dimension)."""
        def body(args: list[str], index_of: Callable[[int], str]) -> str:
            on = truthy(emit, args[0], mask.dtype)
            lane = valid_lane_condition(emit, accesses, index_of)
            if lane is not None:
                on = emit.assign("on", f"arith.andi {lane}, {on} : i1")
            if outside_axis is None:
                return on
            a = hosts[outside_axis]
            lane_index = index_of(windows[outside_axis])
            position = emit.assign("pos", f"arith.addi {emit.index(a.base).ssa}, {lane_index} : index")
            inside = in_range(emit, position, emit.dim(host, outside_axis))
            outside = emit.assign("out", f"arith.xori {inside}, {emit.const(True, 'i1').ssa} : i1")
            return emit.assign("on", f"arith.andi {on}, {outside} : i1")

        lanes = emit.elementwise([mask], value_shape(accesses), torch.bool, body, hint="on",
                                 dynamic_sizes=value_dynamic_sizes(emit, accesses))
        return any_lane(emit, lanes)

    if oks:
        off = emit.assign("off", f"arith.xori {lanes_on(None)}, {emit.const(True, 'i1').ssa} : i1")
        for axis, ok in oks.items():
            checked = emit.assign("checked", f"arith.ori {ok}, {off} : i1")
            emit.check(checked, check_message(name, axis, emit.dim(host, axis)))
    for axis in windows:
        none_outside = emit.assign("none", f"arith.xori {lanes_on(axis)}, {emit.const(True, 'i1').ssa} : i1")
        emit.check(none_outside, check_message(name, axis, emit.dim(host, axis)))


def load_value(ctx: RuleContext, host: Tensor, name: str, accesses: Sequence[DimAccess],
               mask: Tensor | None = None) -> Tensor:
    """The value ``accesses`` address, positions outside ``host`` reading 0. ``mask``
    (broadcastable to the value) says which lanes are on: a gather reads 0 in the others;
    for slices and scalars it only says which lanes the checks of checked mode skip."""
    emit = ctx.emit
    if any(a.kind is AccessKind.TENSOR for a in accesses):
        return gather(ctx, host, name, accesses, mask)
    inside = positions_inside(emit, host, name, accesses, mask)

    def load() -> Tensor:
        valid = extract_valid(emit, host, accesses)
        return add_new_axes(emit, pad_to_tile(emit, valid, accesses), accesses)

    shape = value_shape(accesses)
    return guarded_value(emit, inside, load, lambda: emit.fill(shape, host.dtype, 0, value_dynamic_sizes(emit, accesses)),
                         shape)


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


def accesses_of(ctx: RuleContext, host: HostTensor, index: Any, value_arg: Any, *,
                masked: bool = False) -> list[DimAccess]:
    """How ``index`` addresses ``host``, for a value shaped like ``value_arg``'s meta. With
    launch checks, positions that depend on host values only may be checked inside at
    launch instead of guarded, unless the access is ``masked`` (its ``extra_mask`` may keep
    it inside)."""
    meta = value_arg.meta.get("val") if isinstance(value_arg, fx.Node) else None
    return resolve_index(ctx, host.value, index, list(meta.shape) if isinstance(meta, torch.Tensor) else None,
                         specialized_sizes(ctx, host.name, host.value), canonical_sizes(ctx, host.name, host.value),
                         host.name if ctx.emit.launch_checks and not masked else None)


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


def value_to_store(emit: Emitter, value: Any, host: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    """A lowered value (a tensor, or a number to fill with) shaped and typed for the lanes ``accesses`` address."""
    shape = value_shape(accesses)
    if isinstance(value, (int, float, bool, Scalar)):
        return emit.fill(shape, host.dtype, value)
    if not isinstance(value, Tensor):
        raise HelionMLIRError(f"cannot store {value!r}")
    return _fit_to(emit, emit.cast(value, host.dtype), shape)


def _fit_to(emit: Emitter, value: Tensor, shape: Sequence[int | None]) -> Tensor:
    """``value`` shaped like the lanes a store addresses, as torch and Helion assign it: leading
    unit dims past their rank dropped (``x[i] = y[i:i + 1]``), a dim longer than a static one
    cut to its leading lanes (Helion pads ``torch.full([3, 5], v)`` to 4 x 8 lanes, the first
    3 x 5 of which are the value's), unit dims broadcast; a dynamic dim takes the value's size."""
    extra = value.rank - len(shape)
    if extra > 0:
        if any(size != 1 for size in value.shape[:extra]):
            raise HelionMLIRError(f"cannot store a value of shape {value.shape} into {len(shape)} dimensions")
        value = drop_unit_dims(emit, value, list(range(extra)))
    lead = len(shape) - value.rank
    shape = [s if s is not None or i < lead else value.shape[i - lead] for i, s in enumerate(shape)]
    cut = [min(have, want) if isinstance(have, int) and isinstance(want, int) and want != 1 else have
           for have, want in zip(value.shape, shape[lead:])]
    if cut != list(value.shape):
        value = emit.slice_prefix(value, [c if c is not None else emit.dim(value, a) for a, c in enumerate(cut)])
    if any(isinstance(have, int) and isinstance(want, int) and have not in (1, want)
           for have, want in zip(value.shape, shape[lead:])):
        raise HelionMLIRError(f"cannot store a value of shape {value.shape} into lanes of shape {tuple(shape)}")
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
    if 0 in valid.shape:  # no lanes: the destination as it is (MLIR refuses the empty slice, see extract_valid)
        return dest
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
    mask = _fit_to(emit, _mask_for(emit, extra_mask, value), value.shape) if extra_mask is not None else None
    units = new_axis_dims(accesses)  # x[None, :, j] = v: the unit dims of None entries address nothing
    if units:
        value = drop_unit_dims(emit, value, units)
        mask = drop_unit_dims(emit, mask, units) if mask is not None else None
        dims = [d for axis, d in enumerate(dims) if axis not in units]
        accesses = without_new_axes(accesses)
    if any(a.kind is AccessKind.TENSOR for a in accesses):
        mask = _and_masks(emit, mask, jagged_lane_mask(ctx, dims, value))
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


def _and_masks(emit: Emitter, a: Tensor | None, b: Tensor | None) -> Tensor | None:
    if a is None or b is None:
        return a if b is None else b

    def body(args: list[str], _i: Callable[[int], str]) -> str:
        return emit.assign("both", f"arith.andi {truthy(emit, args[0], a.dtype)}, {args[1]} : i1")

    return emit.elementwise([a, b], b.shape, torch.bool, body, hint="mask")


# -- element-by-element read-modify-write (scatters, atomics with tensor indices) ----------
Combine = Callable[[str, str, str], str]


def scatter(emit: Emitter, dest: Tensor, name: str, accesses: Sequence[DimAccess], value: Tensor,
            mask: Tensor | None, combine: Combine, extra: Tensor | None = None, *,
            keep_old: bool = True) -> tuple[Tensor, Tensor | None]:
    """Visit every in-bounds lane of ``value`` in order; write ``combine(old, new, extra)`` at its
    host coordinates, unless they lie outside ``dest`` (the lane is skipped, its old value 0).
    Returns the new destination and, with ``keep_old``, a tile of the old values (without
    it, no tile is built or carried through the lane loops)."""
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
        for pos, a in enumerate(accesses):
            if a.kind is AccessKind.TENSOR:
                assert a.index is not None
                sel = ", ".join(ivs[d].ssa for d in a.value_dims)
                index_elements[pos] = emit.assign("ie", f"tensor.extract {a.index.ssa}[{sel}] : {a.index.type}")
        coords, axes = _coordinates(emit, cur_dest, accesses, lambda d: ivs[d].ssa, index_elements)
        on = None
        if mask is not None:
            on = truthy(emit, emit.assign("mk", f"tensor.extract {mask.ssa}[{lanes}] : {mask.type}"), mask.dtype)
        inside = guard_positions(emit, cur_dest, name, coords, axes, on, redirect=False)[1]

        def access(current: list[Any]) -> list[Any]:
            cur_dest = current[0]
            coord_text = ", ".join(coords)
            new = emit.assign("new", f"tensor.extract {value.ssa}[{lanes}] : {value.type}")
            old = emit.assign("old", f"tensor.extract {cur_dest.ssa}[{coord_text}] : {cur_dest.type}")
            extra_elt = None
            if extra is not None:
                extra_elt = emit.assign("x", f"tensor.extract {extra.ssa}[{lanes}] : {extra.type}")
            combined = combine(old, new, extra_elt or "")
            if on is not None:
                combined = emit.assign("keep", f"arith.select {on}, {combined}, {old} : {elt}")
            updated = [cur_dest.renamed(_insert_element(emit, combined, cur_dest, coords))]
            if keep_old:
                cur_olds = current[1]
                rec = emit.assign("rec", f"tensor.insert {old} into {cur_olds.ssa}[{lanes}] : {cur_olds.type}")
                updated.append(Tensor(rec, cur_olds.shape, cur_olds.dtype))
            return updated

        return guarded_update(emit, inside, access, list(carried))

    result = nest(0, [], carried_in)
    return result[0], (result[1] if keep_old else None)
