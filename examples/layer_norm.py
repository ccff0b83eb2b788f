"""Layer norm over the last dimension with weight, bias and a float ``eps`` argument.

Exercises: a persistent row reduction (``x[tile, :]``), ``aten.mean``-style sums divided by
the row length, ``aten.rsqrt``, a scalar float kernel argument (``_get_symnode('zuf0')``),
1-D weight/bias loads broadcast against the row block, float32 math on bfloat16 inputs.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :].to(torch.float32)
        mean = torch.sum(row, dim=-1, keepdim=True) / cols
        centered = row - mean
        var = torch.sum(centered * centered, dim=-1, keepdim=True) / cols
        normed = centered * torch.rsqrt(var + eps)
        scaled = normed * weight[:].to(torch.float32) + bias[:].to(torch.float32)
        out[tile_r, :] = scaled.to(out.dtype)
    return out


KERNEL = layer_norm
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(8)
    dtype = dtype or torch.bfloat16
    x = (torch.randn(rows, cols, generator=gen) * 2 + 0.5).to(dtype)
    weight = torch.randn(cols, generator=gen).to(dtype)
    bias = torch.randn(cols, generator=gen).to(dtype)
    return x, weight, bias, 1e-5


def reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> torch.Tensor:
    out = torch.nn.functional.layer_norm(
        x.float(), [x.size(-1)], weight.float(), bias.float(), eps
    )
    return out.to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("layer_norm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
