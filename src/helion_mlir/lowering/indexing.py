"""How an index addresses a host tensor, and the slices, tiles and lane masks built from it.

:func:`resolve_index` turns the entries of a Helion subscript (tiles, whole dimensions,
static slices, scalars, index tensors, ``None``) into one :class:`DimAccess` each; the
memory and atomic rules build their ``tensor.extract_slice`` / ``insert_slice``, padded
tiles and in-bounds lane conditions from those (see docs/lowering.md).

Index tensors follow Helion (``CompileEnvironment.should_broadcast_tensor_indexers``): 1-D
ones address the Cartesian product of their positions, each adding its own value dim;
adjacent ones of which one has several dims broadcast together as in torch, adding the dims
of their broadcast shape once, where the first of them stands.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from helion._compiler.compile_environment import CompileEnvironment
from helion.language import tile_ops
from torch import fx

from ..errors import HelionMLIRError
from .bounds import assumed_inside, scalar_inside, tile_inside
from .context import RuleContext
from .emitter import Emitter, broadcast_shapes
from .padding import is_padded_whole_dim
from .values import Scalar, Tensor, Tile


class AccessKind(enum.Enum):
    """How an index entry addresses its host dimension."""

    SLICE = "slice"  # a tile, a whole dimension or a static slice: one value dim
    SCALAR = "scalar"  # one position: no value dim
    TENSOR = "tensor"  # positions from an index tensor, whose dims become value dims
    NEWAXIS = "newaxis"  # ``None``: a unit value dim, no host dim


@dataclasses.dataclass(frozen=True)
class DimAccess:
    """How one index entry addresses the host tensor and shapes the value.

    A ``SLICE`` is one value dim of static ``size`` whose first ``extent`` lanes are in
    bounds, starting at ``offset`` with ``step``; a ``SCALAR`` is the position ``offset``; a
    ``TENSOR`` reads its positions from ``index`` (``index_extents`` of its lanes in bounds).
    ``inside`` says that every position it addresses is known to lie inside the host
    dimension; the others are guarded (:mod:`.bounds`).

    A tile's slice that may run outside its dimension (a loop over a longer range, a moved
    ``tile.index``) is *clipped*: ``base`` is the host position of its lane 0 and ``lanes``
    how many of its lanes the tile holds, while ``offset`` and ``extent`` are the part
    inside the dimension, which the value holds from lane ``lane_offset`` on; its other
    lanes are padding, as past a ragged tile's end.

    A ``broadcast`` slice is a tile over a host dim of size 1: Helion drops a size-1 dim's
    offset, so every in-bounds lane addresses its one element (``offset`` is 0).

    ``value_dims`` are the value dims the entry's lanes lie along (one per index-tensor dim);
    index tensors broadcast together share theirs, added by the first (the others
    ``shared``).
    """

    kind: AccessKind
    offset: Scalar | int = 0
    extent: Scalar | int = 1
    size: int | None = 1
    step: int = 1
    index: Tensor | None = None
    index_extents: tuple[Scalar | int, ...] = ()  # in-bounds lanes of each index-tensor dim
    inside: bool = True
    base: Scalar | int | None = None  # set for a clipped slice only
    lanes: Scalar | int = 0
    lane_offset: Scalar | int = 0
    broadcast: bool = False
    value_dims: tuple[int, ...] = ()
    shared: bool = False

    @property
    def clipped(self) -> bool:
        return self.base is not None

    @property
    def value_lanes(self) -> Scalar | int:
        """How many lanes of a slice the tile holds (in bounds of the tile, not the tensor)."""
        return self.lanes if self.clipped else self.extent

    @property
    def host_extent(self) -> Scalar | int:
        """How many elements of the host dim a slice addresses (one for a broadcast)."""
        return 1 if self.broadcast else self.extent

    @property
    def padded(self) -> bool:
        if self.kind is not AccessKind.SLICE:
            return False
        if self.size is None:  # a dynamic dim holds exactly its lanes, which may run past the tensor
            return self.clipped
        return not (isinstance(self.extent, int) and self.extent == self.size)


def specialized_sizes(ctx: RuleContext, name: str, host: Tensor) -> tuple[int | None, ...]:
    """The sizes Helion fixed for a host tensor's dims (``hl.specialize`` under
    ``static_shapes=False`` leaves the function's dim dynamic but the size known)."""
    fake = next((a.fake for a in ctx.model.args if a.name == name), None)
    if not isinstance(fake, torch.Tensor) or fake.dim() != host.rank:
        return (None,) * host.rank
    return tuple(_fixed_size(size) for size in fake.shape)


