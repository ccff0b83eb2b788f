"""Top-level tile loops become ``scf.forall`` when their tiles provably write disjoint slices.

The emitted function walks its grid sequentially: a nest of ``scf.for`` loops (one per
grid dimension) carries the destination tensors through ``iter_args``, and each tile ends
with ``tensor.insert_slice`` of its result into them (destination-passing style). Tiles run
one after another, so a tile could in principle read what an earlier tile wrote; only when
no tile can see another's writes may the tiles run in parallel.

A nest is parallelized when, for every carried tensor and every loop of the nest, the tile
provably writes and reads only its own slice:

* the value yielded for the tensor is a ``tensor.insert_slice`` into the carried tensor,
  used by nothing else;
* that store, and every ``tensor.extract_slice`` of the carried tensor in the body (a
  kernel reading back what it stores, as atomics and in-place updates do), has in some
  dimension the offset ``iv`` with a size of at most the loop's step (``hl.tile``; a
  ragged edge clips the size with ``min(step, ...)``, ``arith`` or ``affine``), or the
  offset ``iv floordiv step`` with size 1 (``tile.id``);
* the carried tensor has no other use than those and ``tensor.dim``.

A tile that stores through a chain of loops and stores of its own carries the tensor through
them: ``out[tile_r, tile_c] = ...`` in a loop over column chunks (an online softmax's second
pass), or the full column tiles of a grid row in a loop and then its last, peeled tile
(:mod:`.tile_size_bounds`). When every slice the chain takes of it, in nested loops too,
starts at the nest's induction variables (one dimension each, one size), the chain stores
into the tile's own slice instead, inserted once after it, which is the store the proof
reads (2-thread online softmax 4096x1024 in [16, 256] chunks: 3.6 -> 2.1 ms; it ran on one
core).

Slices that differ in some dimension are disjoint, so tiles neither overwrite nor read
each other's results, and the order of the tiles does not matter. A kernel that
accumulates across tiles (column sums with atomics, a store indexed by data) fails the
proof and stays sequential. Only the perfect prefix of the nest (outer bodies hold just
index arithmetic and the next loop) is collapsed into one multi-dimensional ``scf.forall``
with ``tensor.parallel_insert_slice``; one-shot bufferization then writes each tile in
place into the shared destination.

A grid of at least :data:`MIN_OUTER_TILES` outer tiles (and four per worker) runs in
parallel over those alone, its inner loops kept in each (as a chain, above), when the proof
holds so: that is parallelism enough, and a tile of rows then walks its columns in a loop,
which :mod:`.row_major_chunks` turns into each row in order. Parallel over every dimension,
each worker took [16, 256] tiles one after another, 16 rows of 1 KiB each; measured on 2
threads, in one process: bias + GELU 4096x1792 in [16, 256] tiles 3.57 -> 2.32 ms (one
thread 4.6), SwiGLU 4096x2048 5.06 -> 2.37 ms; matmul 1024^3, attention and rope with
tables unchanged (0.99-1.02x).

Small nests stay sequential too (:data:`MIN_PARALLEL_WORK`): a parallel region whose
worker has gone to sleep costs the call tens of microseconds to wake it (40-100 us on the
2-core machine of docs/benchmarks.md, measured on example kernels over 37x100 elements
called 1 ms apart), more than the second core saves on a kernel that runs for less than
about that long.

No upstream pass makes an ``scf.for`` over tensors an ``scf.forall``: that takes the
disjointness proof above, which needs to know how the kernel's tiles address memory.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith, scf, tensor

from ..ir_build import extract_slice, insert_slice, remade_slice, slice_parts
from ..ir_walk import constant_index, defined_in, defining_op, slice_offsets_and_sizes
from .destination_style import FOR_FIRST_INIT

__all__ = ["MIN_OUTER_TILES", "MIN_PARALLEL_WORK", "estimate_work", "parallelize_tile_loops", "perfect_nest",
           "trip_count"]

#: Estimated scalar operations (see :func:`estimate_work`) below which a nest with static
#: trip counts stays sequential: about 50 us of vectorized code.
MIN_PARALLEL_WORK = 1 << 20

_DYNAMIC = ir.ShapedType.get_dynamic_size()

# Ops allowed in an outer loop body besides the inner loop: index arithmetic.
_PURE_PREFIXES = ("arith.", "index.", "affine.apply", "affine.min", "affine.max")


#: Outer tiles a grid needs to run in parallel over them alone (and, in
#: :mod:`.tile_size_bounds`, to have its inner loops peeled too).
MIN_OUTER_TILES = 8


def _at_most(size: ir.Value | int, bound: int) -> bool:
    """Whether a slice size is provably at most ``bound``."""
    if isinstance(size, int):
        return 0 <= size <= bound
    constant = constant_index(size)
    if constant is not None:
        return 0 <= constant <= bound
    owner = defining_op(size)
    if owner is not None and owner.name in ("arith.minsi", "arith.minui"):
        return any(_at_most(operand, bound) for operand in owner.operands)
    if owner is not None and owner.name == "affine.min":  # a tile size raised for peeling (tile_size_bounds)
        results = ir.AffineMapAttr(owner.attributes["map"]).value.results
        return any(isinstance(e := result.maybe_downcast(), ir.AffineConstantExpr) and e.value <= bound
                   for result in results)
    return False


def _separates(offsets: list, sizes: list, iv: ir.Value, step: int) -> bool:
    """Whether some dimension keeps the slices of different iterations of a loop apart."""
    for offset, size in zip(offsets, sizes):
        if not isinstance(offset, ir.Value):
            continue
        if offset == iv and _at_most(size, step):
            return True
        owner = defining_op(offset)
        if (
            owner is not None
            and owner.name in ("arith.divui", "arith.divsi", "arith.floordivsi")
            and owner.operands[0] == iv
            and constant_index(owner.operands[1]) == step
            and _at_most(size, 1)
        ):
            return True
    return False


def perfect_nest(loop: ir.Operation) -> list[ir.Operation]:
    """``loop`` and the loops perfectly nested in it that carry the same tensors."""
    nest = [loop]
    while True:
        outer = nest[-1]
        body = outer.regions[0].blocks[0]
        ops = [op.operation for op in body.operations]
        inner = [op for op in ops if op.name == "scf.for"]
        others = [op for op in ops if op.name not in ("scf.for", "scf.yield")]
        if len(inner) != 1 or any(len(op.regions) or not op.name.startswith(_PURE_PREFIXES) for op in others):
            return nest
        loop_ = inner[0]
        carried = list(body.arguments)[1:]
        if list(loop_.operands)[FOR_FIRST_INIT:] != carried or list(ops[-1].operands) != list(loop_.results):
            return nest
        if any(defined_in(bound, outer) for bound in list(loop_.operands)[:FOR_FIRST_INIT]):
            return nest
        nest.append(loop_)


def trip_count(loop: ir.Operation) -> int | None:
    """An ``scf.for``'s iteration count when its bounds and step are constants, else None."""
    lower, upper, step = (constant_index(v) for v in list(loop.operands)[:FOR_FIRST_INIT])
    if lower is None or upper is None or step is None or step <= 0:
        return None
    return max(0, -(-(upper - lower) // step))


def estimate_work(op: ir.Operation) -> int:
    """Scalar operations of the ops nested in ``op``: a linalg op counts its largest static
    operand times its payload, a loop its trip count (16 when unknown) times its body."""
    total = 0
    for region in op.regions:
        for block in region.blocks:
            for nested in block.operations:
                nested = nested.operation
                if nested.name.startswith("linalg.") and len(nested.regions):
                    shapes = [v.type.shape for v in nested.operands if isinstance(v.type, ir.ShapedType) and v.type.has_static_shape]
                    payload = len(list(nested.regions[0].blocks[0].operations))
                    total += max([math.prod(s) for s in shapes] or [1]) * max(1, payload - 1)
                elif nested.name == "scf.for":
                    trips = trip_count(nested)
                    total += (16 if trips is None else trips) * estimate_work(nested)
                else:
                    total += estimate_work(nested) if len(nested.regions) else 1
    return total


def _writes_disjoint_tiles(nest: list[ir.Operation]) -> list[ir.Operation] | None:
    """The final store of each carried tensor, when the proof above holds; else None."""
    steps = [constant_index(loop.operands[2]) for loop in nest]
    if any(step is None or step <= 0 for step in steps):
        return None
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in nest]
    body = nest[-1].regions[0].blocks[0]
    yielded = list(list(body.operations)[-1].operands)
    stores = []
    for carried, value in zip(list(body.arguments)[1:], yielded):
        store = defining_op(value)
        if not isinstance(carried.type, ir.RankedTensorType) or store is None:
            return None
        if store.name != "tensor.insert_slice" or store.operands[1] != carried or len(list(value.uses)) != 1:
            return None
        for use in carried.uses:
            user = use.owner
            if user == store or user.name == "tensor.dim":
                continue
            if user.name != "tensor.extract_slice":
                return None
            if not all(_separates(*slice_offsets_and_sizes(user, 1), iv, s) for iv, s in zip(ivs, steps)):
                return None
        if not all(_separates(*slice_offsets_and_sizes(store, 2), iv, s) for iv, s in zip(ivs, steps)):
            return None
        stores.append(store)
    return stores


def _separating_dimension(ops: list[ir.Operation], rank: int, iv: ir.Value,
                          step: int) -> tuple[int, ir.Value | int] | None:
    """The dimension in which every slice op of ``ops`` (of a tensor of ``rank``) starts at ``iv``
    with one size of at most ``step``, and that size."""
    parts = [slice_parts(op) for op in ops]
    for dimension in range(rank):
        sizes = [sizes[dimension] for _, sizes, _ in parts]
        if (all(offsets[dimension] == iv for offsets, _, _ in parts) and _at_most(sizes[0], step)
                and all(size == sizes[0] for size in sizes)):
            return dimension, sizes[0]
    return None


def _store_chain(carried: ir.Value, value: ir.Value, body: ir.Block) -> list[tuple[ir.Operation, int]] | None:
    """The ops of ``body`` through which a tile stores into ``carried`` before yielding ``value``, first
    to last: loops storing into it (with the index of its result) and ``insert_slice`` ops into it
    (index 0). None when another op takes part, or a value of the chain has another use than the
    next link and ``extract_slice`` reads."""
    chain: list[tuple[ir.Operation, int]] = []
    consumer = list(body.operations)[-1].operation
    while value != carried:
        op = defining_op(value)
        if op is None or op.parent.operation != body.owner.operation:
            return None
        if [use.owner.operation for use in value.uses if use.owner.name != "tensor.extract_slice"] != [consumer]:
            return None
        consumer = op
        if op.name == "scf.for":
            index = list(op.results).index(value)
            chain.append((op, index))
            value = op.operands[FOR_FIRST_INIT + index]
        elif op.name == "tensor.insert_slice":
            chain.append((op, 0))
            value = op.operands[1]
        else:
            return None
    chain.reverse()
    return chain


def _reads(value: ir.Value) -> list[ir.Operation]:
    """The ``extract_slice`` ops reading ``value``."""
    return [use.owner.operation for use in value.uses if use.owner.name == "tensor.extract_slice"]


def _chain_parts(start: ir.Value, value: ir.Value, block: ir.Block) -> tuple[list, list[ir.Operation]] | None:
    """The links of the store chain from ``start`` to ``value`` in ``block`` and in the bodies of its
    loops (outer first), and every slice they take of the stored tensor after ``start``."""
    chain = _store_chain(start, value, block)
    if chain is None:
        return None
    links: list[tuple[ir.Operation, int]] = []
    slices: list[ir.Operation] = []
    for link, index in chain:
        links.append((link, index))
        if link.name == "scf.for":
            body = link.regions[0].blocks[0]
            argument = body.arguments[1 + index]
            inner = _chain_parts(argument, list(body.operations)[-1].operands[index], body)
            if inner is None:
                return None
            first = inner[0][0][0] if inner[0] else list(body.operations)[-1].operation
            if [use.owner.operation for use in argument.uses if use.owner.name != "tensor.extract_slice"] != [first]:
                return None
            links += inner[0]
            slices += _reads(argument) + inner[1]
        else:
            slices.append(link)
        slices += _reads(link.results[index])
    return links, slices


def _available_before(size: ir.Value | int, first: ir.Operation, body: ir.Block) -> bool:
    """Whether a slice size can be computed right before ``first``, an op of ``body``."""
    if isinstance(size, int) or isinstance(size.owner, ir.Block):
        return True
    if not defined_in(size, body.owner):
        return True
    for op in body.operations:
        if op.operation == first:
            return False
        if op.operation == size.owner.operation:
            return True
    return False


def _localize_inner_stores(nest: list[ir.Operation]) -> None:
    """A carried tensor a tile stores into through a chain of loops and stores of its own
    (``out[tile_r, tile_c] = ...`` in a loop over column chunks; the full column tiles of a
    peeled grid row, then its last one) is stored into a slice of the tile's own rows, extracted
    before the chain and inserted once after it: the store the disjointness proof reads. Only
    when every slice the chain takes of it, in its loops too, starts at the nest's induction
    variables, in one dimension each, with one size known before the chain."""
    steps = [constant_index(loop.operands[2]) for loop in nest]
    if any(step is None or step <= 0 for step in steps):
        return
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in nest]
    body = nest[-1].regions[0].blocks[0]
    yield_ = list(body.operations)[-1].operation
    for position, carried in enumerate(list(body.arguments)[1:]):
        parts = _chain_parts(carried, yield_.operands[position], body)
        if parts is None or not parts[0] or (len(parts[0]) == 1 and parts[0][0][0].name == "tensor.insert_slice"):
            continue  # no chain, or the one store the proof reads
        links, slices = parts
        first = links[0][0]
        if any(use.owner.operation != first and use.owner.name not in ("tensor.dim", "tensor.extract_slice")
               for use in carried.uses):
            continue
        rank = ir.RankedTensorType(carried.type).rank
        dimensions = [_separating_dimension(slices, rank, iv, step) for iv, step in zip(ivs, steps)]
        if None not in dimensions and all(_available_before(size, first, body)
                                          for _, size in dimensions):  # type: ignore[misc]
            _store_through_tile(links, carried, yield_, position, dict(dimensions), slices)  # type: ignore[arg-type]


