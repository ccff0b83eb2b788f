"""A rolled sum of squares of f16 values accumulated in f32 over tiles of one row becomes a
``vector.contract`` of f16 operands into an f32 scalar, which no lowering of the bundled MLIR
takes ("these ops were not lowered to the LLVM dialect: vector.contract"); the fast pipeline
extends its operands to f32 first (``extend_mixed_dot_products``). Numbers vs torch."""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch

from helion_mlir import compile_kernel


@helion.kernel(static_shapes=True)
def root_mean_square(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.float32, device=x.device)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :].to(torch.float32)
        out[tile] = torch.sqrt(torch.mean(row * row, dim=-1))
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_rolled_sum_of_squares_of_half_precision_rows_matches_torch(dtype: torch.dtype) -> None:
    x = torch.randn(3, 96).to(dtype)
    config = helion.Config(block_sizes=[1], reduction_loops=[16])
    result = compile_kernel(root_mean_square.bind((x,)), config=config)(x)
    torch.testing.assert_close(result, x.float().square().mean(-1).sqrt())
