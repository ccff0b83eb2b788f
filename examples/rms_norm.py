"""RMS norm: ``x * rsqrt(mean(x**2) + eps) * weight`` over the last dimension.

Exercises: ``aten.mean.dim`` on a persistent row block, ``aten.rsqrt``, ``aten.pow``-free
squaring via ``mul``, a weight vector loaded with a whole-dimension slice (``weight[:]``),
and a float scalar argument.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16]))
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r in hl.tile(x.size(0)):
        row = x[tile_r, :].to(torch.float32)
        inv_rms = torch.rsqrt(torch.mean(row * row, dim=-1, keepdim=True) + eps)
        out[tile_r, :] = (row * inv_rms * weight[:].to(torch.float32)).to(out.dtype)
    return out


KERNEL = rms_norm
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(9)
    dtype = dtype or torch.float32
    x = torch.randn(rows, cols, generator=gen).to(dtype)
    weight = (1 + 0.1 * torch.randn(cols, generator=gen)).to(dtype)
    return x, weight, 1e-6


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    out = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return out.to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("rms_norm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
