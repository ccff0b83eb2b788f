"""Branches that carry values: an ``if`` whose branches assign variables becomes an ``scf.if``
with one result per merged variable; a branch that leaves a variable alone yields its value
from before the ``if``; an ``if`` carrying a tensor of dynamic shape becomes loops of zero or
one iterations. Structure is pinned with FileCheck, numbers on CPU against torch, with
the branch conditions varied at run time (one compiled kernel, many inputs)."""

from __future__ import annotations

import functools
import re
import string
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from examples_util import load_example, load_example_by_name
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir import CompiledKernel, compile_kernel, generate_mlir
from helion_mlir.runtime.iree.engine import iree_available

SSA = "[A-Za-z0-9_#]+"


def filecheck(text: str, patterns: str) -> None:
    run_filecheck(text, string.Template(patterns).substitute(V=SSA))


@functools.cache
def emit(name: str, shape: str = "divisible") -> str:
    module = load_example_by_name(name)
    return generate_mlir(module.KERNEL.bind(module.make_args(shape)))


@functools.cache
def compiled(name: str, static_shapes: bool = True) -> CompiledKernel:
    module = load_example_by_name(name)
    kernel = module.KERNEL if static_shapes else helion.kernel(
        module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False)
    return compile_kernel(kernel.bind(module.make_args("ragged")))


def test_if_in_a_loop_yields_the_reassigned_carried_values_and_passes_them_through_otherwise() -> None:
    # causal_attention_skip: `if tile_n.begin < tile_m.end:` reassigns m_i, l_i and acc.
    filecheck(emit("causal_attention_skip"), """
        // CHECK-LABEL: func.func @causal_attention_skip(
        // CHECK:       scf.for %{{$V}} = {{.*}} -> (tensor<2x64x32xf32>)
        // CHECK:       scf.for %[[IVM:$V]] = {{.*}} -> (tensor<2x64x32xf32>)
        // CHECK:         %{{$V}}:3 = scf.for %[[IVN:$V]] = {{.*}} iter_args(%[[M:$V]] = %{{$V}}, %[[L:$V]] = %{{$V}}, %[[ACC:$V]] = %{{$V}}) -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>)
        // CHECK:           %[[END:$V]] = arith.addi %[[IVM]], %{{$V}} : index
        // CHECK-NEXT:      %[[COND:$V]] = arith.cmpi slt, %[[IVN]], %[[END]] : index
        // CHECK-NEXT:      %[[IF:$V]]:3 = scf.if %[[COND]] -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>) {
        // CHECK:             scf.yield %{{$V}}, %{{$V}}, %{{$V}} : tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>
        // CHECK-NEXT:      } else {
        // CHECK-NEXT:        scf.yield %[[M]], %[[L]], %[[ACC]] : tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>
        // CHECK-NEXT:      }
        // CHECK-NEXT:      scf.yield %[[IF]]#0, %[[IF]]#1, %[[IF]]#2 :
    """)


def test_variable_reassigned_in_one_branch_merges_with_its_value_before_the_if() -> None:
    # scaled_activation: `y` comes from an if/elif/else, then `if alpha > 0.0: y = y * alpha`.
    filecheck(emit("scaled_activation"), """
        // CHECK-LABEL: func.func @scaled_activation(
        // CHECK:       %[[Y:$V]] = scf.if %{{$V}} -> (tensor<16x32xf32>) {
        // CHECK:       } else {
        // CHECK:         %[[ELIF:$V]] = scf.if %{{$V}} -> (tensor<16x32xf32>) {
        // CHECK:         scf.yield %[[ELIF]] : tensor<16x32xf32>
        // CHECK-NEXT:  }
        // CHECK:       %[[POS:$V]] = arith.cmpf ogt, %alpha, %{{$V}} : f64
        // CHECK-NEXT:  %[[SCALED:$V]] = scf.if %[[POS]] -> (tensor<16x32xf32>) {
        // CHECK:         arith.truncf %alpha : f64 to f32
        // CHECK:       } else {
        // CHECK-NEXT:    scf.yield %[[Y]] : tensor<16x32xf32>
        // CHECK-NEXT:  }
        // CHECK-NEXT:  tensor.insert_slice %[[SCALED]] into
    """)


def test_value_defined_in_both_branches_is_the_if_result_stored_after_it() -> None:
    # jagged_mean: `mean` is the row loop's average in one branch and zeros in the other.
    filecheck(emit("jagged_mean"), """
        // CHECK-LABEL: func.func @jagged_mean(
        // CHECK:       %[[MEAN:$V]] = scf.if %{{$V}} -> (tensor<32xf32>) {
        // CHECK:         %[[SUM:$V]] = scf.for {{.*}} -> (tensor<32xf32>)
        // CHECK:         %[[AVG:$V]] = linalg.generic {{.*}} ins(%[[SUM]], %{{$V}} : tensor<32xf32>, tensor<f32>)
        // CHECK:           arith.divf
        // CHECK:         scf.yield %[[AVG]] : tensor<32xf32>
        // CHECK-NEXT:  } else {
        // CHECK:         %[[ZEROS:$V]] = linalg.fill
        // CHECK-NEXT:    scf.yield %[[ZEROS]] : tensor<32xf32>
        // CHECK-NEXT:  }
        // CHECK-NEXT:  tensor.insert_slice %[[MEAN]] into
    """)


