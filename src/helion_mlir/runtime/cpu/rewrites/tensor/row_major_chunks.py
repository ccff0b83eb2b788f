"""A loop over column chunks of a multi-row tile runs once per row, in the fast pipeline.

Helion kernels reduce long rows in chunks: ``for tile_r in hl.tile(rows): acc = zeros;
for tile_v in hl.tile(cols): acc = acc + torch.sum(f(x[tile_r, tile_v]), -1)`` (losses,
online softmax, norms over column tiles). With a tile of R rows the chunk loop visits the
rows in column-major pieces: chunk 0 of rows 0..R-1, then chunk 1 of each, so every row's
memory is read in R-way interleaved bursts that the hardware prefetchers do not follow as
one stream. Measured on one thread at 4096x1024 f32, KL divergence with [16, 256] tiles
took 4.2 ms and the same code with [1, 256] tiles 1.9 ms; [32, 128] 5.1 and 2.3 ms.
:func:`process_rows_before_column_chunks` makes the chunk loop the inner loop of a loop
over the tile's rows, each row's chunks in order::

    scf.for %c iter_args(%acc: tensor<Rx..>)  ->  scf.for %r in [0, R) iter_args(%all: tensor<Rx..>)
      { ops on [R, C] tiles }                        scf.for %c iter_args(%acc = %all[%r]: tensor<1x..>)
                                                       { the same ops on [1, C] tiles of row r0 + %r }

Only for chunks of a row that span two vector steps or more (:attr:`VectorShape.elements`;
128 f32 on AVX-512): with shorter ones the per-chunk work of a single row (a horizontal
reduction, an online softmax's rescaling) is what costs, and a tile of rows shares it across
a vector (two-pass softmax with [16, 16] chunks: 5.1 ms by tiles, 6.8 ms by rows). And only
where the reordering is exact: every linalg op of the loop is a ``linalg.generic`` whose first
loop runs over the tile's rows in parallel and whose body does not read that loop's index,
each operand indexed by it in its first dimension alone or not at all; every tensor carrying
rows (the loop's accumulators, slices of the inputs, results, ``scf.if`` results, fills, the
padded tile of a ragged chunk) has the R rows as its static first dimension; inputs are
sliced at one row offset that does not change from chunk to chunk; an output tile stored per
chunk (``out[tile_r, tile_v] = ...``) goes to a loop-carried destination at those rows.
Anything else (a named op, a nested loop, a scalar read of a row tile, a transposing map, a
carried value that is not per row, the last tile of rows that do not divide evenly, whose
row count is known only at run time) leaves the loop as it is.

A chunk loop whose last chunk was peeled off (:mod:`.tile_size_bounds`: the block does not
divide the columns) is followed by that chunk for the whole tile, so each row's end was read
after all the tile's rows' other chunks, apart from the stream of the rest of its row: bias +
GELU 4096x2000 in [16, 256] tiles took 7.4-8.1 ms on one thread against 5.8 ms in [1, 256]
tiles (in cache, no difference). Where the chunk loop is rewritten and its one result is a
tile the last chunk stores into (elementwise kernels), that chunk is put in a loop of one
iteration, rewritten the same way (whatever its length), and its loop over rows merged into
the chunk loop's: each row's last chunk right after its others, 5.8-6.1 ms. No upstream pass does this:
MLIR's loop interchange works on affine loops over memrefs, and the chunk loop carries
tensors.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, scf, tensor

from .destination_style import FOR_FIRST_INIT
from ..ir_build import extract_slice, insert_slice, remade_slice, slice_parts
from ..ir_walk import constant_index, defined_in, indexing_maps, iterator_types, ops_where
from .row_statistics import drop_unit_dimension_round_trips
from .tile_parallel import trip_count
from .vectorize_tiles import host_vector_shape

__all__ = ["process_rows_before_column_chunks"]

# Marks the one-iteration loop holding a chunk peeled off the end of a chunk loop.
_PEELED_TAIL = "helion_mlir.peeled_tail"
# Ops of a chunk loop that never carry rows (their operands and results are scalars).
_SCALAR_OPS = re.compile(r"^(arith|math|index)\.|^affine\.apply$|^tensor\.from_elements$")
_DYNAMIC = ir.ShapedType.get_dynamic_size()


class _Refused(Exception):
    """The loop is not a chunk loop over per-row values; it stays as it is."""


@dataclass
class _Plan:
    """What the rewrite of one chunk loop needs."""

    rows: int
    row_values: list[ir.Value]  # values of the loop (at any depth) whose first dimension is the tile's rows
    outside: list[ir.Value]  # such values defined before the loop: read through their row
    destinations: list[int]  # iter_args that are output tensors stored into at the tile's rows
    moved: list[ir.Operation]  # slices of inputs and stores into outputs: at row offset + the row


def _index_of(values: list[ir.Value], value: ir.Value) -> int | None:
    return next((i for i, v in enumerate(values) if v == value), None)


def _body_ops(loop: ir.Operation) -> list[ir.Operation]:
    """Ops of the loop's body and of the ``scf.if`` regions in it, in order (linalg bodies excluded)."""
    found: list[ir.Operation] = []

    def visit(block: ir.Block) -> None:
        for op in block.operations:
            found.append(op.operation)
            if op.operation.name == "scf.if":
                for region in op.operation.regions:
                    for inner in region.blocks:
                        visit(inner)

    visit(loop.regions[0].blocks[0])
    return found


