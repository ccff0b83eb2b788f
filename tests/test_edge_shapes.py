"""Edge shapes and views: reductions over zero elements return what torch returns (or are
refused where torch raises), a written tensor whose elements share memory is refused with an
``ArgumentError`` before anything runs, and a view whose contiguous copy would exceed the copy
limit is refused instead of allocated."""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch

from helion_mlir import compile_kernel
from helion_mlir.errors import ArgumentError, HelionMLIRError, UnsupportedNodeError
from helion_mlir.runtime.params import COPY_LIMIT_VARIABLE


@helion.kernel(config=helion.Config(block_sizes=[4]))
def row_sum_and_mean(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    total = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    mean = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        total[tile] = x[tile, :].sum(-1)
        mean[tile] = x[tile, :].mean(-1)
    return total, mean


@helion.kernel(config=helion.Config(block_sizes=[4]))
def row_max(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.amax(x[tile, :], dim=-1)
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def add_one_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + 1.0
    return out


@pytest.mark.parametrize(("output_type", "pipeline"), [
    ("linalg-on-tensors", "fast"), ("linalg-on-tensors", "plain"), ("raw", "fast"), ("raw", "plain"),
])
def test_a_sum_over_zero_columns_is_zero_and_a_mean_nan_as_in_torch(output_type: str, pipeline: str) -> None:
    # The loads of an empty row were slices MLIR refuses (offset 0 of a dimension of size 0),
    # and the fast pipeline's vectorizer crashed the process on a reduction over it.
    x = torch.randn(10, 0)
    total, mean = compile_kernel(row_sum_and_mean.bind((x,)), output_type=output_type, pipeline=pipeline)(x)
    torch.testing.assert_close(total, x.sum(-1))
    torch.testing.assert_close(mean, x.mean(-1), equal_nan=True)


@pytest.mark.parametrize("output_type", ["tosa", "stablehlo"])
def test_a_sum_over_zero_columns_in_tosa_and_stablehlo_is_refused_with_a_typed_error(output_type: str) -> None:
    # torch-mlir's tosa backend cannot legalize a reduction over an empty dimension; its
    # stablehlo backend keeps a stablehlo.reduce the bundled MLIR cannot lower.
    x = torch.randn(10, 0)
    with pytest.raises(HelionMLIRError, match="sum|stablehlo.reduce"):
        compile_kernel(row_sum_and_mean.bind((x,)), output_type=output_type)


def test_a_maximum_over_zero_columns_is_refused_naming_the_node_as_torch_raises() -> None:
    x = torch.randn(10, 0)
    with pytest.raises(IndexError):
        torch.amax(x, dim=-1)
    with pytest.raises(UnsupportedNodeError, match=r"amax over dimension 1, which has no elements") as raised:
        compile_kernel(row_max.bind((x,)))
    assert "test_edge_shapes.py" in str(raised.value)


@pytest.mark.parametrize("pipeline", ["fast", "plain"])
def test_an_expanded_view_the_kernel_writes_is_refused_with_an_argument_error(pipeline: str) -> None:
    x = torch.randn(8, 16)
    compiled = compile_kernel(add_one_into.bind((x, torch.empty(8, 16))), pipeline=pipeline)
    out = torch.zeros(1, 16).expand(8, 16)
    with pytest.raises(ArgumentError, match=r"argument 'out' of add_one_into: the kernel writes it, but several"):
        compiled(x, out)
    assert torch.equal(out, torch.zeros(8, 16))  # nothing ran
    fresh = torch.empty(8, 16)
    compiled(x, fresh)
    assert torch.equal(fresh, x + 1)


def test_a_view_whose_copy_exceeds_the_limit_is_refused_instead_of_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = helion.kernel(row_sum_and_mean.fn, config=helion.Config(block_sizes=[4]), static_shapes=False)
    compiled = compile_kernel(kernel.bind((torch.randn(8, 64),)))
    huge = torch.zeros(8, 1).expand(8, 2**31 + 8)  # 32 bytes; a copy would take 64 GiB
    with pytest.raises(ArgumentError, match=rf"argument 'x' of row_sum_and_mean: .* {COPY_LIMIT_VARIABLE}"):
        compiled(huge)
    small = torch.randn(8, 1).expand(8, 300)  # a copy of 9600 bytes
    monkeypatch.setenv(COPY_LIMIT_VARIABLE, "9599")
    with pytest.raises(ArgumentError, match="would take 9600 bytes, more than the 9599 allowed"):
        compiled(small)
    monkeypatch.setenv(COPY_LIMIT_VARIABLE, "9600")
    total, _ = compiled(small)
    torch.testing.assert_close(total, small.sum(-1))


@helion.kernel(config=helion.Config(block_sizes=[2]))
def scaled_rows_and_zero_width_scratch(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scaled = torch.empty_like(x)
    scratch_out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        scaled[tile, :] = x[tile, :] * 2.0
        scratch_out[tile, :] = hl.zeros([tile, x.size(1)], dtype=x.dtype)
    return scaled, scratch_out


def test_stores_of_zero_width_rows_leave_the_empty_outputs_as_torch_does() -> None:
    # Stores of a [tile, 0] value were tensor.insert_slice ops of an empty slice, which MLIR
    # refuses ("offset 1 is out-of-bounds: 0").
    x = torch.randn(5, 0)
    scaled, scratch = compile_kernel(scaled_rows_and_zero_width_scratch.bind((x,)))(x)
    torch.testing.assert_close(scaled, x * 2.0)
    torch.testing.assert_close(scratch, torch.zeros_like(x))
