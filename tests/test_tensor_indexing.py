"""Loads, stores and atomics indexed by tensors: gathers and scatters whose value has dynamic
dims (``static_shapes=False``), scatter masks that broadcast over the value, and whole-dim
loads of dims Helion specialized. Structure is pinned with FileCheck, numbers on CPU against
torch (one compiled kernel, many inputs: dynamic shapes need no recompilation)."""

from __future__ import annotations

import functools
import string
from pathlib import Path

import helion
import torch
from examples_util import load_example, load_example_by_name
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir import CompiledKernel, compile_kernel, generate_mlir

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "indexing_kernels.py")
SSA = "[A-Za-z0-9_#]+"


def filecheck(text: str, patterns: str) -> None:
    run_filecheck(text, string.Template(patterns).substitute(V=SSA))


def _gather_args() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(37, 12), torch.randint(0, 37, (29,))


@functools.cache
def compiled(name: str) -> CompiledKernel:
    args = {
        "gather_rows": _gather_args,
        "add_rows_at": lambda: (torch.zeros(5, 12), torch.randint(0, 5, (37,)), torch.randn(37, 12)),
        "masked_flat_scatter": lambda: (torch.randn(37, 12), torch.randperm(37), torch.rand(37) < 0.5),
    }[name]()
    return compile_kernel(getattr(KERNELS, name).bind(args))


def test_gather_of_whole_dynamic_rows_makes_a_tile_sized_by_the_host_dim() -> None:
    filecheck(generate_mlir(KERNELS.gather_rows.bind(_gather_args())), """
        // CHECK-LABEL: func.func @gather_rows(%x: tensor<?x?xf32>, %index: tensor<?xi64>, %out: tensor<?x?xf32>)
        // CHECK:       %[[ONE:$V]] = arith.constant 1 : index
        // CHECK-NEXT:  %[[WIDTH:$V]] = tensor.dim %x, %[[ONE]] : tensor<?x?xf32>
        // CHECK:       scf.for
        // CHECK:         %[[INIT:$V]] = tensor.empty(%[[WIDTH]]) : tensor<16x?xf32>
        // CHECK-NEXT:    %[[ROWS:$V]] = linalg.generic {{.*}} ins(%{{$V}} : tensor<16xi64>) outs(%[[INIT]] : tensor<16x?xf32>)
        // CHECK:           tensor.extract %x[%{{$V}}, %{{$V}}] : tensor<?x?xf32>
        // CHECK:         } -> tensor<16x?xf32>
        // CHECK:         tensor.extract_slice %[[ROWS]][0, 0] [%{{$V}}, %[[WIDTH]]] [1, 1] : tensor<16x?xf32> to tensor<?x?xf32>
    """)


@settings(max_examples=20)
@given(rows=st.integers(1, 50), width=st.integers(1, 40), count=st.integers(1, 45), seed=st.integers(0, 2**16))
def test_gathered_rows_match_torch_for_any_shape(rows: int, width: int, count: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    x, index = torch.randn(rows, width, generator=gen), torch.randint(0, rows, (count,), generator=gen)
    torch.testing.assert_close(compiled("gather_rows")(x, index), x[index], rtol=0, atol=0)


@settings(max_examples=20)
@given(targets=st.integers(1, 6), count=st.integers(1, 45), width=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_rows_added_at_repeated_indices_all_accumulate(targets: int, count: int, width: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    index, x = torch.randint(0, targets, (count,), generator=gen), torch.randn(count, width, generator=gen)
    got = compiled("add_rows_at")(torch.zeros(targets, width), index, x)
    torch.testing.assert_close(got, torch.zeros(targets, width).index_add_(0, index, x), rtol=1e-5, atol=1e-5)


def test_scatter_mask_is_broadcast_to_the_value_before_the_lane_loops() -> None:
    x, rows, keep = torch.randn(37, 12), torch.randperm(37), torch.rand(37) < 0.5
    filecheck(generate_mlir(KERNELS.masked_flat_scatter.bind((x, rows, keep))), """
        // CHECK-LABEL: func.func @masked_flat_scatter(
        // CHECK:       %[[COLUMN:$V]] = tensor.expand_shape %{{$V}} {{.*}} into tensor<16x1xi1>
        // CHECK:       %[[MASK:$V]] = linalg.generic {{.*}} ins(%[[COLUMN]] : tensor<16x1xi1>) outs(%{{$V}} : tensor<16x12xi1>)
        // CHECK:       scf.for %[[ROW:$V]] =
        // CHECK:         scf.for %[[COL:$V]] =
        // CHECK:           tensor.extract %[[MASK]][%[[ROW]], %[[COL]]] : tensor<16x12xi1>
        // CHECK:           arith.select
        // CHECK:           tensor.insert
    """)


@settings(max_examples=20)
@given(seed=st.integers(0, 2**16))
def test_masked_scatter_writes_exactly_the_kept_rows(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    x, rows, keep = torch.randn(37, 12, generator=gen), torch.randperm(37, generator=gen), torch.rand(37, generator=gen) < 0.5
    expected = torch.zeros_like(x)
    expected[rows[keep]] = x[keep]
    torch.testing.assert_close(compiled("masked_flat_scatter")(x, rows, keep), expected, rtol=0, atol=0)


def test_whole_dim_loads_of_a_specialized_dim_stay_static_with_dynamic_shapes() -> None:
    # attention_backward specializes the head dim (16); q itself has dynamic dims.
    module = load_example_by_name("attention_backward")
    kernel = helion.kernel(module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False)
    filecheck(generate_mlir(kernel.bind(module.make_args("ragged"))), """
        // CHECK-LABEL: func.func @attention_backward(%q: tensor<?x?x?xf32>,
        // CHECK:       tensor.extract_slice %q[%{{$V}}, %{{$V}}, 0] [1, %{{$V}}, 16] [1, 1, 1] : tensor<?x?x?xf32> to tensor<1x?x16xf32>
    """)
