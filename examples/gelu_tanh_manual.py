"""GELU with the tanh approximation written out, as GPT-2-style kernels do, on bfloat16.

``0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x**3)))``: four float literals,
each rounded to the compute type and printed with the fewest digits that read back exactly.
Exercises: float literals in tensor slots next to bfloat16 tiles (float32 compute type),
``aten.tanh``, ``aten.mul`` chains, ragged 2-D tiles.
"""

from __future__ import annotations

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[32, 64]))
def gelu_tanh_manual(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        v = x[tile_m, tile_n].to(torch.float32)
        inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        out[tile_m, tile_n] = (0.5 * v * (1.0 + torch.tanh(inner))).to(out.dtype)
    return out


KERNEL = gelu_tanh_manual
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (128, 256), "ragged": (45, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(53)
    return ((3 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.bfloat16),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x.float(), approximate="tanh").to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("gelu_tanh_manual", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
