"""Lowering rules, one module per kind of op; importing this package registers them all."""

from .. import aten_calls, memory_access  # noqa: F401  (their rules register with them)
from . import (
    aten_rewrites,
    atomics,
    control_flow,
    dtype_casts,
    extrema,
    helper_ops,
    matmul,
    quantized,
    reductions,
    rng,
    rolled_reductions,
    scalars,
    tiles,
    views,
)

__all__ = [
    "aten_rewrites", "atomics", "control_flow", "dtype_casts", "extrema", "helper_ops", "matmul",
    "quantized", "reductions", "rng", "rolled_reductions", "scalars", "tiles", "views",
]
