"""Accumulators in buffers of their own, not in the output tile they end up in.

``eliminate-empty-tensors`` computes every empty tensor that is finally inserted into a
destination in that destination. For a value written once (a pointwise tile) that saves
a copy. For an accumulator carried through a reduction loop (a matmul's ``acc`` over K) it
means reading and writing the output tile on every iteration: the tile's rows lie a
full output row apart, so with small tiles (Helion's default ``[16, 16, 16]``) they and
the input rows the loop reads fall into the same L1 cache sets, and the loop runs at half
speed or less. A contiguous buffer of the tile's size (on the stack when small, see
:mod:`..buffer.stack_buffers`) and one copy into the output after the loop avoid that.

An empty tensor counts as an accumulator when it is the initial value of an ``scf.for``
iteration argument (directly or through the results of earlier loops) that the loop body
reads. Such empty tensors become ``bufferization.alloc_tensor``, which
``eliminate-empty-tensors`` leaves alone. No upstream option does this: the elimination
applies to every empty tensor it can reach.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import ops_where
from .destination_style import FOR_FIRST_INIT, linalg_input_count

__all__ = ["accumulate_in_local_buffers"]

def _carried_argument(loop: ir.Operation, operand_number: int) -> ir.Value:
    """The body's block argument carrying the loop's initial value ``operand_number``."""
    return loop.regions[0].blocks[0].arguments[operand_number - FOR_FIRST_INIT + 1]


def _read_in_loop(value: ir.Value) -> bool:
    """Whether ``value`` (a carried tensor) is read, directly or through slices and nested loops."""
    for use in value.uses:
        op, number = use.owner, use.operand_number
        if op.name in ("vector.transfer_read", "tensor.extract") and number == 0:
            return True
        inputs = linalg_input_count(op)
        if inputs is not None and number >= inputs:  # an ``outs`` operand, which the op reads
            return True
        if op.name == "tensor.extract_slice" and number == 0 and _read_in_loop(op.results[0]):
            return True
        if op.name == "scf.for" and number >= FOR_FIRST_INIT and _read_in_loop(_carried_argument(op, number)):
            return True
    return False


def _accumulates(value: ir.Value) -> bool:
    """Whether ``value`` starts an ``scf.for`` iteration argument that its loop reads."""
    for use in value.uses:
        loop, number = use.owner, use.operand_number
        if loop.name != "scf.for" or number < FOR_FIRST_INIT:
            continue
        if _read_in_loop(_carried_argument(loop, number)) or _accumulates(loop.results[number - FOR_FIRST_INIT]):
            return True
    return False


def accumulate_in_local_buffers(module: ir.Module) -> int:
    """Turn the empty tensors that start loop-carried accumulators into ``bufferization.alloc_tensor``.

    Returns how many. Run it before ``eliminate-empty-tensors``.
    """
    replaced = 0
    for empty in ops_where(module, lambda op: op.name == "tensor.empty"):
        if not _accumulates(empty.results[0]):
            continue
        sizes = list(empty.operands)
        with ir.InsertionPoint(empty), empty.location:
            alloc = ir.Operation.create(
                "bufferization.alloc_tensor",
                results=[empty.results[0].type],
                operands=sizes,
                attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(sizes), 0, 0])},
            )
        empty.results[0].replace_all_uses_with(alloc.results[0])
        empty.erase()
        replaced += 1
    return replaced
