"""GPT-2's MLP up-projection: ``gelu(x @ w + bias, approximate="tanh")`` in one kernel.

The K loop accumulates with ``hl.dot(..., acc=acc)``; the epilogue adds a bias row and
applies the tanh form of GELU, which Helion's decomposition table turns into its own
``_gelu_tanh_approx`` op (``approximate`` is keyword-only in ``aten.gelu``).
Exercises: ``hl.dot`` with an accumulator inside a ``_for_loop``, a broadcast bias row,
``_gelu_tanh_approx``, ragged M/N/K.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32, 32]))
def linear_gelu_tanh(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    size_m, size_k = x.size()
    size_n = w.size(1)
    out = torch.empty([size_m, size_n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([size_m, size_n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(size_k):
            acc = hl.dot(x[tile_m, tile_k], w[tile_k, tile_n], acc=acc)
        pre = acc + bias[tile_n][None, :].to(torch.float32)
        out[tile_m, tile_n] = torch.nn.functional.gelu(pre, approximate="tanh").to(out.dtype)
    return out


KERNEL = linear_gelu_tanh
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 64, 64), "ragged": (37, 70, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_m, size_k, size_n = SHAPES[shape]
    gen = torch.Generator().manual_seed(29)
    dtype = dtype or torch.float32
    x = torch.randn(size_m, size_k, generator=gen).to(dtype)
    w = (torch.randn(size_k, size_n, generator=gen) / size_k**0.5).to(dtype)
    bias = torch.randn(size_n, generator=gen).to(dtype)
    return x, w, bias


def reference(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    pre = torch.addmm(bias.float(), x.float(), w.float())
    return torch.nn.functional.gelu(pre, approximate="tanh").to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("linear_gelu_tanh", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
