"""Residual add, RMS norm and exact GELU fused in one row kernel:
``gelu(rms_norm(x + residual) * weight)``, the front half of a transformer MLP block.

Exercises: two row loads added before the reduction, ``aten.mean.dim`` + ``aten.rsqrt`` on
a persistent row block, ``torch.nn.functional.gelu`` (Helion's ``_gelu_erf``) on the
normalized row, a float scalar argument.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16]))
def add_rms_norm_gelu(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r in hl.tile(x.size(0)):
        h = x[tile_r, :].to(torch.float32) + residual[tile_r, :].to(torch.float32)
        inv_rms = torch.rsqrt(torch.mean(h * h, dim=-1, keepdim=True) + eps)
        normed = h * inv_rms * weight[:].to(torch.float32)
        out[tile_r, :] = torch.nn.functional.gelu(normed).to(out.dtype)
    return out


KERNEL = add_rms_norm_gelu
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(43)
    dtype = dtype or torch.float32
    x = torch.randn(rows, cols, generator=gen).to(dtype)
    residual = torch.randn(rows, cols, generator=gen).to(dtype)
    weight = (1 + 0.1 * torch.randn(cols, generator=gen)).to(dtype)
    return x, residual, weight, 1e-6


def reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    h = x.float() + residual.float()
    normed = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return torch.nn.functional.gelu(normed).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("add_rms_norm_gelu", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
