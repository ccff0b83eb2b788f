"""Lowering rules, one module per kind of op; importing this package registers them all."""

from . import (
    aten_ops,
    aten_rewrites,
    atomics,
    control_flow,
    division_checks,
    dtype_casts,
    extrema,
    helper_ops,
    load_store,
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
    "aten_ops", "aten_rewrites", "atomics", "control_flow", "division_checks", "dtype_casts", "extrema", "helper_ops",
    "load_store", "matmul", "quantized", "reductions", "rng", "rolled_reductions", "scalars", "tiles", "views",
]
