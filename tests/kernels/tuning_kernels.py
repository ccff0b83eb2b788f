"""Small kernels for tests/test_autotune.py, defined without a config so that calling them
under ``backend="mlir"`` goes through Helion's autotuner.

Each test makes its own kernel from these functions (``helion.kernel(fn, ...)``), so that
settings, configs and the bound-kernel caches are the test's own; the kernel source, which
the on-disk cache keys on, is the same in every process.
"""

from __future__ import annotations

import helion.language as hl
import torch
from helion.autotuner import EnumFragment

def repeated_copy(x: torch.Tensor) -> torch.Tensor:
    """``x * 2``, written ``repeats`` times over: the tunable ``repeats`` changes the work
    (64x) and not the result, so exactly one choice is clearly faster."""
    (n,) = x.size()
    repeats = hl.register_tunable("repeats", EnumFragment(choices=(64, 1)))  # the default does the work 64 times
    out = torch.empty_like(x)
    for _tile_r, tile_n in hl.tile([repeats, n], block_size=[1, None]):
        out[tile_n] = x[tile_n] * 2.0
    return out


def scaled_copy(x: torch.Tensor) -> torch.Tensor:
    """``x * scale`` for the tunable ``scale``: a config with another scale than the default
    computes another result, which Helion's accuracy check must reject."""
    (n,) = x.size()
    scale = hl.register_tunable("scale", EnumFragment(choices=(1, 3)))  # 1, the default, is right
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n] = x[tile_n] * scale
    return out


def add_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` over a 2-D grid: a plain kernel with only block sizes to tune."""
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(out.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + y[tile_m, tile_n]
    return out


def add_in_place(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x += y`` in place: timing it must not let the updates compound."""
    for tile_m, tile_n in hl.tile(x.size()):
        x[tile_m, tile_n] = x[tile_m, tile_n] + y[tile_m, tile_n]
    return x
