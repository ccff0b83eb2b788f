"""Chunk loops over the columns of a multi-row tile, run once per row on the fast pipeline
(``runtime/cpu/rewrites/tensor/row_major_chunks.py``): where it applies, where it must not, and the same
numbers as torch for any shape, tile and thread count, under Helion's generated configs too."""

from __future__ import annotations

import helion
import pytest
import torch
from config_fuzz import random_configs
from examples_util import load_example_by_name
from fast_pipeline_util import after_step
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import chunk_kernels

from helion_mlir import generate_mlir
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.reference import reference_kernel
from helion_mlir.runtime.cpu.rewrites.tensor.row_major_chunks import process_rows_before_column_chunks
from helion_mlir.verify import parse_module

pytestmark = pytest.mark.usefixtures("parallel_even_when_small")

_STEP = "process-rows-before-column-chunks"


def _log_probabilities(rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.log_softmax(torch.randn(rows, cols), -1), torch.log_softmax(torch.randn(rows, cols), -1)


def _after(tmp_path, monkeypatch, kernel: helion.Kernel, args: tuple, blocks: list[int]) -> str:
    configured = helion.kernel(kernel.fn, config=helion.Config(block_sizes=blocks), static_shapes=True)
    return after_step(tmp_path, monkeypatch, generate_mlir(configured.bind(args)), kernel.fn.__name__, _STEP)


def test_a_loss_over_column_chunks_sums_each_row_of_the_tile_in_turn(tmp_path, monkeypatch) -> None:
    """KL divergence over [16, 256] tiles: a loop over the tile's 16 rows around the loop over
    the column chunks, each chunk a [1, 256] slice of the row at the tile's offset + the row."""
    kernel = load_example_by_name("kl_div_loss").KERNEL
    run_filecheck(_after(tmp_path, monkeypatch, kernel, (*_log_probabilities(64, 1024), True, "none"), [16, 256]), """
        // CHECK-LABEL: func.func @kl_div_loss(
        // CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %c16{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args(%{{.*}}) -> (tensor<16xf32>)
        // CHECK: scf.for %{{.*}} = %{{.*}} to %c1024 step %c256 iter_args(%{{.*}}) -> (tensor<1xf32>)
        // CHECK: %[[AT:.*]] = arith.addi %{{.*}}, %[[ROW]] : index
        // CHECK: tensor.extract_slice %{{.*}}[%[[AT]], %{{.*}}] [1, 256] [1, 1] : tensor<64x1024xf32> to tensor<1x256xf32>
        // CHECK-NOT: tensor<16x256xf32>
        // CHECK-LABEL: // LOWERED
    """)


def test_a_norm_stores_each_rows_chunks_into_the_output_in_turn(tmp_path, monkeypatch) -> None:
    """RMS norm in two chunk loops: the second stores [1, 256] pieces of each row in turn into the
    tile's own rows (parallel tiles store there, inserted into the output after the loop)."""
    args = (torch.randn(64, 1024), torch.randn(1024), 1e-5)
    run_filecheck(_after(tmp_path, monkeypatch, chunk_kernels.rms_norm_chunked, args, [16, 256, 256]), """
        // CHECK-LABEL: func.func @rms_norm_chunked(
        // CHECK: scf.for {{.*}} to %c16{{[_0-9]*}} step %c1{{[_0-9]*}} {{.*}} -> (tensor<16xf32>)
        // CHECK: scf.for %[[ROW:.*]] = {{.*}} to %c16{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args(%[[OUT:.*]] = %{{.*}}) -> (tensor<16x1024xf32>)
        // CHECK: scf.for {{.*}} step %c256 iter_args(%[[CHUNKS:.*]] = %[[OUT]]) -> (tensor<16x1024xf32>)
        // CHECK: tensor.insert_slice %{{.*}} into %[[CHUNKS]][%{{.*}}, %{{.*}}] [1, 256] [1, 1] : tensor<1x256xf32> into tensor<16x1024xf32>
        // CHECK-LABEL: // LOWERED
    """)


def test_the_last_chunk_of_a_row_follows_its_other_chunks(tmp_path, monkeypatch) -> None:
    """bias + GELU 128x600 in [16, 256] tiles: the last chunk of 88 columns, peeled off the
    chunk loop, runs in the same loop over the tile's rows, right after that row's full
    chunks (not after all 16 rows', which streams each row's end apart from the rest)."""
    kernel = load_example_by_name("bias_gelu").KERNEL
    args = (torch.randn(128, 600), torch.randn(600))
    run_filecheck(_after(tmp_path, monkeypatch, kernel, args, [16, 256]), """
        // CHECK-LABEL: func.func @bias_gelu(
        // CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %c16{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args(%[[OUT:.*]] = %{{.*}}) -> (tensor<16x600xf32>)
        // CHECK: %[[FULL:.*]] = scf.for %{{.*}} = %{{.*}} to %c512 step %c256 iter_args(%[[CHUNKS:.*]] = %[[OUT]])
        // CHECK: tensor.insert_slice %{{.*}} into %[[CHUNKS]][%{{.*}}, %{{.*}}] [1, 256] [1, 1] : tensor<1x256xf32> into tensor<16x600xf32>
        // CHECK: scf.for %{{.*}} iter_args(%[[LAST:.*]] = %[[FULL]])
        // CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 512] [1, 88] [1, 1] : tensor<128x600xf32> to tensor<1x88xf32>
        // CHECK: tensor.insert_slice %{{.*}} into %[[LAST]][%{{.*}}, 512] [1, 88] [1, 1] : tensor<1x88xf32> into tensor<16x600xf32>
        // CHECK-NOT: tensor<16x88xf32>
        // CHECK-LABEL: // LOWERED
    """)


def test_short_chunks_stay_a_block_of_rows(tmp_path, monkeypatch) -> None:
    """Chunks of 64 f32 (one vector step): the per-chunk work of one row would cost more than the
    interleaved reads (two-pass softmax with [16, 16] chunks: 5.1 ms by tiles, 6.8 by rows)."""
    kernel = load_example_by_name("kl_div_loss").KERNEL
    text = _after(tmp_path, monkeypatch, kernel, (*_log_probabilities(64, 1024), True, "none"), [16, 64])
    before_lowering = text.split("// LOWERED")[0]
    assert "tensor<16x64xf32>" in before_lowering and "-> (tensor<1xf32>)" not in before_lowering


_LOOP = """
func.func @f(%x: tensor<1024x1024xf32>, %init: tensor<16xf32>, %r0: index) -> tensor<16xf32> {{
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  %sums = scf.for %c = %c0 to %c1024 step %c256 iter_args(%acc = %init) -> (tensor<16xf32>) {{
    %tile = tensor.extract_slice %x[{row_offset}, %c] [{tile}] [1, 1] : tensor<1024x1024xf32> to tensor<{tile_type}xf32>
    %sum = linalg.generic {{indexing_maps = [{read_map}, affine_map<(d0, d1) -> (d0)>],
                           iterator_types = ["parallel", "reduction"]}}
        ins(%tile : tensor<{tile_type}xf32>) outs(%acc : tensor<16xf32>) {{
    ^bb0(%in: f32, %out: f32):
{body}
    }} -> tensor<16xf32>
    scf.yield %sum : tensor<16xf32>
  }}
  return %sums : tensor<16xf32>
}}
"""
_ADD = """      %r = arith.addf %in, %out : f32
      linalg.yield %r : f32"""
_ADD_ROW_INDEX = """      %i = linalg.index 0 : index
      %n = arith.index_cast %i : index to i64
      %f = arith.sitofp %n : i64 to f32
      %s = arith.addf %in, %f : f32
      %r = arith.addf %s, %out : f32
      linalg.yield %r : f32"""
_IN_ORDER = ("affine_map<(d0, d1) -> (d0, d1)>", "16, 256")
_TRANSPOSED = ("affine_map<(d0, d1) -> (d1, d0)>", "256, 16")


@pytest.mark.parametrize(("row_offset", "read", "body", "rewritten"), [
    ("%r0", _IN_ORDER, _ADD, 1),
    ("%c", _IN_ORDER, _ADD, 0),
    ("%r0", _TRANSPOSED, _ADD, 0),
    ("%r0", _IN_ORDER, _ADD_ROW_INDEX, 1),
], ids=["row-sums", "row-offset-moves-with-the-chunk", "transposed-read", "reads-its-row-index"])
def test_a_chunk_loop_runs_per_row_only_when_rows_stay_apart(row_offset, read, body, rewritten) -> None:
    """Rewritten when every op reads the tile's rows as rows at one fixed row offset (a body
    reading its row index then reads index + the row); left alone when the row offset follows
    the chunk or a map transposes."""
    with mlir_session():
        read_map, tile = read
        text = _LOOP.format(row_offset=row_offset, read_map=read_map, tile=tile, tile_type=tile.replace(", ", "x"),
                            body=body)
        module = parse_module(text, what="test module")
        assert process_rows_before_column_chunks(module) == rewritten
        assert module.operation.verify()
        if rewritten:
            run_filecheck(str(module), """
                // CHECK: %[[ALL:.*]] = scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[SUMS:.*]] = %{{.*}}) -> (tensor<16xf32>)
                // CHECK: %[[MINE:.*]] = tensor.extract_slice %[[SUMS]][%[[ROW]]] [1] [1]
                // CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[MINE]]) -> (tensor<1xf32>)
                // CHECK: tensor.extract_slice %{{.*}} [1, 256] [1, 1] : tensor<1024x1024xf32> to tensor<1x256xf32>
                // CHECK: tensor.insert_slice %{{.*}} into %[[SUMS]][%[[ROW]]] [1] [1]
                // CHECK: return %[[ALL]]
            """)
        if body is _ADD_ROW_INDEX:
            run_filecheck(str(module), """
                // CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
                // CHECK: %[[INDEX:.*]] = linalg.index 0 : index
                // CHECK-NEXT: %[[SHIFTED:.*]] = arith.addi %[[INDEX]], %[[ROW]] : index
                // CHECK-NEXT: arith.index_cast %[[SHIFTED]] : index to i64
            """)


def _chunk_args(name: str, rows: int, cols: int, option: bool) -> tuple:
    if name == "kl_div_loss":
        y_pred, y_true = _log_probabilities(rows, cols)
        return (y_pred, y_true if option else y_true.exp(), option, "none")
    if name == "softmax_two_pass":
        return (3 * torch.randn(rows, cols),)
    if name == "rms_norm_chunked":
        return torch.randn(rows, cols), torch.randn(cols), 1e-5
    if name == "cross_entropy_chunked":
        return 2 * torch.randn(rows, cols), torch.randint(0, cols, (rows,))
    return torch.randn(rows, cols), torch.randn(rows, cols), torch.rand(cols), option


def _kernel_and_reference(name: str) -> tuple[helion.Kernel, object]:
    if name in ("kl_div_loss", "softmax_two_pass"):
        example = load_example_by_name(name)
        return example.KERNEL, example.reference
    return getattr(chunk_kernels, name), getattr(chunk_kernels, f"{name}_reference")


_NAMES = ["kl_div_loss", "softmax_two_pass", "rms_norm_chunked", "cross_entropy_chunked", "weighted_squared_error"]


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(_NAMES), rows=st.integers(1, 40), cols=st.integers(1, 700),
       block_rows=st.sampled_from([1, 2, 4, 16]), block_cols=st.sampled_from([64, 128, 256]), option=st.booleans(),
       static=st.booleans(), threads=st.sampled_from([1, 2]))