def _store_through_tile(links: list[tuple[ir.Operation, int]], carried: ir.Value, yield_: ir.Operation,
                        position: int, tile: dict[int, ir.Value | int], slices: list[ir.Operation]) -> None:
    """The chain's tensor becomes the slice ``tile`` (dimension -> size, at the offsets the
    ``slices`` share) of ``carried``, inserted back before the tile's ``yield_``."""
    type_ = ir.RankedTensorType(carried.type)
    shared_offsets = slice_parts(slices[0])[0]
    first = links[0][0]
    with ir.InsertionPoint(first), first.location:
        offsets = [shared_offsets[d] if d in tile else 0 for d in range(type_.rank)]
        sizes = [tile[d] if d in tile else (type_.shape[d] if not type_.is_dynamic_dim(d)
                                             else tensor.dim(carried, arith.constant(ir.IndexType.get(), d)))
                 for d in range(type_.rank)]
        tile_type = ir.RankedTensorType.get([s if isinstance(s, int) else _DYNAMIC for s in sizes], type_.element_type)
        own = extract_slice(tile_type, carried, offsets, sizes)
    first.operands[FOR_FIRST_INIT + links[0][1] if first.name == "scf.for" else 1] = own
    for link, index in links:
        if link.name == "scf.for":
            link.regions[0].blocks[0].arguments[1 + index].set_type(tile_type)
            link.results[index].set_type(tile_type)
    for op in slices:
        offsets_of_op, sizes_of_op, _ = slice_parts(op)
        remade_slice(op, [0 if d in tile else o for d, o in enumerate(offsets_of_op)], sizes_of_op)
    with ir.InsertionPoint(yield_), yield_.location:
        yield_.operands[position] = insert_slice(yield_.operands[position], carried, offsets, sizes)


