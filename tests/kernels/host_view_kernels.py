"""Kernels whose host code rebinds parameters to views before the loops, for
tests/test_host_views.py: the device code reads the views."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

CONFIG = helion.Config(block_sizes=[8, 16])


def _views(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    a = a.transpose(0, 1)
    b = b.reshape(a.size(0), a.size(1))
    c = c[1:, :-2]
    d = d.view(a.size(0), a.size(1))
    bias = bias.expand(a.size(0), -1)
    out = torch.empty_like(b)
    for tile_m, tile_n in hl.tile(out.size()):
        out[tile_m, tile_n] = a[tile_m, tile_n] * 2.0 + b[tile_m, tile_n] - c[tile_m, tile_n] + d[tile_m, tile_n] * bias[tile_m, tile_n]
    return out


views_static = helion.kernel(_views, config=CONFIG)
views_dynamic = helion.kernel(_views, config=CONFIG, static_shapes=False)


@helion.kernel(config=CONFIG)
def shift_into(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Writes through a rebound slice of an in-place argument."""
    out = out[1:, :]
    for tile_m, tile_n in hl.tile(out.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + 1.0
    return out