def settle_unit_dims(ctx: RuleContext, name: str, index: Sequence[Any]) -> None:
    """Decide, as Helion's code generation does for a load, whether each dynamic host dim
    of ``name`` that a tile indexes is 1 (``resolve_broadcast_dim``: the bound sizes decide,
    unless the dim provably covers the tile's loop); a dim found to be 1 is then one
    :func:`specialized_sizes` reports, and the tile broadcasts its one element (recorded in
    ``model.unit_dims``, which every call checks)."""
    fake = next((a.fake for a in ctx.model.args if a.name == name), None)
    if not isinstance(fake, torch.Tensor):
        return
    env = CompileEnvironment.current()
    host_dim = 0
    for entry in index:
        if entry is None:
            continue
        tile = ctx.tile_of(entry.meta.get("val")) if isinstance(entry, fx.Node) else None
        size = fake.size(host_dim) if host_dim < fake.dim() else None
        if tile is not None and isinstance(size, torch.SymInt):
            extent = env.block_sizes[env.canonical_block_id(tile.block_id)].size
            loop = sympy.sympify(extent.node.expr if isinstance(extent, torch.SymInt) else extent) \
                if isinstance(extent, (int, torch.SymInt)) else None
            if loop is None or not env.known_nonnegative(size.node.expr - loop):  # else: at size 1, one lane
                env.resolve_broadcast_dim(size, tile.block_id)
                if _fixed_size(size) == 1:
                    ctx.model.unit_dims[(name, host_dim)] = loop
        host_dim += 1


def _fixed_size(size: Any) -> int | None:
    """An int size, or the number a symbolic size was specialized to, else None."""
    if isinstance(size, int):
        return size
    expr = size.node.expr
    fixed = size.node.shape_env.replacements.get(expr, expr)
    return int(fixed) if getattr(fixed, "is_Integer", False) else None