def _to_forall(nest: list[ir.Operation], stores: list[ir.Operation]) -> None:
    outer, inner = nest[0], nest[-1]
    def bounds(position: int) -> list[ir.Value | int]:
        values = [loop.operands[position] for loop in nest]
        return [v if (c := constant_index(v)) is None else c for v in values]

    with ir.InsertionPoint(outer), outer.location:
        forall = scf.ForallOp(bounds(0), bounds(1), bounds(2), list(outer.operands)[FOR_FIRST_INIT:])
    body = forall.body
    terminator_ip = ir.InsertionPoint(body)
    for loop in nest:
        for op in list(loop.regions[0].blocks[0].operations):
            op = op.operation
            if op.name == "scf.yield" or (loop is not inner and op.name == "scf.for") or op in stores:
                continue
            op.detach_from_parent()
            terminator_ip.insert(op)
    for loop, iv in zip(nest, list(body.arguments)[: len(nest)]):
        loop.regions[0].blocks[0].arguments[0].replace_all_uses_with(iv)
    for carried, shared in zip(list(inner.regions[0].blocks[0].arguments)[1:], list(body.arguments)[len(nest):]):
        carried.replace_all_uses_with(shared)
    with ir.InsertionPoint(body), inner.location:
        in_parallel = scf.InParallelOp()
    for store in stores:
        ir.Operation.create(
            "tensor.parallel_insert_slice",
            operands=list(store.operands),
            attributes={name: store.attributes[name] for name in store.attributes},
            loc=store.location,
            ip=ir.InsertionPoint(in_parallel.block),
        )
    for old, new in zip(outer.results, forall.results):
        old.replace_all_uses_with(new)
    outer.erase()


