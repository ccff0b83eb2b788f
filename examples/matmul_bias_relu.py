"""Linear layer with a fused epilogue: ``relu(x @ w + bias)``.

The K loop accumulates with ``torch.addmm(acc, a, b)``; the epilogue adds a bias row and
clamps with ``torch.relu`` before the store.
Exercises: ``aten.addmm`` inside a ``_for_loop``, a 1-D bias load broadcast by
``bias[tile_n][None, :]`` (``subscript``), ``aten.relu``, ragged M/N/K.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32, 16]))
def matmul_bias_relu(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    size_m, size_k = x.size()
    size_n = w.size(1)
    out = torch.empty([size_m, size_n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([size_m, size_n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(size_k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, tile_n])
        out[tile_m, tile_n] = torch.relu(acc + bias[tile_n][None, :]).to(out.dtype)
    return out


KERNEL = matmul_bias_relu
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 64, 64), "ragged": (37, 70, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_m, size_k, size_n = SHAPES[shape]
    gen = torch.Generator().manual_seed(13)
    dtype = dtype or torch.float32
    x = torch.randn(size_m, size_k, generator=gen).to(dtype)
    w = torch.randn(size_k, size_n, generator=gen).to(dtype)
    bias = torch.randn(size_n, generator=gen).to(dtype)
    return x, w, bias


def reference(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.addmm(bias.float(), x.float(), w.float())).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("matmul_bias_relu", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
