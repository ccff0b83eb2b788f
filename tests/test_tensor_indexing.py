"""Loads, stores and atomics indexed by tensors: gathers and scatters whose value has dynamic
dims (``static_shapes=False``), scatter masks that broadcast over the value, whole-dim
loads of dims Helion specialized, and ``tile.index + shift`` read as a moved slice. Structure is pinned with FileCheck, numbers on CPU against
torch (one compiled kernel, many inputs: dynamic shapes need no recompilation)."""

from __future__ import annotations

import functools
import string
from pathlib import Path

import helion
import pytest
import torch
from examples_util import load_example, load_example_by_name
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir import CompiledKernel, OutOfBoundsAccessError, compile_kernel, generate_mlir

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
    """The rows read come from the data, so the portable module gathers only when ``x`` has
    rows at all (an index redirected to row 0 of an empty tensor would still lie outside
    it); the value has a dynamic size, so that guard is a loop of one iteration or none,
    which IREE can size (docs/downstream.md)."""
    filecheck(generate_mlir(KERNELS.gather_rows.bind(_gather_args())), """
        // CHECK-LABEL: func.func @gather_rows(%x: tensor<?x?xf32>, %index: tensor<?xi64>, %out: tensor<?x?xf32>)
        // CHECK:       %[[ZERO:$V]] = arith.constant 0 : index
        // CHECK-NEXT:  %[[HEIGHT:$V]] = tensor.dim %x, %[[ZERO]] : tensor<?x?xf32>
        // CHECK-NEXT:  %[[ONE:$V]] = arith.constant 1 : index
        // CHECK-NEXT:  %[[WIDTH:$V]] = tensor.dim %x, %[[ONE]] : tensor<?x?xf32>
        // CHECK:       scf.for
        // CHECK:         %[[ROWS_EXIST:$V]] = arith.cmpi sgt, %[[HEIGHT]], %[[ZERO]] : index
        // CHECK-NEXT:    %[[TRIPS:$V]] = arith.select %[[ROWS_EXIST]], %[[ONE]], %[[ZERO]] : index
        // CHECK:         %[[ROWS:$V]] = scf.for %{{$V}} = %[[ZERO]] to %[[TRIPS]] step %[[ONE]]
        // CHECK:           %[[INIT:$V]] = tensor.empty(%[[WIDTH]]) : tensor<16x?xf32>
        // CHECK-NEXT:      linalg.generic {{.*}} ins(%{{$V}} : tensor<16xi64>) outs(%[[INIT]] : tensor<16x?xf32>)
        // CHECK:             tensor.extract %x[%{{$V}}, %{{$V}}] : tensor<?x?xf32>
        // CHECK:           } -> tensor<16x?xf32>
        // CHECK:         %[[GATHERED:$V]] = tensor.collapse_shape %[[ROWS]]
        // CHECK-NEXT:    tensor.extract_slice %[[GATHERED]][0, 0] [%{{$V}}, %[[WIDTH]]] [1, 1] : tensor<16x?xf32> to tensor<?x?xf32>
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


def test_scatter_mask_is_broadcast_to_the_value_and_drops_padding_lanes_before_the_lane_loops() -> None:
    """``hl.arange(12)`` is 16 lanes in Helion's device IR: the positions of lanes 12-15 would
    address the next row, so the store's mask keeps lanes below 12 only (and the row tile's
    16 lanes all: a tile is not padding)."""
    x, rows, keep = torch.randn(37, 12), torch.randperm(37), torch.rand(37) < 0.5
    filecheck(generate_mlir(KERNELS.masked_flat_scatter.bind((x, rows, keep))), """
        // CHECK-LABEL: func.func @masked_flat_scatter(
        // CHECK:       %[[COLUMN:$V]] = tensor.expand_shape %{{$V}} {{.*}} into tensor<16x1xi1>
        // CHECK:       %[[KEEP:$V]] = linalg.generic {{.*}} ins(%[[COLUMN]] : tensor<16x1xi1>) outs(%{{$V}} : tensor<16x16xi1>)
        // CHECK:       %[[REAL:$V]] = linalg.generic
        // CHECK:         %[[LANE:$V]] = linalg.index 1 : index
        // CHECK:         arith.cmpi slt, %[[LANE]], %{{$V}} : index
        // CHECK:       %[[MASK:$V]] = linalg.generic {{.*}} ins(%[[KEEP]], %[[REAL]] : tensor<16x16xi1>, tensor<16x16xi1>)
        // CHECK:       scf.for %[[ROW:$V]] =
        // CHECK:         scf.for %[[COL:$V]] =
        // CHECK:           tensor.extract %[[MASK]][%[[ROW]], %[[COL]]] : tensor<16x16xi1>
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


