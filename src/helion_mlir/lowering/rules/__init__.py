"""Lowering rules, one module per kind of op; importing this package registers them all."""

from . import (
    aten,
    aten_rewrites,
    atomics,
    control_flow,
    matmul,
    memory,
    reductions,
    rolled_reductions,
    scalars,
    special,
    tiles,
    views,
)

__all__ = [
    "aten", "aten_rewrites", "atomics", "control_flow", "matmul", "memory", "reductions", "rolled_reductions",
    "scalars", "special", "tiles", "views",
]
