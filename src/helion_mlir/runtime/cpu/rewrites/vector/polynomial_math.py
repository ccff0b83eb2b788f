"""``expm1``, ``erf``, ``sin`` and ``cos`` of f32 as polynomials in arith ops.

Built on vectors by the vector math lowering (:mod:`.vector_math`), with the helpers and
the ``exp`` polynomial of :mod:`.polynomial_exp`. The coefficients are weighted minimax
fits (scripts/fit_math_polynomials.py); measured errors over every f32 are in
docs/cpu-math.md (at most 1.6 ulp).

- ``expm1(x) = 2^n expm1(r) + (2^n - 1)``, one rounding, with ``x = n ln2 + r`` as for
  ``exp``; ``e^x`` once ``n > 24`` (where the 1 no longer shows). Zeros keep their sign.
- ``erf(x) = x + x P(x^2)`` for ``|x| <= 0.75``; above, ``1 - exp(R(|x|) - x^2)`` with
  ``R`` fitting ``log(erfc(x)) + x^2`` on [0.75, 4] (``|x|`` clamped to 4, where ``erf``
  rounds to 1), and the sign of ``x``.
- ``sin``/``cos``: ``|x| = j pi/2 + r`` with ``j`` the nearest integer to ``|x| 2/pi`` and
  ``pi/2`` in three float32 parts taken off with fused multiply-adds (the first exactly),
  ``sin r = r + r^3 S(r^2)`` or ``cos r = 1 + r^2 C(r^2)`` as ``j mod 4`` asks, one
  polynomial per lane (its coefficients selected), signed by ``j mod 4`` (and, for sin,
  the sign of ``x``). That reduction stays within a few ulps up
  to :data:`TRIG_REDUCTION_LIMIT`; larger arguments need more bits of pi (a Payne-Hanek
  reduction), which :mod:`.vector_math` leaves to the library.

Upstream's counterparts (the math dialect's polynomial approximation patterns) are not
exposed by the bundled MLIR; see :mod:`.polynomial_exp`.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith
from torch_mlir.dialects import math as mmath

from .polynomial_exp import EXP_OVERFLOW, LN2_HI, LN2_LO, LOG2E, Builder, exp_minus_one_near_zero

__all__ = ["ERF_SPLIT", "TRIG_REDUCTION_LIMIT", "erf", "expm1", "sin_or_cos"]

# scripts/fit_math_polynomials.py; highest degree first.
ERF_SPLIT = 0.75
_ERF_CENTER = 2.375
_ERF_SMALL = (-0.0006749618, 0.0051143616, -0.026834633, 0.11283377, -0.3761262, 0.12837917)
_ERF_LARGE = (-2.6545329e-06, -3.6057587e-05, 5.1749746e-05, -0.00050877646, 0.0024496517, -0.011997434,
              0.060395002, -0.3672333, -1.5118319)
_SIN = (2.7180465e-06, -0.00019839304, 0.008333329, -0.16666667)
_COS = (2.4432413e-05, -0.001388731, 0.041666646, -0.5)
_TWO_OVER_PI = 0.6366197723675814
# pi/2 = _PIO2_1 + _PIO2_2 + _PIO2_3 + 1.1e-23; each the float32 nearest to what is left.
_PIO2_1, _PIO2_2, _PIO2_3 = 1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15
#: Largest |x| whose sin and cos the polynomials compute: measured over every f32, the
#: error stays below 1.6 ulp up to 2^19 and passes 2 ulp above 2^21.
TRIG_REDUCTION_LIMIT = 524288.0
_SIGN_BIT = -(1 << 31)


def _exp_of_negative(b: Builder, a: ir.Value) -> ir.Value:
    """e^a for a in [-80, 0] (no overflow, no subnormal result; NaN gives NaN)."""
    n, whole = b.rounded(arith.mulf(a, b.f(LOG2E)))
    r = mmath.fma(n, b.f(-LN2_HI), a)
    r = mmath.fma(n, b.f(-LN2_LO), r)
    return arith.mulf(arith.addf(exp_minus_one_near_zero(b, r), b.f(1.0)), b.power_of_two(whole))


def expm1(b: Builder, x: ir.Value) -> ir.Value:
    """e^x - 1, every f32: ``2^n expm1(r) + (2^n - 1)`` in one rounding up to ``n = 24``,
    ``e^x`` above (where the 1 no longer shows); zeros keep their sign."""
    clamped = arith.minimumf(arith.maximumf(x, b.f(-30.0)), b.f(89.0))
    n, whole = b.rounded(arith.mulf(clamped, b.f(LOG2E)))
    r = mmath.fma(n, b.f(-LN2_HI), clamped)
    r = mmath.fma(n, b.f(-LN2_LO), r)
    near = exp_minus_one_near_zero(b, r)
    scale = b.power_of_two(arith.minsi(whole, b.i(24)))
    small = mmath.fma(near, scale, arith.subf(scale, b.f(1.0)))
    half = arith.shrsi(whole, b.i(1))
    large = arith.mulf(arith.mulf(arith.addf(near, b.f(1.0)), b.power_of_two(half)),
                       b.power_of_two(arith.subi(whole, half)))
    value = arith.select(arith.cmpi(arith.CmpIPredicate.sgt, whole, b.i(24)), large, small)
    value = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, b.f(EXP_OVERFLOW)), b.f(math.inf), value)
    return arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, b.f(0.0)), x, value)


def erf(b: Builder, x: ir.Value) -> ir.Value:
    """erf(x), every f32 (see the module docstring)."""
    magnitude = mmath.absf(x)
    small = mmath.fma(x, b.horner(_ERF_SMALL, arith.mulf(x, x)), x)
    clamped = arith.minimumf(magnitude, b.f(4.0))
    log_erfc = arith.subf(b.horner(_ERF_LARGE, arith.subf(clamped, b.f(_ERF_CENTER))), arith.mulf(clamped, clamped))
    large = mmath.copysign(arith.subf(b.f(1.0), _exp_of_negative(b, log_erfc)), x)
    return arith.select(arith.cmpf(arith.CmpFPredicate.OLE, magnitude, b.f(ERF_SPLIT)), small, large)


def sin_or_cos(b: Builder, x: ir.Value, cosine: bool) -> ir.Value:
    """sin(x) (or cos(x)) for |x| <= TRIG_REDUCTION_LIMIT; NaN for NaN."""
    magnitude = mmath.absf(x)
    j, quadrant = b.rounded(arith.mulf(magnitude, b.f(_TWO_OVER_PI)))
    r = magnitude
    for part in (_PIO2_1, _PIO2_2, _PIO2_3):
        r = mmath.fma(j, b.f(-part), r)
    if cosine:
        quadrant = arith.addi(quadrant, b.i(1))
    odd = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(quadrant, b.i(1)), b.i(0))
    # One polynomial per lane, its coefficients chosen by the lane's quadrant: both
    # polynomials on every lane held too many vectors live for the registers (spills).
    r2 = arith.mulf(r, r)
    p = None
    for sine_c, cosine_c in zip(_SIN, _COS, strict=True):
        coefficient = arith.select(odd, b.f(cosine_c), b.f(sine_c))
        p = coefficient if p is None else mmath.fma(p, r2, coefficient)
    # r + r^3 S(r^2) on even lanes, 1 + r^2 C(r^2) on odd ones
    base = arith.select(odd, b.f(1.0), r)
    value = mmath.fma(arith.mulf(base, r2), p, base)
    sign = arith.shli(arith.andi(quadrant, b.i(2)), b.i(30))
    if not cosine:
        sign = arith.xori(sign, arith.andi(b.bits(x), b.i(_SIGN_BIT)))
    return arith.bitcast(b.float, arith.xori(b.bits(value), sign))
