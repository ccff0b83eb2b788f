"""A cheap elementwise op with several consumers is computed again in each of them.

``linalg-fuse-elementwise-ops`` fuses a producer into a consumer only when that consumer
is its only user (the pass has no option to do otherwise; the C++ control function that
would allow it is not reachable from Python). A layer norm's ``x - mean`` feeds both the
variance and the output: as one op it is written to a row-block buffer and read back
twice; copied into each consumer first, fusion computes it from ``x`` in registers (one
subtraction per element again, against a store and two loads).
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import iterator_types, ops_where

__all__ = ["recompute_cheap_elementwise"]


#: Payload ops cheap enough to compute again in every consumer rather than store.
_CHEAP_PAYLOAD = ("arith.addf", "arith.subf", "arith.mulf", "arith.negf", "arith.maximumf", "arith.minimumf",
                  "arith.extf", "arith.truncf", "linalg.yield")


def _cheap_elementwise(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.regions[0].blocks) != 1:
        return False
    if any(iterator != "parallel" for iterator in iterator_types(op)):
        return False
    payload = [o.operation.name for o in op.regions[0].blocks[0].operations]
    return len(payload) <= 3 and all(name in _CHEAP_PAYLOAD for name in payload)


def recompute_cheap_elementwise(module: ir.Module) -> int:
    """Give each further consumer of a cheap elementwise ``linalg.generic`` a copy of its own.

    Cheap: at most two of additions, subtractions, multiplications, negations, min/max and
    float conversions. Returns how many copies were made.
    """
    copies = 0
    for op in ops_where(module, _cheap_elementwise):
        consumers: list[ir.Operation] = []
        for use in op.results[0].uses:
            if use.owner.name != "linalg.generic" or use.owner.parent != op.parent:
                break  # a copy inside a loop would be computed on every iteration
            if use.owner not in consumers:
                consumers.append(use.owner)
        else:
            for consumer in consumers[1:]:
                copy = op.clone(ir.InsertionPoint(consumer))
                for index, operand in enumerate(consumer.operands):
                    if operand == op.results[0]:
                        consumer.operands[index] = copy.results[0]
                copies += 1
    return copies
