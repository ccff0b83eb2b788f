"""Bias, then an activation chosen by a runtime int (``if``/``elif``/``else``: ReLU, GELU,
SiLU), then an optional scale when a runtime float is positive.

Exercises: ``_if`` on runtime scalar arguments (an int compared for equality, a float compared
with a literal), an ``elif`` (an ``_if`` nested in an else graph), a value assigned in every
branch and used later, a variable reassigned in the then branch only (the else branch is
empty and passes the old value through), ``_gelu_erf``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def scaled_activation(x: torch.Tensor, bias: torch.Tensor, mode: int, alpha: float) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile([m, n]):
        v = x[tile_m, tile_n] + bias[tile_n][None, :]
        if mode == 0:
            y = torch.relu(v)
        elif mode == 1:
            y = torch.nn.functional.gelu(v)
        else:
            y = torch.sigmoid(v) * v
        if alpha > 0.0:
            y = y * alpha
        out[tile_m, tile_n] = y
    return out


KERNEL = scaled_activation
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (64, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    m, n = SHAPES[shape]
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(m, n, generator=gen).to(dtype or torch.float32)
    bias = torch.randn(n, generator=gen).to(dtype or torch.float32)
    return x, bias, 1, 0.5


def reference(x: torch.Tensor, bias: torch.Tensor, mode: int, alpha: float) -> torch.Tensor:
    v = x + bias
    if mode == 0:
        y = torch.relu(v)
    elif mode == 1:
        y = torch.nn.functional.gelu(v)
    else:
        y = torch.sigmoid(v) * v
    return y * alpha if alpha > 0 else y


def main() -> None:
    from _common import run_example

    run_example("scaled_activation", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