def resolve_index(ctx: RuleContext, host: Tensor, index: Sequence[Any], value_shape: Sequence[Any] | None,
                  known_sizes: Sequence[int | None] = (), sizes: Sequence[Scalar | int] = (),
                  assume_for: str | None = None) -> list[DimAccess]:
    """One :class:`DimAccess` per index entry (``None`` entries included); ``known_sizes``
    are host dims of a dynamic type whose size is nevertheless fixed (see
    :func:`specialized_sizes`), ``sizes`` the host dims as the kernel's symbols resolve them
    (:func:`~.bounds.canonical_sizes`; without them no position is known inside). With
    ``assume_for`` (the host tensor's name), positions that lie inside when a relation of
    host values holds are taken as inside and the relation checked at launch
    (:func:`~.bounds.assumed_inside`)."""
    group = _broadcast_group(ctx, index)
    accesses: list[DimAccess] = []
    host_dim = 0
    value_dim = 0

    def value_size_symbol() -> Any:
        if value_shape is not None and value_dim < len(value_shape):
            return value_shape[value_dim]
        return None

    for pos, entry in enumerate(index):
        if entry is None:
            accesses.append(DimAccess(AccessKind.NEWAXIS))
            value_dim += 1
            continue
        if host_dim >= host.rank:
            raise HelionMLIRError(f"too many indices for a tensor of rank {host.rank}")
        if isinstance(entry, slice):
            known = known_sizes[host_dim] if host_dim < len(known_sizes) else None
            accesses.append(_slice_access(ctx, host, host_dim, entry, value_size_symbol(), known, sizes, assume_for))
            host_dim += 1
            value_dim += 1
            continue
        if isinstance(entry, fx.Node):
            val = entry.meta.get("val")
            if pos in group:
                accesses.append(group[pos])
                host_dim += 1
                value_dim += 0 if group[pos].shared else group[pos].index.rank  # type: ignore[union-attr]
                continue
            shifted = _shifted_tile_access(ctx, host, host_dim, entry)
            if shifted is not None:
                accesses.append(shifted)
                host_dim += 1
                value_dim += 1
                continue
            if isinstance(val, torch.Tensor):
                idx = ctx.tensor(entry)
                accesses.append(DimAccess(AccessKind.TENSOR, index=idx, size=None,
                                          index_extents=_lane_extents(ctx, val, idx), inside=False))
                host_dim += 1
                value_dim += idx.rank
                continue
            tile = ctx.tile_of(val)
            if tile is not None:
                known = known_sizes[host_dim] if host_dim < len(known_sizes) else None
                if ctx.emit.dim(host, host_dim) == 1 or known == 1:
                    accesses.append(DimAccess(AccessKind.SLICE, 0, tile.extent, tile.size, broadcast=True))
                else:
                    accesses.append(_tile_access(ctx, host, host_dim, tile, sizes, assume_for))
                host_dim += 1
                value_dim += 1
                continue
            inside = host_dim < len(sizes) and scalar_inside(ctx, entry, sizes[host_dim], assume_for, host_dim)
            accesses.append(DimAccess(AccessKind.SCALAR, offset=ctx.emit.index(ctx.scalar(entry, "index")),
                                      inside=inside))
            host_dim += 1
            continue
        if isinstance(entry, int):
            offset = entry if entry >= 0 else _add_size(ctx.emit, host, host_dim, entry)
            size = ctx.emit.dim(host, host_dim)
            inside = isinstance(offset, int) and scalar_inside(ctx, offset, size, assume_for, host_dim)
            accesses.append(DimAccess(AccessKind.SCALAR, offset=offset, inside=inside))
            host_dim += 1
            continue
        raise HelionMLIRError(f"unsupported index entry {entry!r}")
    while host_dim < host.rank:  # trailing dims not indexed: whole dims
        known = known_sizes[host_dim] if host_dim < len(known_sizes) else None
        accesses.append(_slice_access(ctx, host, host_dim, slice(None), None, known))
        host_dim += 1
    return _numbered(accesses)


def _numbered(accesses: Sequence[DimAccess]) -> list[DimAccess]:
    """``accesses`` with their ``value_dims`` set, in order (a shared index tensor takes
    those of the first of its group)."""
    numbered: list[DimAccess] = []
    value_dim = 0
    group: tuple[int, ...] = ()
    for a in accesses:
        if a.kind is AccessKind.TENSOR:
            assert a.index is not None
            if not a.shared:
                group = tuple(range(value_dim, value_dim + a.index.rank))
                value_dim += a.index.rank
            numbered.append(dataclasses.replace(a, value_dims=group))
        elif a.kind is AccessKind.SCALAR:
            numbered.append(a)
        else:
            numbered.append(dataclasses.replace(a, value_dims=(value_dim,)))
            value_dim += 1
    return numbered


def without_new_axes(accesses: Sequence[DimAccess]) -> list[DimAccess]:
    """``accesses`` of the value without the unit dims of its ``None`` entries, which
    address no host dim (a store through ``x[None, :, j]``)."""
    return _numbered([a for a in accesses if a.kind is not AccessKind.NEWAXIS])


def new_axis_dims(accesses: Sequence[DimAccess]) -> list[int]:
    """The value dims of the ``None`` entries of ``accesses``."""
    return [a.value_dims[0] for a in accesses if a.kind is AccessKind.NEWAXIS]


_SHIFTS = {torch.ops.aten.add.Tensor: 1, torch.ops.aten.add.Scalar: 1,
           torch.ops.aten.sub.Tensor: -1, torch.ops.aten.sub.Scalar: -1}


