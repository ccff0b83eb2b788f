"""Llama-style RMS norm with the epsilon written in the kernel: ``rsqrt(mean(x**2) + 1e-6)``.

The literal ``1e-6`` reaches the IR as a float32 constant, spelled ``1.0e-06`` (Python's
``1e-06`` is not an MLIR float literal). Inputs are bfloat16 or float32, math in float32.
Exercises: a float literal in a tensor slot (a 0-d constant tensor), ``aten.mean.dim`` with
``keepdim``, ``aten.rsqrt``, a whole-row weight load.
"""

from __future__ import annotations

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16]))
def rms_norm_eps(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        variance = torch.mean(row * row, dim=-1, keepdim=True)
        normed = row * torch.rsqrt(variance + 1e-6)
        out[tile_m, :] = (normed * weight[:].to(torch.float32)).to(out.dtype)
    return out


KERNEL = rms_norm_eps
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 256), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(51)
    dtype = dtype or torch.float32
    x = torch.randn(rows, cols, generator=gen).to(dtype)
    weight = (1 + 0.1 * torch.randn(cols, generator=gen)).to(dtype)
    return x, weight


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("rms_norm_eps", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
