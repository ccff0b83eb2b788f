"""Top-level ``hl.grid`` loops with a step, for tests/test_grid_steps.py: a constant step,
a step per dimension, and a step the caller passes (a per-call value of the compiled
kernel)."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(backend="mlir", autotune_effort="none")
def every_other_doubled(x: torch.Tensor) -> torch.Tensor:
    """Elements 1, 3, 5, ... below ``n - 1`` doubled, the rest left zero."""
    out = torch.zeros_like(x)
    for i in hl.grid(1, x.size(0) - 1, 2):
        out[i] = x[i] * 2
    return out


@helion.kernel(backend="mlir", autotune_effort="none")
def strided_cells_negated(x: torch.Tensor) -> torch.Tensor:
    """Every second row's every third column negated (steps per dimension)."""
    m, n = x.size()
    out = torch.zeros_like(x)
    for i, j in hl.grid([0, 0], [m, n], [2, 3]):
        out[i, j] = -x[i, j]
    return out


@helion.kernel(backend="mlir", autotune_effort="none")
def every_kth_plus_one(x: torch.Tensor, k: int) -> torch.Tensor:
    """Elements 0, k, 2k, ... plus one: the step is the caller's."""
    out = torch.zeros_like(x)
    for i in hl.grid(x.size(0), step=k):
        out[i] = x[i] + 1
    return out


@helion.kernel(backend="mlir", autotune_effort="none")
def negative_step(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for i in hl.grid(x.size(0) - 1, 0, -2):
        out[i] = x[i]
    return out