def _shifted_args(length: int, out_length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(length, generator=torch.Generator().manual_seed(seed)), torch.empty(out_length)


def _added_shifted(x: torch.Tensor, out_length: int) -> torch.Tensor:
    """``x[i] + x[i + 3]``, the shifted read past ``x``'s end counting as 0 (a padding lane)."""
    shifted = torch.zeros(out_length)
    moved = x[3:out_length + 3]
    shifted[:moved.numel()] = moved
    return x[:out_length] + shifted


def test_tile_index_plus_a_constant_is_a_moved_slice_when_it_stays_inside() -> None:
    """40 elements, tiles over 37: positions up to 39, so the slice at ``tile + 3`` keeps the
    tile's extent and no lane is gathered one by one."""
    filecheck(generate_mlir(KERNELS.add_shifted_static.bind(_shifted_args(40, 37))), """
        // CHECK-LABEL: func.func @add_shifted_static(
        // CHECK:       scf.for %[[IV:$V]] =
        // CHECK:         %[[EXTENT:$V]] = arith.minsi
        // CHECK:         tensor.extract_slice %x[%[[IV]]] [%[[EXTENT]]] [1]
        // CHECK:         %[[START:$V]] = arith.addi %[[IV]], %c{{[0-9]+}} : index
        // CHECK-NEXT:    tensor.extract_slice %x[%[[START]]] [%[[EXTENT]]] [1] : tensor<40xf32> to tensor<?xf32>
        // CHECK-NOT:     tensor.extract %x
        // CHECK:         scf.yield
    """)


def test_tile_index_plus_a_constant_is_clipped_to_the_dim_when_it_may_run_past_it() -> None:
    """37 elements, tiles over 37: the slice at ``tile + 3`` starts at most at the end and
    holds only the lanes before it; the rest are padding."""
    filecheck(generate_mlir(KERNELS.add_shifted_static.bind(_shifted_args(37, 37))), """
        // CHECK-LABEL: func.func @add_shifted_static(
        // CHECK:       scf.for %[[IV:$V]] =
        // CHECK:         %[[EXTENT:$V]] = arith.minsi
        // CHECK:         tensor.extract_slice %x[%[[IV]]] [%[[EXTENT]]] [1]
        // CHECK:         %[[MOVED:$V]] = arith.addi %[[IV]], %c{{[0-9]+}} : index
        // CHECK-NEXT:    %[[START:$V]] = arith.minsi %[[MOVED]], %{{$V}} : index
        // CHECK-NEXT:    %[[ROOM:$V]] = arith.subi %{{$V}}, %[[START]] : index
        // CHECK-NEXT:    %[[INSIDE:$V]] = arith.minsi %[[EXTENT]], %[[ROOM]] : index
        // CHECK-NEXT:    tensor.extract_slice %x[%[[START]]] [%[[INSIDE]]] [1] : tensor<37xf32> to tensor<?xf32>
        // CHECK-NOT:     tensor.extract %x
    """)


@pytest.mark.parametrize("checked", [False, True], ids=["fast", "checked"])
def test_moved_slice_past_the_end_reads_zeros_and_checked_mode_catches_it(checked: bool) -> None:
    """Every length with tiles of 16 and a shift of 3, dynamic sizes (one compiled kernel):
    in-bounds lanes as torch, lanes past the end 0 (docs/abi.md, "Indices out of range");
    checked mode raises where a lane runs past the end, naming the line, and computes the
    same numbers where none does."""
    kernel = compile_kernel(KERNELS.add_shifted.bind(_shifted_args(37, 37)), checked=checked)
    for length in range(1, 41):
        for out_length in {max(1, length - 4), length - 1, length} - {0}:
            x, out = _shifted_args(length, out_length, seed=length)
            if checked and out_length + 3 > length:
                with pytest.raises(OutOfBoundsAccessError, match="dimension 0 of 'x'") as raised:
                    kernel(x, out)
                assert raised.value.source_line == "out[tile] = x[tile] + x[tile.index + 3]"
                continue
            torch.testing.assert_close(kernel(x, out), _added_shifted(x, out_length), rtol=0, atol=0)


@pytest.mark.parametrize("length", [37, 40])
def test_moved_slice_with_static_sizes_is_checked_in_checked_mode(length: int) -> None:
    x, out = _shifted_args(length, 37)
    kernel = compile_kernel(KERNELS.add_shifted_static.bind((x, out)), checked=True)
    if length < 40:
        with pytest.raises(OutOfBoundsAccessError, match="dimension 0 of 'x' \\(size 37\\)"):
            kernel(x, out)
    else:
        torch.testing.assert_close(kernel(x, out), _added_shifted(x, 37), rtol=0, atol=0)



def _one_row_cross_entropy(pipeline: str = "fast") -> tuple[CompiledKernel, str]:
    module = load_example_by_name("cross_entropy")
    bound = module.KERNEL.bind(module.make_args("ragged"))
    config = helion.Config(block_sizes=[1])
    return compile_kernel(bound, config=config, pipeline=pipeline), generate_mlir(bound, config=config)


def test_gather_of_one_element_is_a_one_element_slice_at_its_indices() -> None:
    # cross_entropy one row at a time: `logits_flat[tile_r.index * vocab + target[tile_r]]`
    # is one element; a slice, not a linalg.generic extracting it (see memory._gather_one).
    _compiled, text = _one_row_cross_entropy()
    filecheck(text, """
        // CHECK:       %[[AT:$V]] = tensor.extract %{{$V}}[%{{$V}}] : tensor<1xi64>
        // CHECK-NEXT:  %[[IDX:$V]] = arith.index_cast %[[AT]] : i64 to index
        // CHECK:       %[[POS:$V]] = arith.select %{{$V}}, %[[IDX]], %{{$V}} : index
        // CHECK-NEXT:  %[[ONE:$V]] = tensor.extract_slice %logits_flat[%[[POS]]] [1] [1] : tensor<3700xf32> to tensor<f32>
        // CHECK-NEXT:  %{{$V}} = tensor.expand_shape %[[ONE]] [] output_shape [1] : tensor<f32> into tensor<1xf32>
    """)
    assert "tensor.extract %logits_flat" not in text


@pytest.mark.parametrize("pipeline", ["fast", "plain"])
def test_one_element_gathers_match_torch(pipeline: str) -> None:
    module = load_example_by_name("cross_entropy")
    logits, target = module.make_args("ragged")
    compiled, _text = _one_row_cross_entropy(pipeline)
    for seed in range(3):
        target = torch.randint(0, logits.size(1), target.shape, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(compiled(logits, target), module.reference(logits, target), **module.TOLERANCE)


@pytest.mark.parametrize("block", [1, 8, 16, 64])
@pytest.mark.parametrize("shape", [(5, 3), (37, 12)])
def test_masked_scatter_with_dynamic_columns_writes_exactly_the_kept_rows(shape: tuple[int, int], block: int) -> None:
    """With dynamic columns the row mask ``keep[tile][:, None]`` is broadcast to every column
    (it was read one column wide at every column, past its end, and dropped kept values)."""
    gen = torch.Generator().manual_seed(block)
    x, rows, keep = torch.randn(*shape, generator=gen), torch.randperm(shape[0], generator=gen), torch.rand(shape[0], generator=gen) < 0.7
    x[0, 0] = float("nan")
    kernel = helion.kernel(KERNELS.masked_flat_scatter.fn, static_shapes=False)
    compiled = compile_kernel(kernel.bind((x, rows, keep)), config=helion.Config(block_sizes=[block]))
    expected = torch.zeros_like(x)
    expected[rows[keep]] = x[keep]
    torch.testing.assert_close(compiled(x, rows, keep), expected, rtol=0, atol=0, equal_nan=True)
