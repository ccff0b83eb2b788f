"""Group norm over ``[rows, channels]`` with ``groups`` channel groups and a per-channel affine.

Each row block is reshaped in-kernel to ``[tile, groups, channels // groups]``, normalised per
group, reshaped back and scaled/shifted per channel. ``groups`` and the group size are fixed at
bind time with ``hl.specialize`` (a reshape needs static sizes).
Exercises: ``aten.view`` on device tensors, ``aten.mean.dim`` (lowered with an
``_inductor_lowering_extra`` node), ``aten.sqrt``, ``hl.specialize``, an int and a float scalar
argument. Channel counts stay powers of two (the row block is not padded); "ragged" has a
partial last row tile.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def group_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, groups: int, eps: float
) -> torch.Tensor:
    rows, channels = x.size()
    num_groups = hl.specialize(groups)
    group_size = hl.specialize(channels // groups)
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        vals = x[tile_r, :].reshape([tile_r, num_groups, group_size])
        mean = torch.mean(vals, dim=-1, keepdim=True)
        centered = vals - mean
        var = torch.mean(centered * centered, dim=-1, keepdim=True)
        normed = (centered / torch.sqrt(var + eps)).reshape([tile_r, channels])
        out[tile_r, :] = normed * weight[None, :] + bias[None, :]
    return out


KERNEL = group_norm
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (rows, channels, groups)
SHAPES = {"divisible": (32, 64, 4), "ragged": (37, 32, 2)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, channels, groups = SHAPES[shape]
    gen = torch.Generator().manual_seed(40)
    dtype = dtype or torch.float32
    x = (torch.randn(rows, channels, generator=gen) * 2 + 1).to(dtype)
    weight = torch.randn(channels, generator=gen).to(dtype)
    bias = torch.randn(channels, generator=gen).to(dtype)
    return x, weight, bias, groups, 1e-5


def reference(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, groups: int, eps: float
) -> torch.Tensor:
    return torch.nn.functional.group_norm(x, groups, weight, bias, eps)


def main() -> None:
    from _common import run_example

    run_example("group_norm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