def test_variables_both_branches_only_copy_are_selects_not_an_scf_if() -> None:
    # kth_smallest: `if count >= k: hi = mid` / `else: lo = mid` inside a while loop. (A
    # linalg.generic, not a tensor arith.select: torch-mlir's backend contract refuses those,
    # and its canonicalizer makes them of such an scf.if, so raw output would not run.)
    filecheck(emit("kth_smallest"), """
        // CHECK-LABEL: func.func @kth_smallest(
        // CHECK-NOT:   scf.if
        // CHECK:       scf.while (%[[STEP:$V]] = %{{$V}}, %[[LO:$V]] = %{{$V}}, %[[HI:$V]] = %{{$V}})
        // CHECK:       } do {
        // CHECK-NEXT:  ^bb0(%{{$V}}: tensor<i32>, %[[LO2:$V]]: tensor<f32>, %[[HI2:$V]]: tensor<f32>):
        // CHECK:         %[[TAKE:$V]] = tensor.extract %{{$V}}[] : tensor<i1>
        // CHECK-NEXT:    %[[EMPTY:$V]] = tensor.empty() : tensor<f32>
        // CHECK-NEXT:    %[[NEWHI:$V]] = linalg.generic {{.*}} ins(%[[MID:$V]], %[[HI2]] : tensor<f32>, tensor<f32>)
        // CHECK:           arith.select %[[TAKE]], %{{$V}}, %{{$V}} : f32
        // CHECK:         %[[NEWLO:$V]] = linalg.generic {{.*}} ins(%[[LO2]], %[[MID]] : tensor<f32>, tensor<f32>)
        // CHECK:           arith.select %[[TAKE]], %{{$V}}, %{{$V}} : f32
        // CHECK:         scf.yield %{{$V}}, %[[NEWLO]], %[[NEWHI]] : tensor<i32>, tensor<f32>, tensor<f32>
        // CHECK-NOT:   scf.if
    """)


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("alpha", [0.5, -1.0])
def test_branches_on_runtime_scalars_take_the_path_the_scalars_choose(mode: int, alpha: float) -> None:
    module = load_example_by_name("scaled_activation")
    x, bias, _mode, _alpha = module.make_args("ragged")
    got = compiled("scaled_activation")(x, bias, mode, alpha)
    torch.testing.assert_close(got, module.reference(x, bias, mode, alpha), **module.TOLERANCE)


@settings(max_examples=25)
@given(routes=st.lists(st.integers(0, 2), min_size=3, max_size=3), seed=st.integers(0, 2**16))
def test_routed_accumulators_match_torch_for_any_routing(routes: list[int], seed: int) -> None:
    module = load_example_by_name("routed_accumulate")
    x, _routes, route_block = module.make_args("ragged")
    x = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
    route_tensor = torch.tensor(routes, dtype=torch.int32)
    got = compiled("routed_accumulate")(x, route_tensor, route_block)
    assert_all_close(got, module.reference(x, route_tensor, route_block), module.TOLERANCE)


@settings(max_examples=25)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=8), features=st.integers(1, 70))
def test_jagged_mean_matches_torch_for_any_segment_lengths(lengths: list[int], features: int) -> None:
    module = load_example_by_name("jagged_mean")
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), dim=0)
    values = torch.randn(int(offsets[-1]), features, generator=torch.Generator().manual_seed(len(lengths)))
    got = compiled("jagged_mean", static_shapes=False)(values, offsets)
    torch.testing.assert_close(got, module.reference(values, offsets), **module.TOLERANCE)


def assert_all_close(got: Any, expected: Any, tolerance: dict[str, float]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, **tolerance)


# -- branches carrying dynamically shaped tensors -------------------------------------------
# An `if` whose results include a tensor of dynamic shape runs each working side in an
# scf.for of zero or one iterations: compilers that follow sizes through loops but not
# branches (IREE) know the sizes then.

PORTABILITY = load_example(Path(__file__).resolve().parent / "kernels" / "portability_kernels.py")


def _groups(lengths: list[int], k: int = 24, n: int = 20, seed: int = 0) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), dim=0)
    return torch.randn(int(offsets[-1]), k, generator=gen), torch.randn(k, n, generator=gen), offsets


