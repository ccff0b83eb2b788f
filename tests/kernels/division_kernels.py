"""Integer divisions and remainders whose divisor may be zero, for tests/test_integer_division.py.

A zero divisor (or ``INT_MIN / -1``) makes x86's ``idiv`` trap; here each gives the value
docs/abi.md documents ("Integer division by zero"), which :func:`expected` computes in torch.
The lines checked mode names end in a comment saying what they divide.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

TILES = helion.Config(block_sizes=[16])


@helion.kernel(config=TILES)
def by_tensor(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.new_empty(5, a.size(0))
    for t in hl.tile(a.size(0)):
        x, d = a[t], b[t]
        out[0, t] = x // d  # divides the lanes of a tile
        out[1, t] = x % d
        out[2, t] = torch.remainder(x, d)
        out[3, t] = torch.div(x, d, rounding_mode="trunc")
        out[4, t] = torch.fmod(x, d)
    return out


@helion.kernel(config=TILES)
def by_scalar(a: torch.Tensor, k: int) -> torch.Tensor:
    out = a.new_empty(2, a.size(0))
    for t in hl.tile(a.size(0)):
        out[0, t] = a[t] // k  # divides the lanes of a tile by a scalar
        out[1, t] = a[t] % k
    return out


@helion.kernel(config=helion.Config(block_sizes=[]))
def grid_by_scalar(x: torch.Tensor, k: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for i in hl.grid(x.size(0)):
        out[i] = x[i] + i // k  # divides a device scalar
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 16]), static_shapes=False)
def rows_by_columns(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for tile_m, tile_n in hl.tile(a.size()):
        out[tile_m, tile_n] = a[tile_m, tile_n] % b[tile_n]  # divides the lanes of two ragged tiles
    return out


def expected(x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """What ``by_tensor`` computes: torch's values where ``d`` is not zero, else docs/abi.md's
    (a division -1, rounded down as the division rounds; a remainder the dividend). Torch's
    own division by -1 is not used: ``torch.div(INT_MIN, -1, rounding_mode="trunc")`` traps;
    ``-x`` is what torch's floor division gives there."""
    zero, minus_one = d == 0, d == -1
    safe = torch.where(zero | minus_one, torch.ones_like(d), d)
    floor_by_zero = torch.where(x < 0, -2, -1).to(x.dtype)
    division = torch.where(minus_one, -x, torch.where(zero, -1, x // safe))
    return torch.stack([
        torch.where(zero, floor_by_zero, division),
        torch.where(zero, x, x % safe),
        torch.where(zero, x, torch.remainder(x, safe)),
        torch.where(minus_one, -x, torch.where(zero, -1, torch.div(x, safe, rounding_mode="trunc"))),
        torch.where(zero, x, torch.fmod(x, safe)),
    ])
