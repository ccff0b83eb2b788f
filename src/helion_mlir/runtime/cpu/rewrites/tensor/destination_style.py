"""Queries and edits of tensors in destination-passing style, shared by the rewrites that
make bufferization compute a tensor in the buffer it should end up in
(:mod:`.in_place_results`, :mod:`.carried_buffers`, :mod:`.local_accumulators`)."""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import defining_op

__all__ = ["FOR_FIRST_INIT", "computed_in", "linalg_input_count", "replace_terminator", "store_full"]

#: Operand number of an ``scf.for``'s first initial value (after lower bound, upper bound, step).
FOR_FIRST_INIT = 3


def replace_terminator(terminator: ir.Operation, operands: list[ir.Value]) -> None:
    """Put a terminator of the same kind (``func.return``, ``scf.yield``) with ``operands`` in its place."""
    with ir.InsertionPoint(terminator), terminator.location:
        ir.Operation.create(terminator.name, operands=operands)
    terminator.erase()


def linalg_input_count(op: ir.Operation) -> int | None:
    """How many of a linalg op's operands are ``ins`` (the rest are ``outs``); None for another op."""
    if not op.name.startswith("linalg.") or "operandSegmentSizes" not in op.attributes:
        return None
    return ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]


def _tied_init(value: ir.Value) -> ir.Value | None:
    """The tensor a destination-style result was computed in, or None."""
    op = defining_op(value)
    if op is None:
        return None
    if op.name in ("tensor.insert", "tensor.insert_slice", "vector.transfer_write"):
        return op.operands[1]
    index = list(op.results).index(value)
    if op.name == "scf.for":
        return op.operands[FOR_FIRST_INIT + index]
    if op.name == "scf.forall":
        return op.operands[len(op.operands) - len(op.results) + index]
    inputs = linalg_input_count(op)
    if inputs is not None:
        return op.operands[inputs + index]
    return None


def computed_in(value: ir.Value, target: ir.Value) -> bool:
    """Whether ``value`` is ``target`` updated through destination-style ops only."""
    for _ in range(1000):
        if value == target:
            return True
        init = _tied_init(value)
        if init is None:
            return False
        value = init
    return False


def store_full(value: ir.Value, into: ir.Value, before: ir.Operation) -> ir.Value:
    """``tensor.insert_slice`` of all of ``value`` into ``into`` (same static type)."""
    type_ = into.type
    with ir.InsertionPoint(before), before.location:
        store = ir.Operation.create(
            "tensor.insert_slice",
            results=[type_],
            operands=[value, into],
            attributes={
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 0, 0, 0]),
                "static_offsets": ir.DenseI64ArrayAttr.get([0] * type_.rank),
                "static_sizes": ir.DenseI64ArrayAttr.get(list(type_.shape)),
                "static_strides": ir.DenseI64ArrayAttr.get([1] * type_.rank),
            },
        )
    return store.result