def _terminator(block: ir.Block) -> ir.Operation:
    return block.operations[len(block.operations) - 1].operation


def _uses_rows(expression: ir.AffineExpr) -> bool:
    return re.search(r"\bd0\b", str(expression)) is not None


def _row_operand(map_: ir.AffineMap) -> bool:
    """True when an operand's first dimension is the row loop (d0) and no other uses it, False
    when d0 indexes none of its dimensions; refused otherwise."""
    users = [i for i, expression in enumerate(map_.results) if _uses_rows(expression)]
    if not users:
        return False
    if users != [0] or str(map_.results[0]) != "d0":
        raise _Refused("a map uses the row loop other than as an operand's first dimension")
    return True


class _Analysis:
    """Which values of a chunk loop carry the tile's rows, with the checks that make the rewrite exact."""

    def __init__(self, loop: ir.Operation) -> None:
        self.loop = loop
        self.block = loop.regions[0].blocks[0]
        self.body = _body_ops(loop)
        self.rows: list[ir.Value] = []
        self.free: list[ir.Value] = []  # tensors some op reads without the row loop
        # The row offsets of the slices of inputs (the tile's) and of the stores into outputs (the
        # tile's, or 0 in a buffer of the tile's own rows).
        self.offsets: dict[str, list[ir.Value | int]] = {"tensor.extract_slice": [], "tensor.insert_slice": []}
        self.moved: list[ir.Operation] = []
        self.long_chunks = False  # an input's chunk of a row spans two vector steps or more
        self.valid: list[ir.Value] = []  # run-time row counts of slices (a ragged last tile's)

    def row(self, value: ir.Value) -> bool:
        """Marks ``value`` as carrying rows; True when it was not marked before."""
        if _index_of(self.rows, value) is not None:
            return False
        self.rows.append(value)
        return True

    def is_row(self, value: ir.Value) -> bool:
        return _index_of(self.rows, value) is not None

    def plan(self) -> _Plan:
        for op in self.body:
            self._mark_generic_operands(op)
        self._propagate()
        if any(self.is_row(v) for v in self.free):
            raise _Refused("a tensor is read both per row and as a whole")
        size = self._row_size()
        destinations = self._destinations()
        self._check_slices(destinations)
        if len(self.offsets["tensor.extract_slice"]) != 1 or len(self.offsets["tensor.insert_slice"]) > 1:
            raise _Refused("per-row tiles at different row offsets (or none)")
        if not self.long_chunks and _PEELED_TAIL not in self.loop.attributes:
            raise _Refused("chunks of a row shorter than two vector steps")
        if len(self.valid) > 1:
            raise _Refused("slices of different run-time row counts")
        inside = [v for v in self.rows if defined_in(v, self.loop)]
        outside = [v for v in self.rows if not defined_in(v, self.loop)]
        if any(ir.RankedTensorType(v.type).is_dynamic_dim(0) for v in outside):
            raise _Refused("a value from before the loop with a run-time row count")
        return _Plan(size, inside, outside, destinations, self.moved)

    def _mark_generic_operands(self, op: ir.Operation) -> None:
        allowed = ("linalg.generic", "linalg.fill", "tensor.empty", "tensor.extract_slice", "tensor.insert_slice",
                   "scf.if", "scf.yield")
        if op.name not in allowed and not _SCALAR_OPS.match(op.name):
            raise _Refused(f"{op.name} in the chunk loop")
        if op.name != "linalg.generic":
            return
        if iterator_types(op)[:1] != ["parallel"]:
            raise _Refused("a linalg op without a parallel first loop")
        for operand, map_ in zip(op.operands, indexing_maps(op)):
            (self.rows if _row_operand(map_) else self.free).append(operand)
        for result in op.results:
            self.row(result)

    def _propagate(self) -> None:
        """Rows flow through fills, slices of per-row values, ``scf.if`` results and yields, and
        the loop's carried values."""
        loop_yield = _terminator(self.block)
        changed = True
        while changed:
            changed = False
            for op in self.body:
                if op.name == "linalg.fill" and self.is_row(op.results[0]):
                    changed |= self.row(op.operands[1])
                elif op.name == "tensor.extract_slice" and defined_in(op.operands[0], self.loop) and any(
                        self.is_row(v) for v in (op.operands[0], op.results[0])):
                    changed |= any([self.row(op.operands[0]), self.row(op.results[0])])
                elif op.name == "tensor.insert_slice" and defined_in(op.operands[1], self.loop) and any(
                        self.is_row(v) for v in (op.operands[1], op.results[0])):
                    changed |= any([self.row(op.operands[0]), self.row(op.operands[1]), self.row(op.results[0])])
                elif op.name == "scf.if":
                    for i, result in enumerate(op.results):
                        linked = [result] + [_terminator(region.blocks[0]).operands[i] for region in op.regions]
                        if any(self.is_row(v) for v in linked):
                            changed |= any([self.row(v) for v in linked])
            for i, argument in enumerate(list(self.block.arguments)[1:]):
                linked = (argument, loop_yield.operands[i], self.loop.results[i], self.loop.operands[FOR_FIRST_INIT + i])
                if any(self.is_row(v) for v in linked):
                    changed |= any([self.row(v) for v in linked])

    def _row_size(self) -> int:
        sizes = set()
        for value in self.rows:
            if not isinstance(value.type, ir.RankedTensorType) or value.type.rank == 0:
                raise _Refused("a per-row value is not a ranked tensor")
            sizes.add(value.type.shape[0])
        sizes.discard(_DYNAMIC)  # slices of a ragged last tile's rows, checked with the slices
        if len(sizes) != 1 or (size := sizes.pop()) < 2:
            raise _Refused("the tile's rows are not one static count of two or more")
        return size

    def _destinations(self) -> list[int]:
        """Carried tensors that are not per row must be output tensors a row tile is stored into."""
        loop_yield = _terminator(self.block)
        found = []
        for i, argument in enumerate(list(self.block.arguments)[1:]):
            if self.is_row(argument):
                continue
            uses = list(argument.uses)
            store = uses[0].owner if len(uses) == 1 else None
            if (store is None or store.name != "tensor.insert_slice" or store.operands[1] != argument
                    or loop_yield.operands[i] != store.results[0] or len(list(store.results[0].uses)) != 1):
                raise _Refused("a carried value is neither per row nor an output stored into")
            found.append(i)
        return found

    def _check_slices(self, destinations: list[int]) -> None:
        """Slices that carry rows take all of the tile's rows: of an input at the tile's row offset
        (moved to the row), of a per-row value from its first row (kept), stores into a carried
        output at the tile's row offset (moved). Nothing else reads a per-row value."""
        stores = [self.block.arguments[1 + i] for i in destinations]
        for op in self.body:
            if op.name == "tensor.extract_slice" and self.is_row(op.results[0]):
                self._check_slice(op, op.operands[0], op.results[0], moved=not self.is_row(op.operands[0]))
            elif op.name == "tensor.extract_slice" and self.is_row(op.operands[0]):
                raise _Refused("a slice of a per-row value that is not per row")
            elif op.name == "tensor.insert_slice" and _index_of(stores, op.operands[1]) is not None:
                if not self.is_row(op.operands[0]):
                    raise _Refused("a stored tile that is not per row")
                self._check_slice(op, op.operands[1], op.operands[0], moved=True)
            elif op.name == "tensor.insert_slice":
                linked = [self.is_row(v) for v in (op.operands[0], op.operands[1], op.results[0])]
                if not any(linked):
                    continue  # rows play no part (the padded bias row of a last chunk): the same for every row
                if not all(linked):
                    raise _Refused("an insertion that is not per row")
                self._check_slice(op, op.operands[1], op.operands[0], moved=False)
            elif _SCALAR_OPS.match(op.name) and any(self.is_row(v) for v in op.operands):
                raise _Refused(f"{op.name} reads a per-row value")

    def _check_slice(self, op: ir.Operation, whole: ir.Value, part: ir.Value, *, moved: bool) -> None:
        offsets, sizes, strides = slice_parts(op)
        if whole.type.rank != part.type.rank or strides[0] != 1:
            raise _Refused("a slice reduces or strides the rows")
        if isinstance(sizes[0], ir.Value):
            if defined_in(sizes[0], self.loop):
                raise _Refused("a row count that changes from chunk to chunk")
            if _index_of(self.valid, sizes[0]) is None:
                self.valid.append(sizes[0])
        elif sizes[0] != part.type.shape[0]:
            raise _Refused("a slice of part of the tile's rows")
        if not moved:
            if offsets[0] != 0:
                raise _Refused("a slice of a per-row value starts past its first row")
            return
        if op.name == "tensor.extract_slice" and defined_in(whole, self.loop):
            raise _Refused("a per-row tile sliced from a value of the loop")
        if isinstance(offsets[0], ir.Value) and defined_in(offsets[0], self.loop):
            raise _Refused("the row offset changes from chunk to chunk")
        known = self.offsets[op.name]
        if not any(offsets[0] == offset for offset in known):
            known.append(offsets[0])
        self.moved.append(op)
        chunk = part.type.shape[1:]
        long_enough = _DYNAMIC in chunk or math.prod(chunk) >= 2 * host_vector_shape().elements
        if op.name == "tensor.extract_slice" and long_enough:
            self.long_chunks = True


