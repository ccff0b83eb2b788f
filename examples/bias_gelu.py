"""Bias add followed by exact (erf) GELU: ``gelu(x + bias[None, :])``.

Exercises: ``torch.nn.functional.gelu`` inside a kernel, which traces to Helion's
``_gelu_erf`` op (not ATen), a 1-D bias tile broadcast with ``subscript``, bfloat16 in and
out with float32 math.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r, tile_c in hl.tile(x.size()):
        pre = x[tile_r, tile_c].to(torch.float32) + bias[tile_c].to(torch.float32)[None, :]
        out[tile_r, tile_c] = torch.nn.functional.gelu(pre).to(out.dtype)
    return out


KERNEL = bias_gelu
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(41)
    dtype = dtype or torch.bfloat16
    x = torch.randn(rows, cols, generator=gen).to(dtype)
    bias = torch.randn(cols, generator=gen).to(dtype)
    return x, bias


def reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x.float() + bias.float()).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("bias_gelu", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
