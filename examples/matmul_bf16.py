"""Mixed-precision matmul: bfloat16 operands, float32 accumulation via ``hl.dot(a, b, acc=acc)``.

The result is rounded once to bfloat16 at the store, so it matches ``(a.float() @ b.float())``
cast to bfloat16 up to bfloat16 rounding.
Exercises: ``dot`` with an ``acc`` argument and bfloat16 operands (the ref-mode path needs
``aten::mm.dtype``), a float32 ``hl.zeros`` accumulator, ``convert_element_type`` at the store.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 32]))
def matmul_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    size_m, size_k = a.size()
    size_n = b.size(1)
    out = torch.empty([size_m, size_n], dtype=torch.bfloat16, device=a.device)
    for tile_m, tile_n in hl.tile([size_m, size_n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(size_k):
            acc = hl.dot(a[tile_m, tile_k], b[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = acc.to(torch.bfloat16)
    return out


KERNEL = matmul_bf16
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 64, 32), "ragged": (37, 70, 29)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_m, size_k, size_n = SHAPES[shape]
    gen = torch.Generator().manual_seed(15)
    dtype = dtype or torch.bfloat16
    a = torch.randn(size_m, size_k, generator=gen).to(dtype)
    b = torch.randn(size_k, size_n, generator=gen).to(dtype)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(torch.bfloat16)


def main() -> None:
    from _common import run_example

    run_example("matmul_bf16", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
