"""Small kernels for the function-signature tests of tests/test_lowering_filecheck.py."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16]))
def scaled_update(
    x: torch.Tensor, acc: torch.Tensor, alpha: float, y: torch.Tensor, shift: int, flip: bool
) -> torch.Tensor:
    """Reads ``x`` and ``y``, updates ``acc`` in place, writes a host-allocated ``out``;
    ``flip`` is not used by the device code (it still has a place in the signature)."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        acc[tile] = acc[tile] + alpha * x[tile]
        out[tile] = y[tile] + shift
    return out


def scaled_update_args() -> tuple:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(48, generator=gen)
    acc = torch.randn(48, generator=gen, dtype=torch.float64)
    y = torch.randint(-5, 5, (48,), generator=gen, dtype=torch.int32)
    return x, acc, 0.5, y, 3, True
