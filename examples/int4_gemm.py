"""bf16 x int4 GEMM with group scales: int4 weights packed two per int8 byte along K.

Byte ``b[k, n]`` holds weight ``2k`` in its low nibble and ``2k + 1`` in its high nibble;
each group of 32 rows of K has one bf16 scale per column. The kernel unpacks the nibbles
with shifts (arithmetic on int8: ``(b << 4) >> 4`` sign-extends the low nibble), scales them
and multiplies with the even and odd columns of ``a``.
Exercises: int8 shifts (``__lshift__`` / ``__rshift__``), gathers at ``tile.index * 2`` and
``tile.index * 2 + 1``, a scale gather at ``tile.index * 2 // group``, ``torch.matmul`` of
f32 tiles, bf16 output.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 16]))
def int4_gemm(a: torch.Tensor, b_packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    size_m, size_k = a.shape
    size_n = b_packed.size(1)
    group = size_k // scales.size(0)
    out = torch.empty([size_m, size_n], dtype=torch.bfloat16, device=a.device)
    for tile_m, tile_n in hl.tile([size_m, size_n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_kp in hl.tile(size_k // 2):
            packed = b_packed[tile_kp, tile_n]
            low = ((packed << 4) >> 4).to(torch.float32)
            high = (packed >> 4).to(torch.float32)
            scale = scales[tile_kp.index * 2 // group, tile_n].to(torch.float32)
            a_even = a[tile_m, tile_kp.index * 2].to(torch.float32)
            a_odd = a[tile_m, tile_kp.index * 2 + 1].to(torch.float32)
            acc = acc + torch.matmul(a_even, low * scale) + torch.matmul(a_odd, high * scale)
        out[tile_m, tile_n] = acc.to(torch.bfloat16)
    return out


KERNEL = int4_gemm
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 128, 32, 32), "ragged": (19, 96, 27, 32)}  # m, k, n, group


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    size_m, size_k, size_n, group = SHAPES[shape]
    gen = torch.Generator().manual_seed(11)
    a = torch.randn(size_m, size_k, generator=gen).to(dtype or torch.bfloat16)
    weights = torch.randint(-8, 8, (size_k, size_n), generator=gen, dtype=torch.int8)
    packed = (weights[0::2] & 0xF) | (weights[1::2] << 4)
    scales = (torch.rand(size_k // group, size_n, generator=gen) * 0.1 + 0.01).to(torch.bfloat16)
    return a, packed, scales


def reference(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    weights = torch.stack([(packed << 4) >> 4, packed >> 4], dim=1).reshape(-1, packed.size(1)).float()
    group = a.size(1) // scales.size(0)
    return (a.float() @ (weights * scales.float().repeat_interleave(group, 0))).to(torch.bfloat16)


def main() -> None:
    from _common import run_example

    run_example("int4_gemm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