def _parallel_nest(loop: ir.Operation, threads: int) -> tuple[list[ir.Operation], list[ir.Operation] | None]:
    """The loops of ``loop``'s nest to run in parallel and the stores the proof read (None when
    it does not hold): the outer loop alone when it has :data:`MIN_OUTER_TILES` tiles or more,
    four per worker at least, and the proof holds for it; else the whole perfect nest."""
    nest = perfect_nest(loop)
    if len(nest) > 1 and (trip_count(loop) or 0) >= max(MIN_OUTER_TILES, 4 * threads):
        _localize_inner_stores(nest[:1])
        stores = _writes_disjoint_tiles(nest[:1])
        if stores is not None:
            return nest[:1], stores
        nest = perfect_nest(loop)
    _localize_inner_stores(nest)
    return nest, _writes_disjoint_tiles(nest)


def parallelize_tile_loops(func: ir.OpView, *, threads: int = 2, min_work: int | None = None) -> int:
    """Turn the function's top-level tile loop nests into ``scf.forall`` where legal and
    worth it (``min_work`` defaults to :data:`MIN_PARALLEL_WORK`) for ``threads`` workers;
    returns how many nests were converted. Run ``canonicalize`` first: constants must sit
    outside the loops."""
    min_work = MIN_PARALLEL_WORK if min_work is None else min_work
    converted = 0
    for op in list(func.regions[0].blocks[0].operations):
        if op.operation.name != "scf.for":
            continue
        nest, stores = _parallel_nest(op.operation, threads)
        if stores is None:
            continue
        trips = [trip_count(loop) for loop in nest]
        if None not in trips and math.prod(trips) * estimate_work(nest[-1]) < min_work:  # type: ignore[arg-type]
            continue
        if None not in trips and math.prod(trips) < 2:  # type: ignore[arg-type]
            continue
        _to_forall(nest, stores)
        converted += 1
    return converted
