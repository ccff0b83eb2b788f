"""Atomics return the values they replaced, computed on CPU and compared with torch; an
atomic whose old values nobody reads builds no tile of them; an atomic on a tensor made
inside the loop raises Helion's own error."""

from __future__ import annotations

from pathlib import Path

import helion
import pytest
import torch
from examples_util import load_example
from filecheck_util import run_filecheck

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir import compile_kernel, generate_mlir

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "atomic_kernels.py")
OUTPUT_TYPES = ["linalg-on-tensors", "tosa", "stablehlo"]
N = 37  # not a multiple of the block size (16): the last tile is ragged


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_atomic_add_at_a_tile_returns_the_old_values(output_type: str) -> None:
    acc, x = torch.randn(N), torch.randn(N)
    before = acc.clone()
    old = compile_kernel(KERNELS.add_returning_old.bind((acc, x)), output_type=output_type)(acc, x)
    torch.testing.assert_close(old, before)
    torch.testing.assert_close(acc, before + x)


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_atomic_cas_swaps_only_where_the_expected_value_is_found(output_type: str) -> None:
    acc = torch.arange(N, dtype=torch.int32)
    expected = acc.clone()
    expected[::3] += 100  # these lanes do not match, so they keep their value
    desired = -acc
    before = acc.clone()
    kernel = compile_kernel(KERNELS.cas_returning_old.bind((acc, expected, desired)), output_type=output_type)
    old = kernel(acc, expected, desired)
    torch.testing.assert_close(old, before)
    torch.testing.assert_close(acc, torch.where(before == expected, desired, before))


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_atomic_max_at_tensor_indices_returns_the_old_values(output_type: str) -> None:
    acc = torch.randn(50)
    index = torch.randperm(50)[:N]  # distinct positions: each old value is the initial one
    x = torch.randn(N)
    before = acc.clone()
    kernel = compile_kernel(KERNELS.max_at_indices_returning_old.bind((acc, index, x)), output_type=output_type)
    old = kernel(acc, index, x)
    torch.testing.assert_close(old, before[index])
    expected = before.clone()
    expected[index] = torch.maximum(before[index], x)
    torch.testing.assert_close(acc, expected)


def test_atomic_at_tensor_indices_with_repeats_adds_every_lane() -> None:
    acc = torch.zeros(5)
    index = torch.randint(0, 5, (N,))
    x = torch.randn(N)
    compile_kernel(KERNELS.add_at_indices_ignoring_old.bind((acc, index, x)))(acc, index, x)
    torch.testing.assert_close(acc, torch.zeros(5).index_add_(0, index, x))


def test_old_values_are_carried_only_when_read() -> None:
    args = (torch.zeros(5), torch.zeros(N, dtype=torch.int64), torch.zeros(N))
    ignored = generate_mlir(KERNELS.add_at_indices_ignoring_old.bind(args))
    run_filecheck(ignored, """
        // CHECK-NOT: -> (tensor<5xf32>, tensor<16xf32>)
        // CHECK:     scf.for %{{.*}} iter_args(%{{[^ ]+}} = %{{[^ ]+}}) -> (tensor<5xf32>)
        // CHECK:       scf.for %{{.*}} iter_args(%{{[^ ]+}} = %{{[^ ]+}}) -> (tensor<5xf32>)
        // CHECK:         tensor.insert
        // CHECK-NOT: -> (tensor<5xf32>, tensor<16xf32>)
    """)
    read = generate_mlir(KERNELS.max_at_indices_returning_old.bind((torch.zeros(50), *args[1:])))
    run_filecheck(read, """
        // CHECK: scf.for %{{.*}} iter_args(%{{[^ ]+}} = %{{[^ ]+}}, %{{[^ ]+}} = %{{[^ ]+}}) -> (tensor<50xf32>, tensor<16xf32>)
    """)


def test_an_atomic_on_a_tensor_made_inside_the_loop_raises_helions_error() -> None:
    x = torch.randn(N)
    with pytest.raises(helion.exc.AtomicOnDeviceTensor, match=r"hl\.atomic_max\(\)"):
        compile_kernel(KERNELS.max_into_loop_tensor.bind((x,)))
