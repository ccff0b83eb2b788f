"""The insertions that end an ``scf.forall`` tile, ordered so that none overwrites what a later one reads.

``tensor.parallel_insert_slice`` ops of one ``scf.forall.in_parallel`` insert into the shared
outputs at once; one-shot bufferization writes them as copies in their order, and its
analysis does not see that a copy into one output can overwrite the buffer a later copy
reads. That buffer is a slice of the output when the later insertion's value was computed in
place in it, which ``eliminate-empty-tensors`` makes happen: a tile computing ``max.dim`` and
``argmin`` starts both index reductions from one fill of ``int64`` max (``cse`` merged them);
the elimination computes that fill in the argmax output's slice, bufferization computes the
argmin there and the argmax in a buffer of its own, and the copies then run argmax into its
output (over the argmin) before that slice is copied into the argmin output, which receives
the argmax. The sequential ``tensor.insert_slice`` of an ``scf.for`` is analysed correctly.

:func:`order_parallel_insertions` runs after ``eliminate-empty-tensors``, just before
bufferization: an insertion whose value may share a buffer with another shared output
(through slices, destination-style ops, loops, branches; any other op conservatively
through all its tensor operands) moves before that output's insertions, which do not
change what the tile computes (they write disjoint places at once). Insertions that would
each have to come first (a cycle) insert a copy of the value instead. No upstream pass or
option orders or separates them: the fix belongs in the analysis of
``tensor.parallel_insert_slice``.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import ops_where
from .destination_style import FOR_FIRST_INIT, linalg_input_count

__all__ = ["order_parallel_insertions"]

# Ops whose tensor result is a new buffer (or a constant): nothing of a shared output flows into it.
_FRESH = ("tensor.empty", "bufferization.alloc_tensor", "bufferization.to_tensor", "arith.constant",
          "tensor.generate", "tensor.from_elements", "tensor.splat", "tensor.pad")
_DESTINATION_OPERAND = {"tensor.insert": 1, "tensor.insert_slice": 1, "vector.transfer_write": 1}


def _yielded(region: ir.Region, index: int) -> ir.Value:
    return list(region.blocks[0].operations)[-1].operands[index]


def _buffer_sources(value: ir.Value) -> list[ir.Value]:
    """The values whose buffer ``value``'s buffer may be (one step back)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        parent = owner.owner.operation
        if parent.name == "scf.for" and value.arg_number > 0:
            index = value.arg_number - 1
            return [parent.operands[FOR_FIRST_INIT + index], _yielded(parent.regions[0], index)]
        return [v for v in parent.operands if isinstance(v.type, ir.RankedTensorType)]
    op = owner.operation
    index = list(op.results).index(value)
    if op.name in _FRESH:
        return []
    if op.name in _DESTINATION_OPERAND:
        return [op.operands[_DESTINATION_OPERAND[op.name]]]
    if op.name == "scf.for":
        return [op.operands[FOR_FIRST_INIT + index], _yielded(op.regions[0], index)]
    if op.name == "scf.if":
        return [_yielded(region, index) for region in op.regions if region.blocks]
    if op.name == "scf.forall":
        return [op.operands[len(op.operands) - len(op.results) + index]]
    inputs = linalg_input_count(op)
    if inputs is not None:
        return [op.operands[inputs + index]]
    return [v for v in op.operands if isinstance(v.type, ir.RankedTensorType)]


def _shares_buffer_with(value: ir.Value, candidates: list[ir.Value]) -> set[int]:
    """The positions in ``candidates`` (block arguments) whose buffer ``value``'s may be."""
    found: set[int] = set()
    seen: list[ir.Value] = []
    pending = [value]
    while pending:
        current = pending.pop()
        if any(current == s for s in seen):
            continue
        seen.append(current)
        found.update(i for i, c in enumerate(candidates) if current == c)
        pending.extend(_buffer_sources(current))
    return found


def _copied(value: ir.Value, before: ir.Operation) -> ir.Value:
    """A copy of ``value`` in a buffer of its own, made before ``before``."""
    with ir.InsertionPoint(before), before.location:
        copy = ir.Operation.create(
            "bufferization.alloc_tensor", results=[value.type], operands=[value],
            attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 1, 0])})
    return copy.results[0]


def _order(forall: ir.Operation) -> int:
    """Reorder (or copy the values of) one ``scf.forall``'s insertions; returns how many it changed."""
    body = forall.regions[0].blocks[0]
    shared = list(body.arguments)[len(body.arguments) - len(forall.results):]
    terminator = list(body.operations)[-1].operation
    inserts = [op.operation for op in terminator.regions[0].blocks[0].operations]
    if len(inserts) < 2:
        return 0
    into = [next(i for i, s in enumerate(shared) if op.operands[1] == s) for op in inserts]
    reads = [_shares_buffer_with(op.operands[0], shared) for op in inserts]
    # before[j]: the insertions j must come before (it reads a buffer they write).
    before = [{i for i in range(len(inserts)) if into[i] in reads[j] and into[i] != into[j]} for j in range(len(inserts))]
    order: list[int] = []
    copies = 0
    while len(order) < len(inserts):
        left = [j for j in range(len(inserts)) if j not in order]
        ready = [j for j in left if not any(j in before[k] for k in left)]
        if ready:
            order.append(ready[0])
            continue
        # A cycle: the first insertion left that must precede another reads a copy of its value.
        j = next(j for j in left if before[j] & set(left))
        inserts[j].operands[0] = _copied(inserts[j].operands[0], terminator)
        before[j] = set()
        copies += 1
    for previous, j in zip(order, order[1:]):  # every other insertion after the first, in order
        inserts[j].move_after(inserts[previous])
    return copies + sum(1 for position, j in enumerate(order) if j != position)


def order_parallel_insertions(module: ir.Module) -> int:
    """Order the insertions of each ``scf.forall`` tile so that none overwrites a buffer a later one reads.

    Returns how many insertions were moved or given a copy of their value. Run it after
    ``eliminate-empty-tensors``, just before bufferization.
    """
    return sum(_order(forall) for forall in ops_where(module, lambda op: op.name == "scf.forall"))