def _shifted_tile(ctx: RuleContext, node: fx.Node) -> tuple[Tile, Scalar | int] | None:
    """``(tile, shift)`` when ``node`` is ``tile.index`` or ``tile.index +/- shift`` with a
    scalar ``shift`` known to keep positions non-negative (a literal, or a symbol whose
    range says so); None for any other index."""
    if node.target is tile_ops.tile_index:
        tile = ctx.tile_of(node.args[0].meta.get("val")) if isinstance(node.args[0], fx.Node) else None
        return (tile, 0) if tile is not None else None
    sign = _SHIFTS.get(node.target)  # type: ignore[call-overload]
    if sign is None or node.kwargs.get("alpha", 1) != 1 or len(node.args) != 2:
        return None
    index, shift = node.args
    if sign == 1 and not (isinstance(index, fx.Node) and index.target is tile_ops.tile_index):
        index, shift = shift, index
    if not (isinstance(index, fx.Node) and index.target is tile_ops.tile_index):
        return None
    found = _shifted_tile(ctx, index)
    if found is None:
        return None
    if isinstance(shift, int) and not isinstance(shift, bool):
        return (found[0], shift) if sign * shift >= 0 else None
    meta = shift.meta.get("val") if isinstance(shift, fx.Node) else None
    if sign != 1 or not isinstance(meta, torch.SymInt):
        return None
    expr = meta.node.expr
    if not meta.node.shape_env.bound_sympy(expr).lower >= 0:
        return None
    fixed = ctx.static_int(shift)
    return found[0], fixed if fixed is not None else ctx.scalar(shift, "index")


def _shifted_tile_access(ctx: RuleContext, host: Tensor, axis: int, node: fx.Node) -> DimAccess | None:
    """``tile.index + shift`` as an index of ``host``'s dim ``axis``: the contiguous slice
    of the tile's lanes moved by ``shift``, not a gather (which the vectorizer leaves one
    element at a time). Lanes past the tile's extent are padding as for ``x[tile]``; when
    the sizes do not show that the moved tile stays inside the dimension, the slice is
    clipped to it, so that lanes past its end read as padding instead of out of bounds."""
    found = _shifted_tile(ctx, node)
    if found is None or found[0].size is None:
        return None
    tile, shift = found
    emit = ctx.emit
    dim = emit.dim(host, axis)
    if isinstance(tile.offset, int) and isinstance(shift, int):
        start: Scalar | int = tile.offset + shift
    else:
        start = emit.binary("arith.addi", emit.index(tile.offset), emit.index(shift))
    inside = (isinstance(shift, int) and isinstance(dim, int) and isinstance(tile.begin, int) and tile.begin >= 0
              and isinstance(tile.end, int) and tile.end + shift <= dim)
    if inside:
        return DimAccess(AccessKind.SLICE, start, tile.extent, tile.size)
    return clipped_slice(emit, start, tile.extent, tile.size, dim, nonnegative=emit.known_at_most(0, tile.begin))


def _lane_extents(ctx: RuleContext, meta: torch.Tensor, value: Tensor) -> tuple[Scalar | int, ...]:
    """For each dim of an index tensor, how many lanes are in bounds (ragged tiles)."""
    extents: list[Scalar | int] = []
    for axis, size in enumerate(value.shape):
        tile = ctx.tile_of(meta.shape[axis]) if axis < meta.dim() else None
        if tile is not None and tile.ragged and size == tile.size:
            extents.append(tile.extent)
        else:
            extents.append(size if size is not None else ctx.emit.dim(value, axis))
    return tuple(extents)


def _add_size(emit: Emitter, host: Tensor, axis: int, negative: int) -> Scalar | int:
    size = emit.dim(host, axis)
    if isinstance(size, int):
        return size + negative
    return emit.binary("arith.addi", size, emit.index(negative))


