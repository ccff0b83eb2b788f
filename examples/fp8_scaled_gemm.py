"""fp8 GEMM with per-row and per-column scales: ``(a @ b) * scale_a[:, None] * scale_b[None, :]``.

float8_e4m3fn operands, ``hl.dot`` accumulating in float32 (products of two e4m3 values are
exact in f32), bf16 output.
Exercises: ``dot`` on float8 tiles (``linalg.matmul`` extends them to the f32 accumulator),
per-row / per-column scale vectors broadcast with ``None`` indexing, ``convert_element_type``
to bf16.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 32]))
def fp8_scaled_gemm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    size_m, size_k = a.size()
    size_n = b.size(1)
    out = torch.empty([size_m, size_n], dtype=torch.bfloat16, device=a.device)
    for tile_m, tile_n in hl.tile([size_m, size_n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(size_k):
            acc = hl.dot(a[tile_m, tile_k], b[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = (acc * scale_a[tile_m, None] * scale_b[None, tile_n]).to(torch.bfloat16)
    return out


KERNEL = fp8_scaled_gemm
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 128, 48), "ragged": (37, 70, 29)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_m, size_k, size_n = SHAPES[shape]
    gen = torch.Generator().manual_seed(5)
    dtype = dtype or torch.float8_e4m3fn
    a = (torch.randn(size_m, size_k, generator=gen) * 4).to(dtype)
    b = (torch.randn(size_k, size_n, generator=gen) * 4).to(dtype)
    scale_a = torch.rand(size_m, generator=gen) / 16 + 0.01
    scale_b = torch.rand(size_n, generator=gen) / 16 + 0.01
    return a, b, scale_a, scale_b


def reference(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    return ((a.float() @ b.float()) * scale_a[:, None] * scale_b[None, :]).to(torch.bfloat16)


def main() -> None:
    from _common import run_example

    run_example("fp8_scaled_gemm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