def _with_one_row(type_: ir.RankedTensorType) -> ir.RankedTensorType:
    """One row of ``type_``; a run-time row count (a ragged tile's slice: 0 or 1 rows) stays one."""
    first = _DYNAMIC if type_.is_dynamic_dim(0) else 1
    return ir.RankedTensorType.get([first, *type_.shape[1:]], type_.element_type, type_.encoding)


def _one_row_sizes(value: ir.Value) -> list:
    """Sizes of one row of ``value`` (its other dimensions whole; ``tensor.dim`` where not static)."""
    type_ = ir.RankedTensorType(value.type)
    return [1] + [tensor.dim(value, arith.constant(ir.IndexType.get(), i)) if type_.is_dynamic_dim(i) else type_.shape[i]
                  for i in range(1, type_.rank)]


def _row_of(value: ir.Value, row: ir.Value) -> ir.Value:
    """``value[row:row + 1]`` along its first dimension, keeping the rank."""
    rank = ir.RankedTensorType(value.type).rank
    return extract_slice(_with_one_row(value.type), value, [row] + [0] * (rank - 1), _one_row_sizes(value))


def _into_row(part: ir.Value, whole: ir.Value, row: ir.Value) -> ir.Value:
    """``whole`` with ``part`` (one row) inserted at ``row``."""
    rank = ir.RankedTensorType(whole.type).rank
    return insert_slice(part, whole, [row] + [0] * (rank - 1), _one_row_sizes(whole))


