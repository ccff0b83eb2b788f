"""Bias + tanh-GELU + clamp + residual, with every constant defined at module level.

``GELU_C``, ``GELU_A`` and ``RESIDUAL_SCALE`` are module globals; Helion turns each into a
symbol of the device IR whose origin is the kernel's module (``_source_module.GELU_C``).
helion_mlir reads them when it emits the kernel and writes them as constants; a compiled
kernel checks at each call that they still have those values. ``OUT_ACT`` is a module-level
callable made by a factory (its closure holds the clamp limit), called inside the kernel.
Exercises: module-level floats in device code, a module-level callable with a closure,
``torch.tanh``, ``torch.clamp``, broadcasting a bias row.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import helion
import helion.language as hl
import torch

GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715
RESIDUAL_SCALE = 0.5


def make_clamp(limit: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def clamp(h: torch.Tensor) -> torch.Tensor:
        return torch.clamp(h, -limit, limit)

    return clamp


OUT_ACT = make_clamp(6.0)


@helion.kernel(config=helion.Config(block_sizes=[16, 64]))
def gelu_module_constants(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r, tile_c in hl.tile([rows, cols]):
        h = x[tile_r, tile_c] + bias[tile_c][None, :]
        g = 0.5 * h * (1.0 + torch.tanh(GELU_C * (h + GELU_A * h * h * h)))
        out[tile_r, tile_c] = OUT_ACT(g) + RESIDUAL_SCALE * residual[tile_r, tile_c]
    return out


KERNEL = gelu_module_constants
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 256), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(49)
    dtype = dtype or torch.float32
    x = (3 * torch.randn(rows, cols, generator=gen)).to(dtype)
    return x, torch.randn(cols, generator=gen).to(dtype), torch.randn(rows, cols, generator=gen).to(dtype)


def reference(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    g = torch.nn.functional.gelu(x + bias, approximate="tanh").clamp(-6.0, 6.0)
    return g + RESIDUAL_SCALE * residual


def main() -> None:
    from _common import run_example

    run_example("gelu_module_constants", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