def test_if_without_else_carrying_a_dynamic_tensor_is_a_loop_of_zero_or_one_iterations() -> None:
    # grouped_matmul_skipping_empty: `if count != 0:` around the tile loops of a group.
    text = generate_mlir(PORTABILITY.grouped_matmul_skipping_empty.bind(_groups([5, 0, 9])))
    filecheck(text, """
        // CHECK-LABEL: func.func @grouped_matmul_skipping_empty(
        // CHECK:         %[[NE:$V]] = tensor.extract %{{$V}}[] : tensor<i1>
        // CHECK-NEXT:    %[[TRIPS:$V]] = arith.index_castui %[[NE]] : i1 to index
        // CHECK:         %[[SIZED:$V]] = tensor.reshape %{{$V}}(%{{$V}})
        // CHECK-NEXT:    %{{$V}} = scf.for %{{$V}} = %{{$V}} to %[[TRIPS]] step %{{$V}} iter_args(%{{$V}} = %[[SIZED]]) -> (tensor<?x?xf32>)
        // CHECK-NOT:     scf.if {{.*}}tensor<?
    """)


def test_if_and_else_storing_into_a_dynamic_tensor_are_two_loops_one_of_which_runs() -> None:
    # row_branch with dynamic sizes: relu stores where mode == 0, sigmoid stores otherwise.
    module = load_example_by_name("row_branch")
    kernel = helion.kernel(module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False)
    filecheck(generate_mlir(kernel.bind(module.make_args("ragged"))), """
        // CHECK:       %[[EQ:$V]] = tensor.extract %{{$V}}[] : tensor<i1>
        // CHECK-NEXT:  %[[THEN:$V]] = arith.index_castui %[[EQ]] : i1 to index
        // CHECK:       %[[FIRST:$V]] = scf.for %{{$V}} = %{{$V}} to %[[THEN]] step
        // CHECK:         arith.cmpf olt
        // CHECK:       %[[NOT:$V]] = arith.xori %[[EQ]], %{{$V}} : i1
        // CHECK-NEXT:  %[[ELSE:$V]] = arith.index_castui %[[NOT]] : i1 to index
        // CHECK:       tensor.reshape %[[FIRST]](
        // CHECK-NEXT:  scf.for %{{$V}} = %{{$V}} to %[[ELSE]] step
        // CHECK:         math.exp
        // CHECK-NOT:   scf.if
    """)


def test_if_carrying_only_static_tensors_stays_an_scf_if() -> None:
    module = load_example_by_name("row_branch")
    assert "scf.if" in generate_mlir(module.KERNEL.bind(module.make_args("ragged")))


@settings(max_examples=5)
@given(lengths=st.lists(st.integers(0, 20), min_size=1, max_size=5), seed=st.integers(0, 2**16))
def test_skipped_empty_groups_match_torch_for_any_group_sizes(lengths: list[int], seed: int) -> None:
    a, b, offsets = _groups(lengths, seed=seed)
    got = _grouped()(a, b, offsets)
    torch.testing.assert_close(got, PORTABILITY.grouped_matmul_reference(a, b, offsets), rtol=1e-4, atol=1e-4)


@functools.cache
def _grouped() -> CompiledKernel:
    return compile_kernel(PORTABILITY.grouped_matmul_skipping_empty.bind(_groups([5, 0, 9])))


@pytest.mark.iree
@pytest.mark.skipif(not iree_available(), reason="IREE is not installed (pip install -e '.[test]')")
def test_skipped_empty_groups_compile_and_run_in_iree() -> None:
    # Before: `'tensor.dim' op unexpected during shape cleanup` at the scf.if result (stablehlo
    # alike: the examples' dynamic-shape tests in test_examples_iree.py run all output types).
    a, b, offsets = _groups([7, 0, 12, 3])
    compiled = compile_kernel(PORTABILITY.grouped_matmul_skipping_empty.bind((a, b, offsets)), runtime="iree")
    torch.testing.assert_close(compiled(a, b, offsets), PORTABILITY.grouped_matmul_reference(a, b, offsets),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("options", [{"pipeline": "fast"},
                                     pytest.param({"runtime": "iree"}, marks=[pytest.mark.iree, pytest.mark.skipif(
                                         not iree_available(), reason="IREE is not installed")])],
                         ids=["fast", "iree"])
def test_both_sides_storing_and_computing_a_kept_value_match_torch_as_loops(options: dict[str, str]) -> None:
    # signed_rows: both sides store into the dynamic output and compute `kept`; the first
    # loop starts from a zero tile for it, which the side that runs replaces.
    gen = torch.Generator().manual_seed(4)
    x, flip = torch.randn(7, 37, generator=gen), torch.randint(0, 2, (7,), generator=gen, dtype=torch.int32)
    text = generate_mlir(PORTABILITY.signed_rows.bind((x, flip)))
    # no scf.if yields a dynamically sized tensor (an out-of-range guard of a static one may)
    assert not re.search(r"scf\.if .*tensor<\?", text) and text.count("iter_args") >= 4
    compiled = compile_kernel(PORTABILITY.signed_rows.bind((x, flip)), **options)
    for flags in (flip, 1 - flip, torch.zeros_like(flip), torch.ones_like(flip)):
        got = compiled(x, flags)
        for g, e in zip(got, PORTABILITY.signed_rows_reference(x, flags)):
            torch.testing.assert_close(g, e)