def test_chunked_row_kernels_match_torch_for_any_shape_tile_and_thread_count(name, rows, cols, block_rows, block_cols,
                                                                              option, static, threads) -> None:
    kernel, reference = _kernel_and_reference(name)
    args = _chunk_args(name, rows, cols, option)
    loops = 2 if name in ("softmax_two_pass", "rms_norm_chunked") else 1
    configured = helion.kernel(kernel.fn, static_shapes=static,
                               config=helion.Config(block_sizes=[block_rows] + [block_cols] * loops))
    got = compile_kernel(configured.bind(args), threads=threads)(*args)
    torch.testing.assert_close(got, reference(*args), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", _NAMES)
def test_ragged_tiles_of_rows_and_columns_match_torch(name) -> None:
    """37 x 600 in [16, 256] tiles: the last tile of rows holds 5 (its other rows are padding,
    masked by the row index), the last chunk 88 columns."""
    kernel, reference = _kernel_and_reference(name)
    args = _chunk_args(name, 37, 600, True)
    loops = 2 if name in ("softmax_two_pass", "rms_norm_chunked") else 1
    configured = helion.kernel(kernel.fn, static_shapes=True, config=helion.Config(block_sizes=[16] + [256] * loops))
    got = compile_kernel(configured.bind(args), threads=2)(*args)
    torch.testing.assert_close(got, reference(*args), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["bias_gelu", "swiglu", "geglu"])
@pytest.mark.parametrize(("shape", "blocks"), [((130, 600), [16, 256]), ((300, 1000), [8, 128]), ((257, 300), [32, 128]),
                                               ((96, 2000), [8, 256])])
def test_elementwise_tiles_with_a_last_chunk_of_columns_match_torch(name, shape, blocks, threads) -> None:
    """Ragged columns (and rows) in tiles of many rows: the last chunk of each row, run after
    that row's full chunks, gives torch's numbers."""
    example = load_example_by_name(name)
    rows, cols = shape
    generator = torch.Generator().manual_seed(rows + cols)
    if name == "bias_gelu":
        args = (torch.randn(rows, cols, generator=generator), torch.randn(cols, generator=generator))
    elif name == "swiglu":
        args = (torch.randn(rows, cols, generator=generator), torch.randn(rows, cols, generator=generator))
    else:
        args = (torch.randn(rows, 2 * cols, generator=generator),)
    configured = helion.kernel(example.KERNEL.fn, static_shapes=True, config=helion.Config(block_sizes=blocks))
    got = compile_kernel(configured.bind(args), threads=threads)(*args)
    torch.testing.assert_close(got, example.reference(*args), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", _NAMES[2:])
def test_chunked_user_kernels_match_ref_mode_under_helions_generated_configs(name, static) -> None:
    """Each user kernel at 50 x 640 (rows most row blocks leave ragged) under four configs from
    Helion's own generator, against Helion's reference mode (itself checked against torch)."""
    kernel, reference = _kernel_and_reference(name)
    kernel = helion.kernel(kernel.fn, static_shapes=static)
    args = _chunk_args(name, 50, 640, True)
    want = reference_kernel(kernel)(*args)
    torch.testing.assert_close(want, reference(*args), rtol=1e-4, atol=1e-4)
    for config in random_configs(kernel.bind(args), seed=11 + _NAMES.index(name) + 10 * static, count=4):
        got = compile_kernel(kernel.bind(args), config=config, threads=2)(*args)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m, c=config: f"{c}: {m}")
