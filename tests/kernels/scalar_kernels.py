"""Kernels computing with host and grid scalars, for tests/test_host_scalar_arithmetic.py."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(backend="mlir", autotune_effort="none", static_shapes=True)
def roll_rows(x: torch.Tensor, shift: int) -> torch.Tensor:
    """``torch.roll(x, shift, dims=0)``: row ``i`` of the result is row ``(i - shift) % n``."""
    n = x.size(0)
    out = torch.empty_like(x)
    for i in hl.grid(n):
        out[i, :] = x[(i - shift) % n, :]
    return out


@helion.kernel(backend="mlir", autotune_effort="none", static_shapes=True)
def bucket_of_offset(x: torch.Tensor, offset: int, width: int) -> torch.Tensor:
    """Each row tagged with the bucket and position of ``i + offset`` in buckets of ``width``
    (Python's ``//`` and ``%``: floor division, a remainder of the divisor's sign)."""
    out = torch.empty([x.size(0), 2], dtype=torch.int64)
    for i in hl.grid(x.size(0)):
        out[i, 0] = (i + offset) // width
        out[i, 1] = (i + offset) % width
    return out
