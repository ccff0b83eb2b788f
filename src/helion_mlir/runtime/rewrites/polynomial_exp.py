"""``exp`` and ``exp2`` of f32 as polynomials in arith ops, so that they vectorize.

The bundled MLIR lowers ``math.exp`` to ``llvm.exp``, which the JIT (no vector math
library) turns into one ``expf`` call per lane: a softmax over a vectorized row would
leave the vector units for every element. torch eager uses vectorized polynomials too.

The rewrite runs on the scalar payload of linalg ops, before vectorization, so the same
arith ops become vector ops of whatever width the tile gets. Method (Cephes ``expf``):
``x = n ln2 + r`` with ``n = roundeven(x log2 e)`` and ``|r| <= ln2 / 2`` (``ln2`` split in
two parts so that ``r`` is exact), ``e^r`` by a degree-7 polynomial in Horner form with
``fma``, and ``2^n`` built from exponent bits in two halves so that results in the
subnormal range stay exact. ``exp2`` takes ``n = roundeven(x)`` and ``r = (x - n) ln2``.
Arguments below the underflow point give 0, above the overflow point ``+inf``, NaN stays
NaN. Measured against float64: at most 2 ulp over the f32 range (see the tests).

``math.powf(2.0, x)`` is how torch-mlir lowers ``torch.exp2``; it is rewritten as ``exp2``.

Upstream has the same kind of approximation (the math dialect's
``populateMathPolynomialApproximationPatterns``), but the bundled MLIR exposes it through
no pass and no transform op.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith
from torch_mlir.dialects import math as mmath

from .ir_walk import defining_op, ops_where

__all__ = ["expand_exponentials"]

_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375  # ln 2 = _LN2_HI + _LN2_LO; _LN2_HI has 9 significant bits, so n * _LN2_HI is exact
_LN2_LO = -2.12194440e-4
# Minimax coefficients of (e^r - 1 - r) / r^2 on [-ln2/2, ln2/2], highest degree first.
_POLYNOMIAL = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)


class _Builder:
    """Constants and integer views for one f32 scalar or vector type."""

    def __init__(self, float_type: ir.Type) -> None:
        self.float = float_type
        i32 = ir.IntegerType.get_signless(32)
        self.vector = isinstance(float_type, ir.VectorType)
        self.int = ir.VectorType.get(float_type.shape, i32) if self.vector else i32

    def f(self, value: float) -> ir.Value:
        attr = ir.FloatAttr.get(ir.F32Type.get(), value)
        return arith.constant(self.float, ir.DenseElementsAttr.get_splat(self.float, attr) if self.vector else attr)

    def i(self, value: int) -> ir.Value:
        attr = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), value)
        return arith.constant(self.int, ir.DenseElementsAttr.get_splat(self.int, attr) if self.vector else attr)

    def power_of_two(self, n: ir.Value) -> ir.Value:
        """2^n for integral n in [-126, 127], from the exponent bits."""
        return arith.bitcast(self.float, arith.shli(arith.addi(n, self.i(127)), self.i(23)))


def _scaled_exp(b: _Builder, n: ir.Value, r: ir.Value) -> ir.Value:
    """e^r * 2^n; n integral in [-151, 128]: the scale goes in two halves, each a normal f32."""
    y = b.f(_POLYNOMIAL[0])
    for coefficient in _POLYNOMIAL[1:]:
        y = mmath.fma(y, r, b.f(coefficient))
    y = arith.addf(mmath.fma(y, arith.mulf(r, r), r), b.f(1.0))
    whole = arith.fptosi(b.int, n)
    half = arith.shrsi(whole, b.i(1))
    rest = arith.subi(whole, half)
    return arith.mulf(arith.mulf(y, b.power_of_two(half)), b.power_of_two(rest))


def _edges(b: _Builder, x: ir.Value, value: ir.Value, underflow: float, overflow: float) -> ir.Value:
    """0 below ``underflow``, +inf above ``overflow``, NaN for NaN."""
    value = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, x, b.f(underflow)), b.f(0.0), value)
    value = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, b.f(overflow)), b.f(math.inf), value)
    return arith.select(arith.cmpf(arith.CmpFPredicate.UNO, x, x), x, value)


def _exp(b: _Builder, x: ir.Value) -> ir.Value:
    clamped = arith.minimumf(arith.maximumf(x, b.f(-104.0)), b.f(89.0))
    n = mmath.roundeven(arith.mulf(clamped, b.f(_LOG2E)))
    r = mmath.fma(n, b.f(-_LN2_HI), clamped)
    r = mmath.fma(n, b.f(-_LN2_LO), r)
    return _edges(b, x, _scaled_exp(b, n, r), -104.0, 88.72283935546875)


def _exp2(b: _Builder, x: ir.Value) -> ir.Value:
    clamped = arith.minimumf(arith.maximumf(x, b.f(-151.0)), b.f(129.0))
    n = mmath.roundeven(clamped)
    r = arith.mulf(arith.subf(clamped, n), b.f(math.log(2.0)))  # clamped - n is exact
    return _edges(b, x, _scaled_exp(b, n, r), -151.0, 128.0)


def _is_two(value: ir.Value) -> bool:
    owner = defining_op(value)
    if owner is None or owner.name != "arith.constant":
        return False
    attr = owner.attributes["value"]
    return isinstance(attr, ir.FloatAttr) and attr.value == 2.0


def _f32(type_: ir.Type) -> bool:
    element = type_.element_type if isinstance(type_, ir.VectorType) else type_
    return isinstance(element, ir.F32Type)


def expand_exponentials(module: ir.Module) -> int:
    """Replace every f32 ``math.exp``, ``math.exp2`` and ``math.powf(2.0, x)``; returns how many."""
    def exponential(op: ir.Operation) -> bool:
        if op.name in ("math.exp", "math.exp2") or (op.name == "math.powf" and _is_two(op.operands[0])):
            return _f32(op.results[0].type)
        return False

    found = ops_where(module, exponential)
    for op in found:
        b = _Builder(op.results[0].type)
        with ir.InsertionPoint(op), op.location:
            if op.name == "math.exp":
                value = _exp(b, op.operands[0])
            else:
                value = _exp2(b, op.operands[-1])
        op.results[0].replace_all_uses_with(value)
        op.erase()
    return len(found)