def _resliced(op: ir.Operation, row: ir.Value, moved: bool) -> None:
    """A slice (or insertion) of the tile's rows made again for one row: at offset + ``row`` when
    ``moved`` (a slice of an input, a store into an output), else at the same offset. A slice of
    the first S rows (a ragged tile's) takes row ``min(row, S)``, ``min(1, S - min(row, S))`` rows:
    none past the S that hold data."""
    offsets, sizes, _ = slice_parts(op)
    with ir.InsertionPoint(op), op.location:
        index = ir.IndexType.get()
        step = row
        if isinstance(sizes[0], ir.Value):
            step = arith.minsi(row, sizes[0])
            sizes[0] = arith.minsi(arith.constant(index, 1), arith.subi(sizes[0], step))
        else:
            sizes[0] = 1
        if moved:
            start = offsets[0] if isinstance(offsets[0], ir.Value) else arith.constant(index, offsets[0])
            offsets[0] = arith.addi(start, step)
    remade_slice(op, offsets, sizes)


def _offset_row_index(index_op: ir.Operation, row: ir.Value) -> None:
    """``linalg.index 0`` of a one-row op is the tile's row ``row`` (a mask of a ragged tile's rows)."""
    with ir.InsertionPoint.after(index_op), index_op.location:
        shifted = arith.addi(index_op.results[0], row)
    index_op.results[0].replace_all_uses_except(shifted, shifted.owner.operation)


def _all_ops(op: ir.Operation) -> list[ir.Operation]:
    return ops_where(op, lambda _: True)


