"""Unsigned integer tensors (uint16, uint32, uint64): signless integers of their width in
MLIR, read unsigned where the sign matters (comparisons, conversions). uint64 tensors
(``data_ptr()`` lists) are loaded and stored as they are; ops torch-mlir cannot import for a
dtype are refused naming the node."""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch

from helion_mlir import compile_kernel
from helion_mlir.errors import UnsupportedNodeError


@helion.kernel(config=helion.Config(block_sizes=[4]))
def larger_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        a, b = x[tile], y[tile]
        out[tile] = torch.where(a > b, a, b)
    return out


@helion.kernel(config=helion.Config(block_sizes=[4]))
def as_double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float64, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile].to(torch.float64)
    return out


@helion.kernel(config=helion.Config(block_sizes=[4]))
def reversed_copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.size(0)
    for tile in hl.tile(n):
        out[tile] = x[n - 1 - tile.index]
    return out


def _values_past_the_signed_range(dtype: torch.dtype) -> torch.Tensor:
    top = torch.iinfo(dtype).max
    return torch.tensor([0, 1, top, top - 5, 7, 2 ** 31, 3], dtype=dtype)


def test_uint32_comparisons_and_conversions_read_values_past_2_to_the_31_unsigned() -> None:
    x = _values_past_the_signed_range(torch.uint32)
    y = torch.tensor([1, 0, 5, 2 ** 32 - 1, 7, 1, 2 ** 31 + 1], dtype=torch.uint32)
    result = compile_kernel(larger_of.bind((x, y)))(x, y)
    assert result.dtype == torch.uint32
    assert result.tolist() == [max(a, b) for a, b in zip(x.tolist(), y.tolist())]
    assert compile_kernel(as_double.bind((x,)))(x).tolist() == [float(v) for v in x.tolist()]


def test_uint64_addresses_are_loaded_and_stored_bit_for_bit() -> None:
    x = torch.tensor([t.data_ptr() for t in (torch.zeros(1), torch.zeros(2))] + [2 ** 63 + 5, 2 ** 64 - 1, 0],
                     dtype=torch.uint64)
    result = compile_kernel(reversed_copy.bind((x,)))(x)
    assert result.dtype == torch.uint64
    assert result.tolist() == x.tolist()[::-1]


def test_a_uint64_comparison_torch_mlir_cannot_import_is_refused_naming_the_node() -> None:
    x = _values_past_the_signed_range(torch.uint64)
    with pytest.raises(UnsupportedNodeError, match=r"node 'gt'.*test_unsigned_dtypes.py"):
        compile_kernel(larger_of.bind((x, x)))
