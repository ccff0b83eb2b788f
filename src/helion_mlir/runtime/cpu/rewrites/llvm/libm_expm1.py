"""Scalar ``math.expm1`` as calls of libm's ``expm1f`` / ``expm1``, in both CPU pipelines.

``convert-math-to-llvm`` lowers ``math.expm1`` as ``exp(x) - 1``, which returns 0 for
|x| < 6e-8 (where expm1 is x) and loses relative accuracy below about 0.1: the reason
expm1 exists. Upstream has no option to keep it (``approximate-log1p=false`` does so for
``log1p`` only; the pipelines set it), so the ops left when the pass runs are replaced by
the calls ``convert-math-to-libm`` would make. Vector ``expm1`` in the fast pipeline is a
polynomial by then (:mod:`..vector.vector_math`); a vector left over gets one call per lane.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import func, ub, vector

from ..ir_build import declare_pure_function, flattened
from ..ir_walk import ops_where

__all__ = ["call_libm_for_expm1"]


def call_libm_for_expm1(module: ir.Module) -> int:
    """Every ``math.expm1`` of f32 or f64 (scalar or vector, one call per lane) -> libm's
    ``expm1f`` / ``expm1``; returns how many ops were replaced."""
    names = {32: "expm1f", 64: "expm1"}

    def element(op: ir.Operation) -> ir.Type:
        type_ = op.results[0].type
        return type_.element_type if isinstance(type_, ir.VectorType) else type_

    found = ops_where(module, lambda op: op.name == "math.expm1" and isinstance(element(op), (ir.F32Type, ir.F64Type)))
    for op in found:
        scalar = element(op)
        name = names[scalar.width]
        declare_pure_function(module, name, [scalar], scalar)
        callee = ir.FlatSymbolRefAttr.get(name)
        type_ = op.results[0].type
        with ir.InsertionPoint(op), op.location:
            if not isinstance(type_, ir.VectorType):
                value = func.call([scalar], callee, [op.operands[0]])
            else:
                total = math.prod(type_.shape)
                flat = flattened(op.operands[0], total)
                value = ub.poison(flat.type)
                for lane in range(total):
                    called = func.call([scalar], callee, [vector.extract(flat, [], [lane])])
                    value = vector.insert(called, value, [], [lane])
                value = value if value.type == type_ else vector.shape_cast(type_, value)
        op.results[0].replace_all_uses_with(value)
        op.erase()
    return len(found)