def _retype_rows(pairs: list[tuple[ir.Operation, ir.Operation]], plan: _Plan) -> None:
    """Every per-row value of the clone (results and block arguments) gets one row."""
    for original, cloned in pairs:
        for result, cloned_result in zip(original.results, cloned.results):
            if _index_of(plan.row_values, result) is not None:
                cloned_result.set_type(_with_one_row(result.type))
        for region, cloned_region in zip(original.regions, cloned.regions):
            for block, cloned_block in zip(region.blocks, cloned_region.blocks):
                for argument, cloned_argument in zip(block.arguments, cloned_block.arguments):
                    if _index_of(plan.row_values, argument) is not None:
                        cloned_argument.set_type(_with_one_row(argument.type))


def _rewrite(loop: ir.Operation, plan: _Plan) -> ir.Operation:
    """The chunk loop, cloned into a loop over the tile's rows and retyped to one row; returns
    that loop over rows."""
    original_ops = _all_ops(loop)
    with ir.InsertionPoint(loop), loop.location:
        index = ir.IndexType.get()
        per_row = scf.ForOp(arith.constant(index, 0), arith.constant(index, plan.rows), arith.constant(index, 1),
                            list(loop.operands)[FOR_FIRST_INIT:])
    with ir.InsertionPoint(per_row.body), loop.location:
        row, whole = per_row.induction_variable, list(per_row.inner_iter_args)
        chunks = loop.clone()
        slices: list[tuple[ir.Value, ir.Value]] = []

        def row_slice(value: ir.Value) -> ir.Value:
            """``value``'s row, sliced once before the chunk loop."""
            known = next((sliced for source, sliced in slices if source == value), None)
            if known is None:
                with ir.InsertionPoint(chunks):
                    known = _row_of(value, row)
                slices.append((value, known))
            return known

        cloned_ops = _all_ops(chunks)
        pairs = list(zip(original_ops, cloned_ops))
        for cloned in cloned_ops[:-1]:  # the chunk loop itself comes last (post-order): its initial values below
            for j, operand in enumerate(list(cloned.operands)):
                if _index_of(plan.outside, operand) is not None:
                    cloned.operands[j] = row_slice(operand)
        for i, value in enumerate(whole):
            chunks.operands[FOR_FIRST_INIT + i] = value if i in plan.destinations else row_slice(value)
        _retype_rows(pairs, plan)
        for original, cloned in pairs:
            if original.name in ("tensor.extract_slice", "tensor.insert_slice") and (
                    original in plan.moved or _index_of(plan.row_values, original.results[0]) is not None):
                _resliced(cloned, row, moved=original in plan.moved)
            elif original.name == "linalg.index" and ir.IntegerAttr(original.attributes["dim"]).value == 0:
                _offset_row_index(cloned, row)
        scf.YieldOp([result if i in plan.destinations else _into_row(result, whole[i], row)
                     for i, result in enumerate(chunks.results)])
    for result, replacement in zip(loop.results, per_row.results):
        result.replace_all_uses_with(replacement)
    loop.erase()
    return per_row.operation


def _chunk_loops(module: ir.Module) -> list[ir.Operation]:
    """``scf.for`` loops with carried values and more than one iteration (or a count known
    only at run time), and the last chunks :func:`_wrap_peeled_tail` put in a loop."""
    def wanted(op: ir.Operation) -> bool:
        if op.name == "scf.for" and _PEELED_TAIL in op.attributes:
            return True
        trips = trip_count(op) if op.name == "scf.for" and len(op.operands) > FOR_FIRST_INIT else 0
        return trips is None or trips > 1
    return ops_where(module, wanted)


def _operands_at_any_depth(op: ir.Operation) -> list[ir.Value]:
    return [operand for inner in ops_where(op, lambda _: True) for operand in inner.operands]


