"""Residual add + layer norm as a transformer block writes it: ``torch.var_mean`` of the sum.

The statistics are those of the float32 sum of two bfloat16 tensors, and the kernel returns
the normalized sum and the sum itself (the next block's residual).
Exercises: ``aten.var_mean.correction`` (a two-result reduction, ``correction=0``,
``keepdim=True``) computed in float32 like torch, never in float64; a persistent row
reduction feeding two stores.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def residual_layer_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = x.size()
    out = torch.empty_like(x)
    summed = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        h = x[tile_r, :].to(torch.float32) + residual[tile_r, :].to(torch.float32)
        var, mean = torch.var_mean(h, dim=-1, keepdim=True, correction=0)
        normed = (h - mean) * torch.rsqrt(var + eps)
        out[tile_r, :] = (normed * weight[None, :].to(torch.float32) + bias[None, :].to(torch.float32)).to(x.dtype)
        summed[tile_r, :] = h.to(x.dtype)
    return out, summed


KERNEL = residual_layer_norm
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(41)
    dtype = dtype or torch.bfloat16
    x = (torch.randn(rows, cols, generator=gen) * 2 + 0.5).to(dtype)
    residual = torch.randn(rows, cols, generator=gen).to(dtype)
    weight = (1 + 0.1 * torch.randn(cols, generator=gen)).to(dtype)
    bias = torch.randn(cols, generator=gen).to(dtype)
    return x, residual, weight, bias


def reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor]:
    h = x.float() + residual.float()
    out = torch.nn.functional.layer_norm(h, [x.size(-1)], weight.float(), bias.float(), eps)
    return out.to(x.dtype), h.to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("residual_layer_norm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