def _broadcast_group(ctx: RuleContext, index: Sequence[Any]) -> dict[int, DimAccess]:
    """The accesses of the index tensors of ``index`` that Helion broadcasts together (see
    the module docstring), by entry position: each broadcast to their common shape, all
    in bounds on the lanes of the dims of that shape in bounds; empty when each index tensor
    adds its own dims (one index tensor, or 1-D ones: their Cartesian product)."""
    fakes = [entry.meta.get("val") if isinstance(entry, fx.Node) else entry for entry in index]
    positions = [pos for pos, fake in enumerate(fakes) if isinstance(fake, torch.Tensor)]
    metas = [fakes[pos] for pos in positions]
    if len(positions) < 2 or all(m.dim() <= 1 for m in metas):
        return {}
    if not CompileEnvironment.current().should_broadcast_tensor_indexers(fakes):
        shapes = ", ".join(str(list(m.shape)) for m in metas)
        raise HelionMLIRError(
            f"index tensors of shapes {shapes} at positions that are not adjacent are not supported (Helion "
            "does not broadcast them together); index adjacent dimensions, or index with 1-D tensors")
    emit = ctx.emit
    values = [ctx.tensor(index[pos]) for pos in positions]
    shape = broadcast_shapes(*(v.shape for v in values))
    own = [(v, _lane_extents(ctx, m, v)) for v, m in zip(values, metas)]
    extents: list[Scalar | int] = []
    sizes: list[Scalar] = []  # of the dynamic dims of ``shape``
    for axis, size in enumerate(shape):  # each dim's lanes are those of a member not of size 1 there
        for value, lanes in own:
            at = axis - len(shape) + value.rank
            if at >= 0 and value.shape[at] != 1:
                extents.append(lanes[at])
                if size is None:
                    sizes.append(emit.index(emit.dim(value, at)))
                break
        else:
            extents.append(1)
    group: dict[int, DimAccess] = {}
    for which, (pos, value) in enumerate(zip(positions, values)):
        wide = value if value.shape == shape else emit.elementwise(
            [value], shape, value.dtype, lambda args, _i: args[0], hint="bcast", dynamic_sizes=sizes)
        group[pos] = DimAccess(AccessKind.TENSOR, index=wide, size=None, index_extents=tuple(extents), inside=False,
                               shared=which > 0)
    return group


def _tile_access(ctx: RuleContext, host: Tensor, axis: int, tile: Tile, sizes: Sequence[Scalar | int],
                 assume_for: str | None) -> DimAccess:
    """A tile of ``host``'s dim ``axis``: clipped to it unless its loop's range is known
    inside, or checked inside at launch."""
    inside = axis < len(sizes) and tile_inside(ctx.emit, tile, sizes[axis])
    if inside or (assume_for is not None and tile.range_exprs is not None
                  and assumed_inside(ctx, assume_for, axis, *tile.range_exprs)):
        return DimAccess(AccessKind.SLICE, tile.offset, tile.extent, tile.size)
    return clipped_slice(ctx.emit, tile.offset, tile.extent, tile.size, ctx.emit.dim(host, axis),
                         nonnegative=ctx.emit.known_at_most(0, tile.begin))


def clipped_slice(emit: Emitter, base: Scalar | int, lanes: Scalar | int, size: int | None, dim: Scalar | int, *,
                  nonnegative: bool) -> DimAccess:
    """The slice of ``lanes`` lanes from host position ``base`` clipped to ``[0, dim)``
    (``nonnegative``: ``base`` is known not to be negative, which saves the lanes before 0)."""
    base_i, lanes_i, dim_i, zero = emit.index(base), emit.index(lanes), emit.index(dim), emit.index(0)
    if nonnegative:
        start = emit.min_index(base_i, dim_i)
        count = emit.min_index(lanes_i, emit.binary("arith.subi", dim_i, start))
        return DimAccess(AccessKind.SLICE, start, count, size, inside=False, base=base, lanes=lanes)
    before = emit.min_index(emit.binary("arith.maxsi", emit.binary("arith.subi", zero, base_i), zero), lanes_i)
    start = emit.min_index(emit.binary("arith.maxsi", base_i, zero), dim_i)
    end = emit.min_index(lanes_i, emit.binary("arith.subi", dim_i, base_i))
    count = emit.binary("arith.maxsi", emit.binary("arith.subi", end, before), zero)
    return DimAccess(AccessKind.SLICE, start, count, size, inside=False, base=base, lanes=lanes, lane_offset=before)


