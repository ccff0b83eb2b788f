"""``hl.dot(a, b, acc)`` with an accumulator of another float dtype than the inputs and
f32 (bf16 inputs, an f16 accumulator): Helion computes the product on its own, rounds it to
the accumulator's dtype and adds it there (the emitted module added a bf16 product to an f16
accumulator, which does not verify). Numbers vs the same computation in torch."""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch

from helion_mlir import compile_kernel


@helion.kernel(static_shapes=True)
def matmul_into(x: torch.Tensor, y: torch.Tensor, acc_dtype: torch.dtype) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=acc_dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=acc_dtype)
        for tile_k in hl.tile(k):
            acc = hl.dot(x[tile_m, tile_k], y[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = acc
    return out


def _expected(x: torch.Tensor, y: torch.Tensor, acc_dtype: torch.dtype, block_k: int) -> torch.Tensor:
    acc = torch.zeros(x.size(0), y.size(1), dtype=acc_dtype)
    for start in range(0, x.size(1), block_k):
        part = x[:, start:start + block_k].float() @ y[start:start + block_k].float()
        acc = acc + part.to(acc_dtype)
    return acc


@pytest.mark.parametrize("block_sizes", [[16, 16, 16], [8, 16, 32]])
def test_a_dot_of_bf16_tiles_into_an_f16_accumulator_adds_the_rounded_product(block_sizes: list[int]) -> None:
    acc_dtype = torch.float16
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(24, 64, generator=gen).to(torch.bfloat16)
    y = torch.randn(64, 20, generator=gen).to(torch.bfloat16)
    bound = matmul_into.bind((x, y, acc_dtype))
    result = compile_kernel(bound, config=helion.Config(block_sizes=block_sizes))(x, y, acc_dtype)
    assert result.dtype == acc_dtype
    torch.testing.assert_close(result, _expected(x, y, acc_dtype, block_sizes[2]), rtol=1e-2, atol=1e-2)
