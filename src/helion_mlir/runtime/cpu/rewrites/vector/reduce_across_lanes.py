"""A row's partial results are summed by one vector reduction (a tree of shuffles), not a chain.

A split row reduction (:mod:`..tensor.vectorize_tiles`) ends in a ``vector.multi_reduction`` of a
single row of partial results. ``lower-vector-multi-reduction`` with its default
inner-parallel strategy (right for reductions over outer dimensions, which become
elementwise ops across rows) makes that horizontal sum a chain of one dependent scalar op
per lane (64 for an AVX-512 row reduction), while LLVM lowers ``vector.reduction`` as a
tree of shuffles when ``convert-vector-to-llvm`` may reassociate. The pass's
inner-reduction strategy would give ``vector.reduction`` here, but it applies to every
reduction of the function, and turns reductions over outer dimensions into one
horizontal reduction per column. This applies it to single-row reductions only, before
the pass lowers the rest. The order of the additions changes, as between any two
reduction schedules.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import vector

from ..ir_walk import ops_where

__all__ = ["reduce_across_lanes"]


def _reduces_to_one_row(op: ir.Operation) -> bool:
    """A ``vector.multi_reduction`` whose kept dimensions all have size 1."""
    source = ir.VectorType(op.operands[0].type)
    reduced = set(ir.DenseI64ArrayAttr(op.attributes["reduction_dims"]))
    return all(size == 1 for dim, size in enumerate(source.shape) if dim not in reduced)


def reduce_across_lanes(module: ir.Module) -> int:
    """``vector.multi_reduction`` to a single row -> ``vector.reduction``; returns how many."""
    rewritten = 0
    for op in ops_where(module, lambda o: o.name == "vector.multi_reduction" and _reduces_to_one_row(o)):
        source, acc = op.operands[0], op.operands[1]
        source_type = ir.VectorType(source.type)
        element = source_type.element_type
        fastmath = op.attributes["fastmath"] if "fastmath" in op.attributes else None
        with ir.InsertionPoint(op), op.location:
            flat = vector.shape_cast(ir.VectorType.get([math.prod(source_type.shape)], element), source)
            if isinstance(acc.type, ir.VectorType):
                rank = ir.VectorType(acc.type).rank
                start = vector.extract(acc, [], [0] * rank)
                total = vector.reduction(element, op.attributes["kind"], flat, acc=start, fastmath=fastmath)
                result = vector.broadcast(acc.type, total)
            else:
                result = vector.reduction(element, op.attributes["kind"], flat, acc=acc, fastmath=fastmath)
        op.results[0].replace_all_uses_with(result)
        op.erase()
        rewritten += 1
    return rewritten
