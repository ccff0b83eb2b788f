"""Fit the polynomial coefficients of runtime/cpu/rewrites/vector/polynomial_math.py (erf, sin, cos).

Each is a weighted minimax fit (Lawson's iteratively reweighted least squares on 4000
Chebyshev points, exact values from mpmath at 50 digits), then rounded to float32; prints
the coefficients (highest degree first, as polynomial_math.py lists them) and the largest
weighted error of the float32 coefficients evaluated in float64. The weights are what the
final result's error in float32 ulps depends on:

- erf on [0, ERF_SPLIT]: erf(x) = x + x * P(x^2), P fits erf(x) / x - 1; an error e in P is
  a relative error x * e / erf(x) in erf(x).
- erf on [ERF_SPLIT, 4]: erf(x) = 1 - exp(R(x - ERF_CENTER) - x^2), R fits log(erfc(x)) + x^2;
  an error e in R is an error erfc(x) * e in erf(x) (whose ulp is 2^-24 there).
- sin on [-pi/4, pi/4] (a little more: the reduced argument may pass pi/4 by rounding):
  sin(r) = r + r^3 * S(r^2), relative error of the result.
- cos likewise: cos(r) = 1 + r^2 * C(r^2) with C's constant term -1/2 exact, the rest
  fitting (cos(r) - 1 + r^2 / 2) / r^4 (cos is near 1 there). The two are evaluated as one
  polynomial with coefficients chosen per lane, so S and C have the same degree.
"""

from __future__ import annotations

import mpmath
import numpy as np

mpmath.mp.dps = 50

ERF_SPLIT = 0.75
ERF_CENTER = 2.375
QUARTER = float(mpmath.pi / 4) * 1.001


def _chebyshev(lo: float, hi: float, n: int = 4000) -> np.ndarray:
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n)


def _fit(basis: np.ndarray, target: np.ndarray, weight: np.ndarray, rounds: int = 60) -> np.ndarray:
    """Coefficients c minimizing max |weight * (basis @ c - target)| (Lawson's algorithm)."""
    lawson = np.full(len(target), 1.0 / len(target))
    for _ in range(rounds):
        scale = np.sqrt(lawson) * weight
        c, *_ = np.linalg.lstsq(basis * scale[:, None], target * scale, rcond=None)
        error = np.abs(weight * (basis @ c - target))
        lawson = lawson * error
        lawson /= lawson.sum()
    return c


def _as_float32(c: np.ndarray) -> np.ndarray:
    return c.astype(np.float32).astype(np.float64)


def _fitted(variable: np.ndarray, degree: int, target: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, float]:
    """float32 coefficients (highest degree first) of the polynomial in ``variable`` fitting
    ``target`` with ``weight``, and its largest weighted error."""
    basis = np.stack([variable**k for k in range(degree + 1)], axis=1)
    c = _as_float32(_fit(basis, target, weight))
    return c[::-1], float(np.max(np.abs(weight * (basis @ c - target))))


def fit_erf_small(degree: int) -> tuple[np.ndarray, float]:
    x = _chebyshev(1e-6, ERF_SPLIT)
    erf = np.array([float(mpmath.erf(v)) for v in x])
    target = np.array([float(mpmath.erf(v) / v - 1) for v in x])
    return _fitted(x * x, degree, target, x / erf * 2.0**24)  # relative error of erf(x), in ulps


def fit_erf_large(degree: int) -> tuple[np.ndarray, float]:
    x = _chebyshev(ERF_SPLIT, 4.0)
    erfc = np.array([float(mpmath.erfc(v)) for v in x])
    target = np.array([float(mpmath.log(mpmath.erfc(v)) + mpmath.mpf(v) ** 2) for v in x])
    return _fitted(x - ERF_CENTER, degree, target, erfc * 2.0**24)  # in ulps of erf (near 1)


def fit_sin(degree: int) -> tuple[np.ndarray, float]:
    r = _chebyshev(1e-6, QUARTER)
    sin = np.array([float(mpmath.sin(v)) for v in r])
    return _fitted(r * r, degree, (sin - r) / r**3, r**3 / sin * 2.0**24)  # in ulps of sin(r)


def fit_cos(degree: int) -> tuple[np.ndarray, float]:
    r = _chebyshev(1e-6, QUARTER)
    u = r * r
    cos = np.array([float(mpmath.cos(v)) for v in r])
    coefficients, error = _fitted(u, degree, (cos - 1 + u / 2) / u**2, u**2 / cos * 2.0**24)  # in ulps of cos(r)
    return np.append(coefficients, -0.5), error


def main() -> None:
    for name, fit, degree in (("ERF_SMALL", fit_erf_small, 5), ("ERF_LARGE", fit_erf_large, 8),
                              ("SIN", fit_sin, 3), ("COS", fit_cos, 2)):
        coefficients, error = fit(degree)
        listed = ", ".join(f"{np.float32(c)!r}".removeprefix("np.float32(").removesuffix(")") for c in coefficients)
        print(f"{name} = ({listed})  # {error:.3g}")


if __name__ == "__main__":
    main()
