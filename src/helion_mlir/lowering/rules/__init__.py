"""Lowering rules, one module per kind of op; importing this package registers them all."""

from . import (
    aten,
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

__all__ = ["aten", "atomics", "control_flow", "matmul", "memory", "reductions", "rolled_reductions", "scalars", "special", "tiles", "views"]
