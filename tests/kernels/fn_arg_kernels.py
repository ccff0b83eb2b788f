"""A kernel that applies the function it is passed to each tile, for
tests/test_fn_arg_globals.py (the functions live in another file, fn_arg_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable

import helion
import helion.language as hl
import torch


@helion.kernel(backend="mlir", config=helion.Config(block_sizes=[16]))
def sine_then(x: torch.Tensor, fn: Callable[[torch.Tensor, object], torch.Tensor]) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = fn(torch.sin(x[tile]), tile)
    return out
