"""Dot products of narrow floats into a wider accumulator, with their operands extended.

``reduction_to_contract`` and ``fold_arith_extension`` (:mod:`..tensor.vectorize_tiles`) make the
sum of squares of an f16 row accumulated in f32 (a rolled ``mean(x * x)``) one
``vector.contract`` of ``vector<16xf16>`` operands into an ``f32``: a contraction with no
parallel dimension. The bundled MLIR lowers no such mixed-precision dot product (every
``vector-contract-lowering`` leaves it, and the LLVM conversion fails); contractions with
parallel dimensions (matmuls) it lowers as outer products. Extending the operands with
``arith.extf`` first, as the vectorized code read before the fold, gives the same numbers
(products of values exact in the wider type) and a contraction every lowering takes.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith

from ..ir_walk import ops_where

__all__ = ["extend_mixed_dot_products"]


def _element(type_: ir.Type) -> ir.Type:
    return type_.element_type if isinstance(type_, ir.VectorType) else type_


def _float_width(type_: ir.Type) -> int | None:
    return type_.width if isinstance(type_, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type)) else None


def _is_mixed_dot(op: ir.Operation) -> bool:
    if op.name != "vector.contract" or "parallel" in str(op.attributes["iterator_types"]):
        return False
    acc = _float_width(_element(op.operands[2].type))
    widths = [_float_width(_element(v.type)) for v in op.operands[:2]]
    return acc is not None and all(w is not None and w < acc for w in widths)


def extend_mixed_dot_products(module: ir.Module) -> int:
    """Every ``vector.contract`` without parallel dimensions whose float operands are
    narrower than its accumulator gets them ``arith.extf``-ed to the accumulator's type;
    returns how many."""
    found = ops_where(module, _is_mixed_dot)
    for op in found:
        wide = _element(op.operands[2].type)
        with ir.InsertionPoint(op), op.location:
            for position in (0, 1):
                operand = op.operands[position]
                type_ = ir.VectorType.get(ir.VectorType(operand.type).shape, wide)
                op.operands[position] = arith.extf(type_, operand)
    return len(found)
