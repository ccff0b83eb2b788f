"""Pairs that ``hl.split`` takes apart and ``hl.join`` puts together move as whole vectors.

``hl.split`` of a ``[..., n, 2]`` tile is two rank-reducing ``tensor.extract_slice`` ops of
its last axis, ``hl.join`` two ``tensor.insert_slice`` ops into the last axis of a new
``[..., n, 2]`` tensor (``lowering/rules/views.py``). Vectorized as they are, each half is a
``vector.transfer_read`` with stride 2, and each half written back a copy into a stride-2
view; the vector and memref lowerings move both one element at a time (a scalar load and a
lane insert each). In a rotary embedding over 16384x128 f32 that was about 90% of the time
(the same math over the two contiguous halves of each row ran 11x faster). After
vectorization (:func:`move_pairs_contiguously`):

- a read of one lane of the pair axis (``permutation_map`` without the last dimension, a
  constant last index) becomes a read of ``2n`` contiguous elements from the source with
  its last two axes collapsed, and ``vector.deinterleave`` keeps the even or the odd
  lanes; the reads of both lanes of the same pairs are the same read (``cse`` merges them);
- the two ``tensor.insert_slice`` ops that fill lane 0 and lane 1 of the same pairs become
  a loop over the rows of the two halves that reads one register of each,
  ``vector.interleave`` s them and writes ``2 * lanes`` contiguous elements of the
  destination with its last two axes collapsed.

Upstream has no pattern for either: the transfer lowering treats a stride-2 read as any
non-contiguous one, and the insertion of two slices is not a linalg op to vectorize.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, scf, tensor, ub, vector

from ..ir_walk import constant_index, defining_op, ops_where, slice_offsets_and_sizes
from ..tensor.vectorize_tiles import host_vector_shape

__all__ = ["move_pairs_contiguously"]

_DYNAMIC = ir.ShapedType.get_dynamic_size()


def _index(number: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), number)


def _collapse_pair_axis(value: ir.Value) -> ir.Value:
    """``value`` (a ``[..., n, 2]`` tensor) as ``[..., 2n]``: the same elements, contiguous pairs."""
    type_ = ir.RankedTensorType(value.type)
    rank = type_.rank
    inner = _DYNAMIC if type_.shape[-2] == _DYNAMIC else 2 * type_.shape[-2]
    result = ir.RankedTensorType.get([*type_.shape[:-2], inner], type_.element_type)
    groups = [[axis] for axis in range(rank - 2)] + [[rank - 2, rank - 1]]
    return tensor.collapse_shape(result, value, ir.ArrayAttr.get([_index_array(g) for g in groups]))


def _index_array(axes: list[int]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), a) for a in axes])


# --- reads of one lane of the pairs -------------------------------------------------------


def _lane_read(op: ir.Operation) -> int | None:
    """The lane (0 or 1) of the pair axis a ``vector.transfer_read`` reads alone, or None."""
    if op.name != "vector.transfer_read" or not isinstance(op.operands[0].type, ir.RankedTensorType):
        return None
    source = ir.RankedTensorType(op.operands[0].type)
    rank = source.rank
    if rank < 2 or source.shape[-1] != 2 or len(op.operands) != rank + 2:  # a mask operand: left as is
        return None
    results = ir.AffineMapAttr(op.attributes["permutation_map"]).value.results
    dims = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in results]
    if not dims or None in dims or rank - 1 in dims or dims[-1] != rank - 2:  # not dims: a read of one element
        return None
    lane = constant_index(op.operands[rank])
    return lane if lane in (0, 1) else None


def _read_pairs(op: ir.Operation, lane: int) -> ir.Value:
    """The lanes ``op`` reads, taken from a contiguous read of whole pairs."""
    source, rank = op.operands[0], ir.RankedTensorType(op.operands[0].type).rank
    indices = list(op.operands[1 : rank + 1])
    padding = op.operands[rank + 1]
    read_type = ir.VectorType(op.results[0].type)
    pairs_type = ir.VectorType.get([*read_type.shape[:-1], 2 * read_type.shape[-1]], read_type.element_type)
    permutation = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    collapsed_map = ir.AffineMap.get(rank - 1, 0, list(permutation.results))
    first_of_pair = arith.muli(indices[rank - 2], _index(2))
    pairs = vector.transfer_read(
        pairs_type, _collapse_pair_axis(source), [*indices[: rank - 2], first_of_pair], collapsed_map, padding,
        op.attributes["in_bounds"])
    even, odd = vector.deinterleave(pairs)
    return odd if lane else even


# --- the two insertions that fill both lanes ----------------------------------------------


def _static(attribute: ir.Attribute) -> list[int]:
    return list(ir.DenseI64ArrayAttr(attribute))


def _fills_one_lane(op: ir.Operation) -> int | None:
    """The lane a rank-reducing ``tensor.insert_slice`` fills along a static pair axis, or None."""
    if op.name != "tensor.insert_slice":
        return None
    source, dest = ir.RankedTensorType(op.operands[0].type), ir.RankedTensorType(op.operands[1].type)
    if not (source.has_static_shape and dest.has_static_shape) or dest.shape[-1] != 2 or source.rank != dest.rank - 1:
        return None
    sizes, strides = _static(op.attributes["static_sizes"]), _static(op.attributes["static_strides"])
    if sizes != [*source.shape, 1] or any(s != 1 for s in strides):
        return None
    lane = _static(op.attributes["static_offsets"])[-1]
    return lane if lane in (0, 1) else None


def _joined_pair(second: ir.Operation) -> ir.Operation | None:
    """The insertion whose result ``second`` fills with the other lane of the same pairs."""
    lane = _fills_one_lane(second)
    first = defining_op(second.operands[1])
    if lane is None or first is None or _fills_one_lane(first) != 1 - lane or len(list(first.results[0].uses)) != 1:
        return None
    same_place = (
        _static(first.attributes["static_offsets"])[:-1] == _static(second.attributes["static_offsets"])[:-1]
        and list(first.operands[2:]) == list(second.operands[2:])
        and first.operands[0].type == second.operands[0].type
    )
    return first if same_place else None


def _dominates(value: ir.Value, op: ir.Operation) -> bool:
    """``value`` can be used at ``op``: an argument of a block enclosing it, or the result of
    an op before it (or before an op enclosing it) in the same block."""
    owner = value.owner
    scope: ir.Operation | None = op
    while scope is not None and scope.name != "builtin.module":
        if isinstance(owner, ir.Block):
            if scope.block == owner:
                return True
        elif owner.operation.block == scope.block and owner.operation.is_before_in_block(scope):
            return True
        scope = scope.parent
    return False


def _final_place(second: ir.Operation, dest: ir.Value) -> ir.Value:
    """Where the joined tile is written: when ``dest`` is a ``tensor.empty`` whose only use is
    the join and the joined tile is then inserted whole (``tensor.insert_slice`` or
    ``tensor.parallel_insert_slice``) into a tensor at a place known in advance, that place
    (``tensor.extract_slice``), as ``eliminate-empty-tensors`` would have chosen before the
    collapsed view hid the chain from it, when the place's values can be used where the join
    is; otherwise ``dest``. (The rewrite cannot wait for that pass instead: it would also
    compute each half in a stride-2 view of the output.)"""
    empty = defining_op(dest)
    uses = list(second.results[0].uses)
    if empty is None or empty.name != "tensor.empty" or len(list(dest.uses)) != 1 or len(uses) != 1:
        return dest
    insert = uses[0].owner
    if insert.name not in ("tensor.insert_slice", "tensor.parallel_insert_slice") or uses[0].operand_number != 0:
        return dest
    target, places = insert.operands[1], list(insert.operands[2:])
    if insert.attributes["static_sizes"] != ir.DenseI64ArrayAttr.get(ir.RankedTensorType(dest.type).shape):
        return dest
    if not all(_dominates(v, second) for v in [target, *places]) or any(s != 1 for s in _static(insert.attributes["static_strides"])):
        return dest
    offsets = ir.DenseI64ArrayAttr(insert.attributes["static_offsets"])
    place = tensor.extract_slice(dest.type, target, places, [], [], offsets, insert.attributes["static_sizes"],
                                 insert.attributes["static_strides"])
    return place


def _interleave_rows(first: ir.Operation, second: ir.Operation, lanes: int) -> ir.Value:
    """``second``'s result, written as a loop of contiguous interleaved stores."""
    halves = {_fills_one_lane(first): first.operands[0], _fills_one_lane(second): second.operands[0]}
    dest = _final_place(second, first.operands[1])
    dest_type = ir.RankedTensorType(dest.type)
    half_type = ir.RankedTensorType(halves[0].type)
    offsets = [v if isinstance(v, ir.Value) else _index(v) for v in slice_offsets_and_sizes(first, 2)[0][:-1]]
    element = half_type.element_type
    rank = half_type.rank  # the destination's rank less the pair axis
    collapsed = _collapse_pair_axis(dest)
    padding = ub.poison(element)  # never read: every read is in bounds

    def store_rows(target: ir.Value, rows: list[ir.Value], column: ir.Value, width: int) -> ir.Value:
        half = ir.VectorType.get([width], element)
        row_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])
        read = [vector.transfer_read(half, halves[n], [*rows, column], row_map, padding, [True]) for n in (0, 1)]
        pairs = vector.interleave(*read)
        place = [arith.addi(o, r) for o, r in zip(offsets[:-1], rows)]
        start = arith.muli(arith.addi(offsets[-1], column), _index(2))
        return vector.transfer_write(collapsed.type, pairs, target, [*place, start], row_map, [True])

    def over(target: ir.Value, axis: int, rows: list[ir.Value]) -> ir.Value:
        size = half_type.shape[axis]
        if axis == rank - 1:
            whole = size - size % lanes
            if whole:
                loop = scf.ForOp(_index(0), _index(whole), _index(lanes), [target])
                with ir.InsertionPoint(loop.body):
                    scf.yield_([store_rows(loop.inner_iter_args[0], rows, loop.induction_variable, lanes)])
                target = loop.results[0]
            return store_rows(target, rows, _index(whole), size % lanes) if size % lanes else target
        loop = scf.ForOp(_index(0), _index(size), _index(1), [target])
        with ir.InsertionPoint(loop.body):
            scf.yield_([over(loop.inner_iter_args[0], axis + 1, [*rows, loop.induction_variable])])
        return loop.results[0]

    written = over(collapsed, 0, [])
    groups = [[axis] for axis in range(dest_type.rank - 2)] + [[dest_type.rank - 2, dest_type.rank - 1]]
    reassociation = ir.ArrayAttr.get([_index_array(g) for g in groups])
    return tensor.expand_shape(dest_type, written, reassociation, [], dest_type.shape)


