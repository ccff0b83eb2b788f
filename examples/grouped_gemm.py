"""MoE grouped GEMM: the rows ``offsets[e]:offsets[e+1]`` of the expert-sorted activations
are multiplied by expert e's weight ``w[e]``; some experts get no rows.

One program per expert (``hl.grid``); the row loop ``hl.tile(start, end)`` takes its bounds
from ``offsets``, and ``torch.addmm`` accumulates over K.
Exercises: ``aten.addmm`` on tiles of a data-dependent row range (ragged at both ends), a
3-D weight indexed by a scalar program id, ``_for_loop`` bounds loaded from a tensor.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 16]))
def grouped_gemm(a: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    rows, k = a.shape
    experts, _, n = w.shape
    out = torch.zeros([rows, n], dtype=a.dtype, device=a.device)
    for e in hl.grid(experts):
        start = offsets[e]
        end = offsets[e + 1]
        for tile_m in hl.tile(start, end):
            for tile_n in hl.tile(n):
                acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
                for tile_k in hl.tile(k):
                    acc = torch.addmm(acc, a[tile_m, tile_k], w[e, tile_k, tile_n])
                out[tile_m, tile_n] = acc.to(out.dtype)
    return out


KERNEL = grouped_gemm
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (rows per expert, k, n)
SHAPES = {"divisible": ([16, 32, 0, 16], 32, 48), "ragged": ([7, 0, 21, 3, 12], 40, 36)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    lengths, k, n = SHAPES[shape]
    gen = torch.Generator().manual_seed(41)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), dim=0)
    a = torch.randn(int(offsets[-1]), k, generator=gen).to(dtype or torch.float32)
    w = torch.randn(len(lengths), k, n, generator=gen).to(dtype or torch.float32)
    return a, w, offsets


def reference(a: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    bounds = offsets.tolist()
    return torch.cat([a[s:e] @ w[i] for i, (s, e) in enumerate(zip(bounds[:-1], bounds[1:]))], dim=0)


def main() -> None:
    from _common import run_example

    run_example("grouped_gemm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
