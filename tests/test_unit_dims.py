"""A tile indexing a host dimension of size 1 reads its one element in every lane.

Helion drops a size-1 dimension's offset (``SubscriptIndexing``): ``grad_out[tile]`` with
``grad_out`` of shape ``[m, 1]`` and a tile over ``[m, n]`` broadcasts ``grad_out[i, 0]``
along the row, as the backward kernel ``helion.experimental.backward`` generates for
``x.sum(-1, keepdim=True)`` does. Lowered as a slice at the tile's offset, that read
past the end of the tensor. With ``static_shapes=False`` the size is decided as Helion's
code generation decides it (a guard on the bound sizes), and a compiled kernel refuses a
call where such a dimension is no longer 1. A write through such a dimension from a tile
of several lanes (every lane writing one element) is refused.
"""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch
from filecheck_util import run_filecheck

from helion_mlir import compile_kernel, generate_mlir
from helion_mlir.errors import ArgumentError, UnsupportedNodeError

CONFIG = helion.Config(block_sizes=[16, 8])


def scale_rows(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.shape):
        out[tile] = g[tile] * x[tile]
    return out


def sum_keepdim_backward(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The backward of ``out[tile_m, :] = x[tile_m, :].sum(-1, keepdim=True)``, as Helion writes it."""
    grad_x = torch.empty_like(x)
    for tile in hl.tile(grad_x.shape):
        grad_x[tile] = grad_out[tile]
    return grad_x


@pytest.mark.parametrize("pipeline", ["fast", "plain"])
@pytest.mark.parametrize("static_shapes", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape", [(37, 20), (64, 32)], ids=["ragged", "divisible"])
def test_a_tile_over_a_dim_of_size_one_reads_its_element_in_every_lane(
    pipeline: str, static_shapes: bool, shape: tuple[int, int]
) -> None:
    g, x = torch.randn(shape[0], 1), torch.randn(*shape)
    kernel = helion.kernel(scale_rows, config=CONFIG, static_shapes=static_shapes)
    compiled = compile_kernel(kernel.bind((g, x)), pipeline=pipeline)
    torch.testing.assert_close(compiled(g, x), g * x, rtol=0, atol=0)


@pytest.mark.parametrize("pipeline", ["fast", "plain"])
def test_the_backward_of_a_sum_with_keepdim_broadcasts_the_gradient(pipeline: str) -> None:
    grad_out, x = torch.randn(64, 1), torch.randn(64, 32)
    kernel = helion.kernel(sum_keepdim_backward, config=CONFIG)
    got = compile_kernel(kernel.bind((grad_out, x)), pipeline=pipeline)(grad_out, x)
    assert torch.equal(got, grad_out.expand(64, 32))


def test_a_load_through_a_dim_of_size_one_reads_offset_zero_and_broadcasts() -> None:
    g, x = torch.randn(37, 1), torch.randn(37, 20)
    text = generate_mlir(helion.kernel(scale_rows, config=CONFIG).bind((g, x)))
    run_filecheck(text, """
        // CHECK: scf.for %[[ROW:[^ ]+]] =
        // CHECK: scf.for
        // CHECK: %[[ONE:.*]] = tensor.extract_slice %g[%[[ROW]], 0] [%[[ROWS:[^,]+]], 1] [1, 1] : tensor<37x1xf32> to tensor<?x1xf32>
        // CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>]
        // CHECK-SAME: ins(%[[ONE]] : tensor<?x1xf32>)
    """)


def test_a_dynamic_kernel_compiled_at_size_one_refuses_a_wider_dim_unless_its_tile_is_one_lane() -> None:
    kernel = helion.kernel(scale_rows, config=CONFIG, static_shapes=False)
    compiled = compile_kernel(kernel.bind((torch.randn(37, 1), torch.randn(37, 20))))
    g, x = torch.randn(30, 1), torch.randn(30, 7)
    torch.testing.assert_close(compiled(g, x), g * x, rtol=0, atol=0)
    with pytest.raises(ArgumentError, match=r"argument 'g' of scale_rows had size 1 in dimension 1 .* got shape \(30, 7\)"):
        compiled(torch.randn(30, 7), x)
    g, x = torch.randn(30, 5), torch.randn(30, 1)  # the tile over x's one column is one lane wide
    torch.testing.assert_close(compiled(g, x), g[:, :1] * x, rtol=0, atol=0)


def test_the_backend_compiles_again_when_a_dim_of_size_one_grows() -> None:
    kernel = helion.kernel(scale_rows, config=CONFIG, static_shapes=False, backend="mlir")
    for g, x in ((torch.randn(37, 1), torch.randn(37, 20)), (torch.randn(30, 7), torch.randn(30, 7))):
        torch.testing.assert_close(kernel(g, x), g * x, rtol=0, atol=0)


def _store_through_unit_dim(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), 1], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.shape):
        out[tile] = x[tile]
    return out


def _atomic_add_through_unit_dim(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([x.size(0), 1], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile(x.shape):
        hl.atomic_add(out, [tile_m, tile_n], x[tile_m, tile_n])
    return out


@pytest.mark.parametrize("fn", [_store_through_unit_dim, _atomic_add_through_unit_dim], ids=["store", "atomic_add"])
def test_a_write_through_a_dim_of_size_one_from_a_wide_tile_is_refused(fn) -> None:
    bound = helion.kernel(fn, config=CONFIG).bind((torch.randn(37, 20),))
    with pytest.raises(UnsupportedNodeError, match=r"test_unit_dims.py:\d+: a write through dimension 1 of size 1"):
        generate_mlir(bound)