def _wrap_peeled_tail(loop: ir.Operation) -> ir.Operation | None:
    """The last chunk peeled off ``loop`` (the ops after it that compute what is stored into
    its one result, and that store) moved into a loop of one iteration carrying that result,
    so that it can be processed by rows too; None where no such chunk follows ``loop``."""
    uses = list(loop.results[0].uses) if len(loop.results) == 1 else []
    store = uses[0].owner.operation if len(uses) == 1 else None
    if store is None or store.name != "tensor.insert_slice" or store.operands[1] != loop.results[0] \
            or store.block != loop.block:
        return None
    block = [op.operation for op in loop.block.operations]
    between = block[next(i for i, op in enumerate(block) if op == loop) + 1:next(i for i, op in enumerate(block)
                                                                                 if op == store)]
    tail: list[ir.Operation] = []
    pending = [v for i, v in enumerate(store.operands) if i != 1]
    while pending:
        owner = pending.pop().owner
        if isinstance(owner, ir.Block):
            continue
        owner = owner.operation
        if any(owner == op for op in between) and not any(owner == op for op in tail):
            tail.append(owner)
            pending += _operands_at_any_depth(owner)
    if not tail or any(use.owner.operation != store and not any(use.owner.operation == op for op in tail)
                       for op in tail for result in op.results for use in result.uses):
        return None
    with ir.InsertionPoint(store), store.location:
        index = ir.IndexType.get()
        one = arith.constant(index, 1)
        wrapper = scf.ForOp(arith.constant(index, 0), one, one, [loop.results[0]])
    wrapper.operation.attributes[_PEELED_TAIL] = ir.UnitAttr.get()
    store.results[0].replace_all_uses_with(wrapper.results[0])
    with ir.InsertionPoint(wrapper.body), store.location:
        end = scf.YieldOp([store.results[0]])
    for op in [op for op in between if any(op == t for t in tail)] + [store]:
        op.move_before(end)
    store.operands[1] = wrapper.inner_iter_args[0]
    return wrapper.operation


def _fuse_row_loops(first: ir.Operation, second: ir.Operation) -> bool:
    """``second`` (over the same rows, carrying ``first``'s one result and nothing else)
    merged into ``first``: each row's ops of ``second`` run right after that row's of ``first``.
    Exact: each iteration of either touches only its own row of the carried tile and reads
    inputs. False (nothing changed) where ``second`` reads a value made between the two
    (constants apart, which move before ``first``)."""
    if (len(first.results) != 1 or len(second.results) != 1
            or [use.owner.operation for use in first.results[0].uses] != [second]
            or any(constant_index(a) is None or constant_index(a) != constant_index(b)
                   for a, b in zip(list(first.operands)[:3], list(second.operands)[:3]))):
        return False
    between = []
    for value in [v for op in ops_where(second, lambda op: op != second) for v in op.operands]:
        owner = value.owner
        if not isinstance(owner, ir.Block) and not defined_in(value, second) and owner.operation.block == first.block \
                and not owner.operation.is_before_in_block(first):
            if owner.operation.name != "arith.constant":
                return False
            between.append(owner.operation)
    for constant in between:
        constant.move_before(first)
    first_body, second_body = first.regions[0].blocks[0], second.regions[0].blocks[0]
    first_end, second_end = _terminator(first_body), _terminator(second_body)
    second_body.arguments[0].replace_all_uses_with(first_body.arguments[0])
    second_body.arguments[1].replace_all_uses_with(first_end.operands[0])
    for op in [op.operation for op in second_body.operations][:-1]:
        op.move_before(first_end)
    first_end.operands[0] = second_end.operands[0]
    second.results[0].replace_all_uses_with(first.results[0])
    second.erase()
    return True


def _row_loop_before(loop: ir.Operation, by_rows: list[ir.Operation]) -> ir.Operation | None:
    """The loop over rows of ``by_rows`` whose result ``loop`` carries, if any."""
    owner = loop.operands[FOR_FIRST_INIT].owner
    if isinstance(owner, ir.Block):
        return None
    return next((rows for rows in by_rows if rows == owner.operation), None)


def process_rows_before_column_chunks(module: ir.Module) -> int:
    """Every chunk loop over the columns of a multi-row tile -> one chunk loop per row (module
    docstring), the chunk peeled off its end in the same loop over rows; returns how many
    loops were rewritten."""
    drop_unit_dimension_round_trips(module)
    for loop in _chunk_loops(module):
        _wrap_peeled_tail(loop)
    by_rows: list[ir.Operation] = []
    tails_by_rows: list[ir.Operation] = []
    for loop in _chunk_loops(module):
        tail = _PEELED_TAIL in loop.attributes
        if tail and _row_loop_before(loop, by_rows) is None:
            continue  # its chunk loop stays as it is: so does the last chunk
        try:
            plan = _Analysis(loop).plan()
        except _Refused:
            continue
        (tails_by_rows if tail else by_rows).append(_rewrite(loop, plan))
    for tail in tails_by_rows:
        _fuse_row_loops(_row_loop_before(tail, by_rows), tail)
    for wrapper in ops_where(module, lambda op: _PEELED_TAIL in op.attributes):
        del wrapper.attributes[_PEELED_TAIL]
    return len(by_rows) + len(tails_by_rows)