def _slice_access(ctx: RuleContext, host: Tensor, axis: int, sl: slice, size_symbol: Any,
                  known_size: int | None = None, sizes: Sequence[Scalar | int] = (),
                  assume_for: str | None = None) -> DimAccess:
    tile = ctx.tile_of(size_symbol)
    if sl == slice(None) and tile is not None:
        return _tile_access(ctx, host, axis, tile, sizes, assume_for)
    dim_size = ctx.emit.dim(host, axis)
    if sl == slice(None):
        if not isinstance(dim_size, int) and known_size is not None:
            dim_size = known_size  # Helion specialized this dynamic host dim (hl.specialize)
        if isinstance(dim_size, int) and is_padded_whole_dim(size_symbol, dim_size):
            return DimAccess(AccessKind.SLICE, 0, dim_size, size_symbol)
        return DimAccess(AccessKind.SLICE, 0, dim_size, dim_size if isinstance(dim_size, int) else None)
    if not isinstance(dim_size, int):
        raise HelionMLIRError("static slices of dynamic dimensions are not supported")
    start, stop, step = sl.indices(dim_size)
    count = max(0, (stop - start + step - 1) // step)
    return DimAccess(AccessKind.SLICE, start, count, tile.size if tile is not None else count, step)


def _per_value_dim(accesses: Sequence[DimAccess], of_slice: Callable[[DimAccess], Any],
                   of_tensor: Callable[[DimAccess], Sequence[Any]]) -> list[Any]:
    """One entry per dimension of the value an index addresses: ``of_slice`` of a slice, 1
    for a new axis, ``of_tensor``'s entries for the dimensions of an index tensor."""
    dims: list[Any] = []
    for a in accesses:
        if a.kind is AccessKind.SLICE:
            dims.append(of_slice(a))
        elif a.kind is AccessKind.NEWAXIS:
            dims.append(1)
        elif a.kind is AccessKind.TENSOR and not a.shared:
            dims.extend(of_tensor(a))
    return dims


def value_shape(accesses: Sequence[DimAccess]) -> list[int | None]:
    """The shape of the value an index addresses (None for a dynamic dimension)."""
    return _per_value_dim(accesses, lambda a: a.size, lambda a: a.index.shape)  # type: ignore[union-attr]


def value_extents(accesses: Sequence[DimAccess]) -> list[Scalar | int]:
    """How many lanes of each value dimension are in bounds of their tiles (the lanes of a
    clipped slice past its tensor included)."""
    return _per_value_dim(accesses, lambda a: a.value_lanes, lambda a: a.index_extents)


def value_dynamic_sizes(emit: Emitter, accesses: Sequence[DimAccess]) -> list[Scalar]:
    """The sizes of the dynamic dims of :func:`value_shape`, in order (for ``tensor.empty``)."""
    sizes: list[Scalar] = []
    for a in accesses:
        if a.kind is AccessKind.SLICE and a.size is None:
            sizes.append(emit.index(a.value_lanes))
        elif a.kind is AccessKind.TENSOR and not a.shared:
            assert a.index is not None
            sizes += [emit.index(emit.dim(a.index, axis)) for axis, d in enumerate(a.index.shape) if d is None]
    return sizes


def ssa_or_int(x: Scalar | int) -> str:
    """How an offset or size appears in a slice op: a literal or an SSA value."""
    return str(x) if isinstance(x, int) else x.ssa


def host_accesses(accesses: Sequence[DimAccess]) -> list[DimAccess]:
    """The accesses that address a host dimension (all but ``newaxis``)."""
    return [a for a in accesses if a.kind is not AccessKind.NEWAXIS]


def extract_valid(emit: Emitter, host: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    """The in-bounds region a slice-only index addresses (scalar dims dropped); a broadcast
    slice reads its one element into every in-bounds lane."""
    hosts = host_accesses(accesses)
    slices = [a for a in hosts if a.kind is AccessKind.SLICE]
    shape = tuple(a.extent if isinstance(a.extent, int) else None for a in slices)
    if 0 in shape:  # nothing to read (MLIR refuses even an empty slice at the end of a dimension)
        return emit.empty(shape, host.dtype, [emit.index(a.extent) for a in slices if not isinstance(a.extent, int)])
    offsets = ", ".join(ssa_or_int(a.offset) for a in hosts)
    sizes = ", ".join(ssa_or_int(a.host_extent) if a.kind is AccessKind.SLICE else "1" for a in hosts)
    strides = ", ".join(str(a.step) if a.kind is AccessKind.SLICE else "1" for a in hosts)
    read = tuple(1 if a.broadcast else s for a, s in zip(slices, shape))
    result = Tensor(emit.fresh("slice"), read, host.dtype)
    emit.op(
        f"{result.ssa} = tensor.extract_slice {host.ssa}[{offsets}] [{sizes}] [{strides}] : {host.type} to {result.type}"
    )
    if read == shape:
        return result
    return emit.elementwise([result], shape, host.dtype, lambda args, _i: args[0], hint="bcast",
                            dynamic_sizes=[emit.index(a.extent) for a in slices if not isinstance(a.extent, int)])


def pad_to_tile(emit: Emitter, valid: Tensor, accesses: Sequence[DimAccess], fill: Any = 0) -> Tensor:
    """Place the in-bounds region in a tile of the static tile shape filled with ``fill``."""
    slices = [a for a in accesses if a.kind is AccessKind.SLICE]
    if not any(a.padded for a in slices):
        return valid
    shape = tuple(a.size for a in slices)
    dynamic = [emit.index(a.value_lanes) for a in slices if a.size is None]  # whole dims: exactly their lanes
    base = emit.fill(shape, valid.dtype, fill, dynamic)
    if 0 in valid.shape:  # no lanes to place
        return base
    result = Tensor(emit.fresh("tile"), shape, valid.dtype)
    emit.op(f"{result.ssa} = tensor.insert_slice {valid.ssa} into {base.ssa}{valid_lanes(slices)} : {valid.type} into {base.type}")
    return result


def valid_lanes(slices: Sequence[DimAccess]) -> str:
    """``[lane offsets] [extents] [1, ..]``: where a tile's lanes inside the tensor are, as
    slice operands."""
    offsets = ", ".join(ssa_or_int(a.lane_offset) for a in slices)
    sizes = ", ".join(ssa_or_int(a.extent) for a in slices)
    ones = ", ".join("1" for _ in slices)
    return f"[{offsets}] [{sizes}] [{ones}]"


def add_new_axes(emit: Emitter, value: Tensor, accesses: Sequence[DimAccess]) -> Tensor:
    """``value`` with a unit dimension where the index has ``None``."""
    if not any(a.kind is AccessKind.NEWAXIS for a in accesses):
        return value
    out_shape = value_shape(accesses)
    groups: list[list[int]] = []
    pending: list[int] = []
    for pos, a in enumerate([a for a in accesses if a.kind in (AccessKind.SLICE, AccessKind.NEWAXIS)]):
        pending.append(pos)
        if a.kind is AccessKind.SLICE:
            groups.append(pending)
            pending = []
    if pending:
        if groups:
            groups[-1].extend(pending)
        else:
            groups = []  # rank-0 source: empty reassociation
    result = Tensor(emit.fresh("expand"), tuple(out_shape), value.dtype)
    reassoc = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
    sizes = []
    for pos, s in enumerate(out_shape):
        sizes.append(str(s) if s is not None else emit.dim(value, _source_dim(groups, pos)).ssa)  # type: ignore[union-attr]
    emit.op(f"{result.ssa} = tensor.expand_shape {value.ssa} {reassoc} output_shape [{', '.join(sizes)}] : {value.type} into {result.type}")
    return result


def _source_dim(groups: list[list[int]], pos: int) -> int:
    for i, g in enumerate(groups):
        if pos in g:
            return i
    raise HelionMLIRError("bad reassociation")


def valid_lane_condition(emit: Emitter, accesses: Sequence[DimAccess], index_of: Callable[[int], str]) -> str | None:
    """An ``i1`` that is true for lanes inside every ragged slice and index-tensor dimension
    (None if all lanes are); the lanes of a clipped slice past its tensor count as inside
    (the caller guards their positions)."""
    bounds: list[tuple[str, Scalar | int]] = []
    for a in accesses:
        if a.kind is AccessKind.SLICE:
            lanes = a.value_lanes
            if a.size is not None and not (isinstance(lanes, int) and lanes == a.size):
                bounds.append((index_of(a.value_dims[0]), lanes))
        elif a.kind is AccessKind.TENSOR and not a.shared:
            assert a.index is not None
            for dim, size, extent in zip(a.value_dims, a.index.shape, a.index_extents):
                if not (isinstance(extent, int) and extent == size):
                    bounds.append((index_of(dim), extent))
    return emit.lanes_in_bounds(bounds)