def move_pairs_contiguously(module: ir.Module) -> tuple[int, int]:
    """Reads of one lane of ``[..., n, 2]`` pairs and insertions of both lanes as contiguous
    vector moves; returns how many reads and how many pairs of insertions were rewritten.
    Runs after vectorization, on tensors; ``cse`` afterwards merges the reads of both lanes."""
    reads = ops_where(module, lambda op: _lane_read(op) is not None)
    for op in reads:
        with ir.InsertionPoint(op), op.location:
            value = _read_pairs(op, _lane_read(op))
        op.results[0].replace_all_uses_with(value)
        op.erase()
    joins: list[tuple[ir.Operation, ir.Operation]] = []
    for op in ops_where(module, lambda op: op.name == "tensor.insert_slice"):
        first = _joined_pair(op)
        if first is not None and not any(first == second for _, second in joins):
            joins.append((first, op))
    lanes = host_vector_shape().lanes
    for first, second in joins:
        with ir.InsertionPoint(second), second.location:
            value = _interleave_rows(first, second, lanes)
        empty = defining_op(first.operands[1])
        second.results[0].replace_all_uses_with(value)
        second.erase()
        first.erase()
        if empty is not None and empty.name == "tensor.empty" and not list(empty.results[0].uses):
            empty.erase()
    return len(reads), len(joins)
