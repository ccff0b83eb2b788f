"""Host tensors that share memory: a view of a written tensor with its very layout is the
same value under another name (a read through it sees the stores before it), and a view
with another layout is refused, since the emitted function holds tensors as values."""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch

from helion_mlir import compile_kernel
from helion_mlir.errors import HelionMLIRError


@helion.kernel(config=helion.Config(block_sizes=[2]))
def double_then_swap_halves(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    same = x.view(m, n)
    for tile in hl.tile(m):
        x[tile, :] = x[tile, :] * 2.0
        half = hl.arange(n // 2)
        left = same[tile, half]
        right = same[tile, half + n // 2]
        x[tile, half] = right
        x[tile, half + n // 2] = left
    return x


@helion.kernel(config=helion.Config(block_sizes=[2]))
def add_through_a_transposed_view(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    flipped = x.t()
    for tile in hl.tile(m):
        x[tile, :] = x[tile, :] + flipped[:, tile].t()
    return x


@pytest.mark.parametrize("rows", [5, 8])
def test_a_read_through_an_identical_view_sees_the_stores_before_it(rows: int) -> None:
    x = torch.randn(rows, 16)
    doubled = x * 2.0
    expected = torch.cat([doubled[:, 8:], doubled[:, :8]], dim=-1)
    result = compile_kernel(double_then_swap_halves.bind((x.clone(),)))(x.clone())
    torch.testing.assert_close(result, expected)


def test_a_written_tensor_read_through_a_view_of_another_layout_is_refused() -> None:
    x = torch.randn(4, 4)
    with pytest.raises(HelionMLIRError, match=r"share memory with different layouts"):
        compile_kernel(add_through_a_transposed_view.bind((x,)))
