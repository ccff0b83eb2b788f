"""The fast CPU pipeline: which tile loops run in parallel, what the tile bodies become,
how destinations are written in place, and that OpenMP workers really run.

Numbers against the plain pipeline on random shapes are in test_fast_pipeline_properties.py;
every example runs through the fast pipeline in test_examples_mlir.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import helion
import pytest
import torch
from examples_util import load_example_by_name
from fast_pipeline_util import after_step, example_module
from filecheck_util import run_filecheck
from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from helion_mlir import generate_mlir
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.engine import compile_module, lower_module
from helion_mlir.runtime.cpu.rewrites.vector.constant_powers import integral_powers_as_fpowi
from helion_mlir.runtime.cpu.rewrites.tensor.fold_add_into_matmul import fold_add_into_matmul
from helion_mlir.runtime.cpu.rewrites.tensor.recompute_cheap_elementwise import recompute_cheap_elementwise
from helion_mlir.runtime.cpu.rewrites.tensor.tile_parallel import parallelize_tile_loops
from helion_mlir.runtime.cpu.rewrites.tensor.vectorize_tiles import host_vector_shape
from helion_mlir.verify import parse_module


def _transformed(text: str, transform) -> tuple[object, str]:
    """Apply ``transform(module)`` after canonicalize + cse; (its result, verified module text)."""
    with mlir_session():
        module = parse_module(text)
        PassManager.parse("builtin.module(func.func(canonicalize,cse))").run(module.operation)
        result = transform(module)
        assert module.operation.verify()
        return result, str(module)


def _parallelized(text: str, min_work: int = 0) -> tuple[int, str]:
    def run(module: ir.Module) -> int:
        return sum(parallelize_tile_loops(op, min_work=min_work)
                   for op in module.body.operations if op.operation.name == "func.func")

    return _transformed(text, run)  # type: ignore[return-value]


# ------------------------------------------------------------------ parallel tile loops
def test_a_grid_whose_tiles_store_their_own_slices_becomes_one_forall() -> None:
    count, text = _parallelized(example_module("add"))
    assert count == 1
    run_filecheck(text, """
        // CHECK: func.func @add(%[[X:.*]]: tensor<37x100xf32>, %[[Y:.*]]: tensor<37x100xf32>, %[[OUT:.*]]: tensor<37x100xf32>)
        // CHECK-NOT: scf.for {{.*}} iter_args
        // CHECK: scf.forall (%[[I:.*]], %[[J:.*]]) = (0, 0) to (37, 100) step (16, 32) shared_outs(%[[SHARED:.*]] = %[[OUT]])
        // CHECK: tensor.extract_slice %[[X]][%[[I]], %[[J]]]
        // CHECK: scf.forall.in_parallel
        // CHECK-NEXT: tensor.parallel_insert_slice %{{.*}} into %[[SHARED]][%[[I]], %[[J]]]
    """)


def test_a_tile_storing_column_chunks_in_a_loop_stores_into_its_own_rows_in_parallel() -> None:
    """Online softmax: its second loop over column chunks stores ``out[tile_r, tile_c]``; the chunks
    go into the tile's own [16, 512] rows, inserted once after the loop, and the tiles run in parallel."""
    count, text = _parallelized(example_module("softmax_two_pass", (torch.randn(64, 512),), block_sizes=[16, 128, 128]))
    assert count == 1
    run_filecheck(text, """
        // CHECK: scf.forall (%[[ROW:.*]]) = (0) to (64) step (16) shared_outs(%[[SHARED:.*]] = %{{.*}})
        // CHECK: %[[OWN:.*]] = tensor.extract_slice %[[SHARED]][%[[ROW]], 0] [16, 512] [1, 1]
        // CHECK: %[[ROWS:.*]] = scf.for %[[C:.*]] = {{.*}} iter_args(%[[PART:.*]] = %[[OWN]]) -> (tensor<16x512xf32>)
        // CHECK: tensor.insert_slice %{{.*}} into %[[PART]][0, %[[C]]] [16, 128] [1, 1]
        // CHECK: scf.forall.in_parallel
        // CHECK-NEXT: tensor.parallel_insert_slice %[[ROWS]] into %[[SHARED]][%[[ROW]], 0] [16, 512] [1, 1]
    """)


def test_tiles_accumulating_into_shared_columns_stay_sequential() -> None:
    # column_stats: every row tile updates the same column slices (atomics).
    count, text = _parallelized(example_module("column_stats"))
    assert count == 0
    run_filecheck(text, "// CHECK: scf.for\n// CHECK-NOT: scf.forall")


def test_stores_at_the_tile_id_are_disjoint() -> None:
    # block_scan: phase 1 stores one sum per tile at tile.id, phase 2 its own output slice.
    count, text = _parallelized(example_module("block_scan"))
    assert count == 2
    run_filecheck(text, """
        // CHECK: scf.forall (%[[T:.*]]) = (0) to (1000) step (64)
        // CHECK: %[[ID:.*]] = arith.divui %[[T]], %{{.*}} : index
        // CHECK: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[ID]]] [1] [1]
        // CHECK: scf.forall
    """)


_READS_THE_NEXT_TILE = """
func.func @shift(%x: tensor<64x8xf32>, %out: tensor<64x8xf32>) -> tensor<64x8xf32> {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c48 = arith.constant 48 : index
  %r = scf.for %i = %c0 to %c48 step %c16 iter_args(%acc = %out) -> (tensor<64x8xf32>) {
    %next = arith.addi %i, %c16 : index
    %later = tensor.extract_slice %acc[%next, 0] [16, 8] [1, 1] : tensor<64x8xf32> to tensor<16x8xf32>
    %new = tensor.insert_slice %later into %acc[%i, 0] [16, 8] [1, 1] : tensor<16x8xf32> into tensor<64x8xf32>
    scf.yield %new : tensor<64x8xf32>
  }
  return %r : tensor<64x8xf32>
}
"""
_STORES_INTO_THE_NEXT_TILE_IN_A_LOOP = """
func.func @shift(%x: tensor<64x8xf32>, %out: tensor<64x8xf32>) -> tensor<64x8xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c48 = arith.constant 48 : index
  %r = scf.for %i = %c0 to %c48 step %c16 iter_args(%acc = %out) -> (tensor<64x8xf32>) {
    %next = arith.addi %i, %c16 : index
    %s = scf.for %c = %c0 to %c8 step %c4 iter_args(%part = %acc) -> (tensor<64x8xf32>) {
      %v = tensor.extract_slice %x[%i, %c] [16, 4] [1, 1] : tensor<64x8xf32> to tensor<16x4xf32>
      %w = tensor.insert_slice %v into %part[%next, %c] [16, 4] [1, 1] : tensor<16x4xf32> into tensor<64x8xf32>
      scf.yield %w : tensor<64x8xf32>
    }
    scf.yield %s : tensor<64x8xf32>
  }
  return %r : tensor<64x8xf32>
}
"""


def _shifted_up(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Tiles of 16 rows 0-47 in turn: each gets what the next tile holds at that point (out)."""
    return torch.cat([out[16:64], out[48:64]])


def _shifted_down(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Tiles of 16 rows 0-47 in turn: each stores its rows of x into the next tile's rows."""
    return torch.cat([out[:16], x[:48]])


@pytest.mark.parametrize(("text", "expected"), [
    (_READS_THE_NEXT_TILE, _shifted_up), (_STORES_INTO_THE_NEXT_TILE_IN_A_LOOP, _shifted_down),
], ids=["reads-the-next-tile", "stores-into-the-next-tile-in-a-loop"])
def test_a_tile_touching_the_next_tiles_rows_stays_sequential(text, expected) -> None:
    """Reading back the next tile's rows, or storing into them from a loop inside the tile (not
    the tile's own rows, so not made a store of its own), keeps the loop sequential, and the
    result is the sequential one."""
    assert _parallelized(text)[0] == 0
    x, out = torch.arange(512.0).reshape(64, 8), -torch.arange(512.0).reshape(64, 8)
    (got,) = compile_module(text, "shift", threads=2)(x, out.clone())
    assert torch.equal(got, expected(x, out))


def test_nests_with_little_work_stay_sequential_by_default() -> None:
    text = example_module("add")  # 37x100: a few thousand operations
    assert _parallelized(text, min_work=None)[0] == 0  # type: ignore[arg-type]
    assert _parallelized(text, min_work=0)[0] == 1


# ------------------------------------------------------------------ tile bodies
def test_accumulating_a_matmul_into_the_carried_tile_folds_into_the_matmul() -> None:
    count, text = _transformed(example_module("matmul", "divisible"), fold_add_into_matmul)
    assert count == 1
    run_filecheck(text, """
        // CHECK: scf.for %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<16x16xf32>)
        // CHECK: %[[MM:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x32xf32>, tensor<32x16xf32>) outs(%[[ACC]] : tensor<16x16xf32>)
        // CHECK-NOT: arith.addf
        // CHECK: scf.yield %[[MM]]
    """)


def test_parallel_row_tiles_are_vectorized_on_openmp_taken_in_runs_without_heap_allocation() -> None:
    """64 row tiles on 2 workers: runs of 8 contiguous tiles (a quarter of a worker's share), with no
    barrier of the loop's own (the end of the parallel region is one)."""
    text = example_module("softmax_one_pass", (torch.randn(1024, 256),), block_sizes=[16])
    lanes = host_vector_shape().elements
    run_filecheck(lower_module(text, "softmax_one_pass", threads=2, in_place=True), f"""
        // CHECK-LABEL: llvm.func @softmax_one_pass(
        // CHECK: %[[CHUNK:.*]] = llvm.mlir.constant(8 : i32) : i32
        // CHECK: omp.parallel
        // CHECK: omp.wsloop nowait schedule(dynamic = %[[CHUNK]] : i32)
        // CHECK: llvm.intr.stacksave
        // CHECK: vector<{lanes}xf32>
        // CHECK: llvm.intr.stackrestore
        // CHECK-NOT: llvm.call @malloc
        // CHECK-NOT: llvm.call @expf
        // CHECK-LABEL: llvm.func @_mlir_ciface_softmax_one_pass(
    """)


@pytest.mark.usefixtures("parallel_even_when_small")
def test_collapsed_tile_grids_are_scheduled_in_runs_of_their_collapsed_trip_count() -> None:
    """A 4x8 grid of matmul tiles on 2 workers (too few rows of tiles to share alone):
    32 collapsed iterations, runs of 4."""
    text = example_module("matmul", (torch.randn(128, 64), torch.randn(64, 512)), block_sizes=[32, 64, 16])
    run_filecheck(lower_module(text, "matmul", threads=2, in_place=True), """
        // CHECK-LABEL: llvm.func @matmul(
        // CHECK: %[[CHUNK:.*]] = llvm.mlir.constant(4 : i32) : i32
        // CHECK: omp.wsloop nowait schedule(dynamic = %[[CHUNK]] : i32)
        // CHECK-NEXT: omp.loop_nest ({{.*}}, {{.*}}) : i64 = {{.*}} collapse(2)
    """)


@pytest.mark.usefixtures("parallel_even_when_small")
def test_a_grid_of_many_rows_of_tiles_runs_in_parallel_over_them_each_row_in_order(tmp_path, monkeypatch) -> None:
    """bias + GELU 128x512 in [16, 256] tiles on 2 workers: 8 rows of tiles, parallel over
    those alone; each walks its column tiles in a loop, which runs row by row (each row read
    in order, not 16 rows of 1 KiB per tile)."""
    text = example_module("bias_gelu", (torch.randn(128, 512), torch.randn(512)), block_sizes=[16, 256])
    run_filecheck(after_step(tmp_path, monkeypatch, text, "bias_gelu", "process-rows-before-column-chunks"), """
        // CHECK-LABEL: func.func @bias_gelu(
        // CHECK: scf.forall (%[[TILE:[a-z0-9]+]]) = (0) to (128) step (16)
        // CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %c16{{[_0-9]*}} step %c1{{[_0-9]*}} iter_args(%{{.*}}) -> (tensor<16x512xf32>)
        // CHECK: scf.for %{{.*}} = %{{.*}} to %c512 step %c256
        // CHECK: tensor.insert_slice %{{.*}} : tensor<1x256xf32> into tensor<16x512xf32>
        // CHECK: tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[TILE]], 0] [16, 512] [1, 1]
        // CHECK-LABEL: // LOWERED
    """)


def test_row_reductions_end_in_one_reassociated_vector_reduction_per_row() -> None:
    """The horizontal step of a row's max and sum is one LLVM vector reduction each (a tree
    of shuffles), not a chain of one dependent scalar op per lane."""
    text = example_module("softmax_one_pass", (torch.randn(1024, 256),), block_sizes=[16])
    lanes = host_vector_shape().lanes
    lowered = lower_module(text, "softmax_one_pass", threads=2, in_place=True)
    run_filecheck(lowered, f"""
        // CHECK-LABEL: llvm.func @softmax_one_pass(
        // CHECK: llvm.intr.vector.reduce.fmaximum(%{{{{.*}}}}) {{fastmathFlags = #llvm.fastmath<reassoc>}} : (vector<{lanes}xf32>) -> f32
        // CHECK: "llvm.intr.vector.reduce.fadd"(%{{{{.*}}}}, %{{{{.*}}}}) <{{fastmathFlags = #llvm.fastmath<reassoc>}}> : (f32, vector<{lanes}xf32>) -> f32
    """)
    lane_by_lane = [line for line in lowered.splitlines()
                    if ("llvm.fadd" in line or "llvm.intr.maximum" in line) and "vector<1xf32>" in line]
    assert not lane_by_lane


@pytest.mark.parametrize("block", [1, 16, 64])
def test_a_row_reduction_accumulates_one_register_in_its_loop_and_reduces_it_once_per_row(block: int) -> None:
    """RMS norm's sum of squares: the loop over the row carries one register of partial sums
    (read in order, see vectorize_tiles), and only after the loop is that register summed
    across its lanes, once per row, at any row block."""
    text = example_module("rms_norm", (torch.randn(64, 1024), torch.randn(1024), 1e-5), block_sizes=[block])
    lanes = host_vector_shape().lanes
    run_filecheck(lower_module(text, "rms_norm", threads=1, in_place=True), f"""
        // CHECK-LABEL: llvm.func @rms_norm(
        // CHECK: llvm.br ^[[LOOP:bb[0-9]+]](%{{{{.*}}}}, %[[ZERO:.*]] : i64, vector<{lanes}xf32>)
        // CHECK-NEXT: ^[[LOOP]](%{{{{.*}}}}: i64, %[[ACC:.*]]: vector<{lanes}xf32>):
        // CHECK-NOT: llvm.intr.vector.reduce.fadd
        // CHECK: %[[ROW:.*]] = llvm.load %{{{{.*}}}} : !llvm.ptr -> vector<{lanes}xf32>
        // CHECK-NEXT: %[[SQUARE:.*]] = llvm.fmul %[[ROW]], %[[ROW]] : vector<{lanes}xf32>
        // CHECK-NEXT: %[[SUM:.*]] = llvm.fadd %[[SQUARE]], %[[ACC]] : vector<{lanes}xf32>
        // CHECK-NOT: llvm.intr.vector.reduce.fadd
        // CHECK: llvm.br ^[[LOOP]](%{{{{.*}}}}, %[[SUM]] : i64, vector<{lanes}xf32>)
        // CHECK: "llvm.intr.vector.reduce.fadd"(%{{{{.*}}}}, %[[ACC]]) {{{{.*}}}} : (f32, vector<{lanes}xf32>) -> f32
        // CHECK-LABEL: llvm.func @_mlir_ciface_rms_norm(
    """)


def test_a_cheap_elementwise_op_feeding_two_ops_is_computed_again_in_each() -> None:
    """Layer norm's ``x - mean`` feeds the variance and the output; each gets its own copy,
    which elementwise fusion then folds into it: both read ``x`` itself, and no op
    produces the centered row block any more."""
    text = example_module("layer_norm", (torch.randn(64, 256), torch.randn(256), torch.randn(256), 1e-5),
                           block_sizes=[16])

    def copy_then_fuse(module: ir.Module) -> int:
        copies = recompute_cheap_elementwise(module)
        PassManager.parse("builtin.module(func.func(linalg-fuse-elementwise-ops))").run(module.operation)
        return copies

    copies, fused = _transformed(text, copy_then_fuse)
    assert copies == 1
    run_filecheck(fused, """
        // CHECK: %[[X:.*]] = tensor.extract_slice %arg0
        // CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%{{[0-9]+}} : tensor<16x1xf32>)
        // CHECK: arith.divf
        // CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[MEAN]] :
        // CHECK-NEXT: ^bb0
        // CHECK-NEXT: arith.subf
        // CHECK-NEXT: arith.mulf
        // CHECK-NEXT: arith.addf
        // CHECK: linalg.generic {{.*}} ins(%[[X]], %[[MEAN]], {{.*}}) outs(%{{.*}} : tensor<16x256xf32>)
        // CHECK: arith.subf
        // CHECK-NOT: linalg.generic
        // CHECK: tensor.insert_slice
    """)


def test_rows_of_run_time_length_are_vectorized_with_masked_loads() -> None:
    """static_shapes=False: the row length is an argument, so the row is walked in fixed
    vector steps whose lanes past its end are masked off (no scalar loop)."""
    kernel = helion.kernel(load_example_by_name("rms_norm").KERNEL.fn, config=helion.Config(block_sizes=[16]),
                           static_shapes=False)
    text = generate_mlir(kernel.bind((torch.randn(64, 200), torch.randn(200), 1e-5)))
    lanes = host_vector_shape().lanes
    run_filecheck(lower_module(text, "rms_norm", threads=1, in_place=True), f"""
        // CHECK-LABEL: llvm.func @rms_norm(
        // CHECK: llvm.intr.masked.load {{{{.*}}}} : (!llvm.ptr, vector<{lanes}xi1>, vector<{lanes}xf32>) -> vector<{lanes}xf32>
        // CHECK: "llvm.intr.vector.reduce.fadd"(%{{{{.*}}}}, %{{{{.*}}}}) <{{fastmathFlags = #llvm.fastmath<reassoc>}}> : (f32, vector<{lanes}xf32>) -> f32
        // CHECK: llvm.intr.masked.store
    """)


def test_a_matmul_accumulator_gets_a_stack_buffer_of_its_own_not_the_output_tile(tmp_path, monkeypatch) -> None:
    """Helion's default [16, 16, 16]: the sum over K is carried in a contiguous tile buffer
    on the stack and copied into the output once per tile, instead of being read and written
    in the output tile, whose rows, a full output row apart, share L1 sets with those of ``x``."""
    text = example_module("matmul", (torch.randn(256, 256), torch.randn(256, 256)), block_sizes=[16, 16, 16])
    run_filecheck(after_step(tmp_path, monkeypatch, text, "matmul", "accumulate-in-local-buffers"), """
        // CHECK: scf.forall
        // CHECK: %[[ACC:.*]] = bufferization.alloc_tensor() : tensor<16x16xf32>
        // CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[ACC]])
        // CHECK-NOT: tensor.empty
        // CHECK: tensor.parallel_insert_slice
        // CHECK-LABEL: // LOWERED
        // CHECK-LABEL: llvm.func @matmul(
        // CHECK: omp.loop_nest
        // CHECK: %[[TILE:.*]] = llvm.mlir.constant(256 : index)
        // CHECK-NEXT: llvm.alloca %[[TILE]] x f32
        // CHECK-NOT: llvm.call @malloc
        // CHECK-LABEL: llvm.func @_mlir_ciface_matmul(
    """)


def test_tiles_written_once_are_still_computed_in_the_output(tmp_path, monkeypatch) -> None:
    text = example_module("add", (torch.randn(256, 256), torch.randn(256, 256)), block_sizes=[16, 16])
    after = after_step(tmp_path, monkeypatch, text, "add", "accumulate-in-local-buffers")
    assert "tensor.empty" in after and "bufferization.alloc_tensor" not in after


def test_matmul_tiles_are_register_blocks_of_fmas() -> None:
    text = example_module("matmul", (torch.randn(128, 128), torch.randn(128, 128)), block_sizes=[64, 64, 64])
    nr = host_vector_shape().nr
    run_filecheck(lower_module(text, "matmul", threads=1, in_place=True), f"""
        // CHECK-LABEL: llvm.func @matmul(
        // CHECK: llvm.intr.fmuladd(%{{{{.*}}}}) : (vector<{nr}xf32>, vector<{nr}xf32>, vector<{nr}xf32>) -> vector<{nr}xf32>
        // CHECK-NOT: llvm.call @malloc
    """)


@pytest.mark.skipif(not host_vector_shape().bf16_pairs, reason="the CPU lacks AVX512-BF16")
def test_bf16_matmul_tiles_are_avx512_bf16_dot_products_of_k_pairs() -> None:
    a, b = torch.randn(128, 128).bfloat16(), torch.randn(128, 128).bfloat16()
    text = example_module("matmul_bf16", (a, b), block_sizes=[64, 64, 64])
    # B's rows k and k+1 interleaved into (k, k+1) pairs, A's pair broadcast as one i32;
    # no f32 FMAs left (the generic lowering's, on operands extended to f32)
    run_filecheck(lower_module(text, "matmul_bf16", threads=1, in_place=True), """
        // CHECK-LABEL: llvm.func @matmul_bf16(
        // CHECK: llvm.shufflevector {{.*}} [0, 16, 1, 17, 2, 18, {{.*}}] : vector<16xbf16>
        // CHECK: llvm.bitcast {{.*}} : vector<16xi32> to vector<32xbf16>
        // CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"({{.*}}) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
        // CHECK-NOT: llvm.intr.fmuladd
    """)


# ------------------------------------------------------------------ exp / exp2
EXPONENTIALS = """
#id = affine_map<(d0) -> (d0)>
func.func @exponentials(%x: tensor<{n}xf32>, %e: tensor<{n}xf32>, %e2: tensor<{n}xf32>, %p2: tensor<{n}xf32>)
    -> (tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>) {{
  %two = arith.constant 2.0 : f32
  %r:3 = linalg.generic {{indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}}
      ins(%x : tensor<{n}xf32>) outs(%e, %e2, %p2 : tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>) {{
  ^bb0(%v: f32, %o1: f32, %o2: f32, %o3: f32):
    %a = math.exp %v : f32
    %b = math.exp2 %v : f32
    %c = math.powf %two, %v : f32
    linalg.yield %a, %b, %c : f32, f32, f32
  }} -> (tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>)
  return %r#0, %r#1, %r#2 : tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>
}}
"""


def _ulps(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Error in units of the last place of the float32 result ``want`` (float64)."""
    ulp = torch.finfo(torch.float32).eps * want.abs().clamp_min(torch.finfo(torch.float32).tiny)
    return (got.double() - want).abs() / ulp


def test_exp_and_exp2_are_vector_polynomials_within_two_ulp() -> None:
    specials = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 88.72, 88.73, -87.3, -100.0,
                             -104.0, -149.0, -150.5, 127.9, 128.0, 1e-30, -1e-30])
    x = torch.cat([torch.linspace(-110.0, 110.0, 1 << 16), torch.randn(1 << 14) * 10, specials])
    n = x.numel()
    text = EXPONENTIALS.format(n=n)
    assert "@expf" not in lower_module(text, "exponentials", threads=1)
    exp, exp2, pow2 = compile_module(text, "exponentials", threads=1)(x, torch.empty(n), torch.empty(n), torch.empty(n))
    for got, want in ((exp, torch.exp(x.double())), (exp2, torch.exp2(x.double())), (pow2, torch.exp2(x.double()))):
        rounded = want.float()  # infinities and zeros where float32 overflows and underflows
        normal = torch.isfinite(rounded) & (rounded.abs() >= torch.finfo(torch.float32).tiny)
        assert _ulps(got[normal], want[normal]).max() <= 2
        subnormal = torch.isfinite(rounded) & ~normal
        assert ((got[subnormal].double() - want[subnormal]).abs() <= 2 * 2.0**-149).all()
        assert torch.equal(torch.isinf(got), torch.isinf(rounded)) and torch.equal(got.isnan(), x.isnan())


CUBE = """
#id = affine_map<(d0) -> (d0)>
func.func @cube_{n}(%x: tensor<{n}xf32>, %out: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %three = arith.constant 3 : i64
  %r = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel"]}}
      ins(%x : tensor<{n}xf32>) outs(%out : tensor<{n}xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %c = math.fpowi %v, %three : f32, i64
    linalg.yield %c : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


def test_modules_needing_the_same_generated_power_function_compile_one_after_another() -> None:
    # convert-math-to-funcs remembers the functions it generated; a pass instance reused
    # for a second module called the first module's (freed) function and crashed.
    for n in (128, 256, 384):
        x = torch.randn(n)
        (got,) = compile_module(CUBE.format(n=n), f"cube_{n}", threads=1)(x, torch.empty(n))
        torch.testing.assert_close(got, x * x * x)


POWERS = """
#id = affine_map<(d0) -> (d0)>
func.func @powers(%x: tensor<{n}xf32>, %y: tensor<{n}xf32>, %o1: tensor<{n}xf32>, %o2: tensor<{n}xf32>,
                  %o3: tensor<{n}xf32>, %o4: tensor<{n}xf32>)
    -> (tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>) {{
  %three = arith.constant 3.0 : f32
  %minus_two = arith.constant -2.0 : f32
  %half_odd = arith.constant 2.5 : f32
  %r:4 = linalg.generic {{indexing_maps = [#id, #id, #id, #id, #id, #id], iterator_types = ["parallel"]}}
      ins(%x, %y : tensor<{n}xf32>, tensor<{n}xf32>) outs(%o1, %o2, %o3, %o4 : tensor<{n}xf32>, tensor<{n}xf32>,
      tensor<{n}xf32>, tensor<{n}xf32>) {{
  ^bb0(%v: f32, %w: f32, %a: f32, %b: f32, %c: f32, %d: f32):
    %p1 = math.powf %v, %three : f32
    %p2 = math.powf %v, %minus_two : f32
    %p3 = math.powf %v, %half_odd : f32
    %p4 = math.powf %v, %w : f32
    linalg.yield %p1, %p2, %p3, %p4 : f32, f32, f32, f32
  }} -> (tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>)
  return %r#0, %r#1, %r#2, %r#3 : tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>, tensor<{n}xf32>
}}
"""


def test_constant_integral_powers_are_multiplications_and_other_powers_stay_powers() -> None:
    """``x ** 3`` becomes a product (as torch computes it); ``x ** 2.5`` and ``x ** y`` stay
    ``powf``, whose upstream expansion ``exp(y * log(x))`` is NaN for a negative base with an
    integral ``y``, and so does ``x ** -2``, which the upstream expansion makes ``-inf`` at 0."""
    n = 4096

    def expand(module: ir.Module) -> int:
        replaced = integral_powers_as_fpowi(module)
        PassManager.parse("builtin.module(func.func(math-expand-ops{ops=fpowi}))").run(module.operation)
        return replaced

    replaced, expanded = _transformed(POWERS.format(n=16), expand)
    assert replaced == 1
    run_filecheck(expanded, """
        // CHECK: ^bb0(%[[V:[a-z_0-9]+]]: f32, %[[W:[a-z_0-9]+]]: f32,
        // CHECK-NEXT: %[[SQUARE:.*]] = arith.mulf %[[V]], %[[V]] : f32
        // CHECK-NEXT: %[[CUBE:.*]] = arith.mulf %[[SQUARE]], %[[V]] : f32
        // CHECK-NEXT: math.powf %[[V]], %{{.*}} : f32
        // CHECK-NEXT: math.powf %[[V]], %{{.*}} : f32
        // CHECK-NEXT: math.powf %[[V]], %[[W]] : f32
        // CHECK-NOT: math.fpowi
    """)
    x = torch.cat([torch.randn(n - 8) * 4, torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"),
                                                         -2.0, 1e-13, -3e12])])
    y = torch.cat([torch.randint(-4, 5, (n // 2,)).float(), torch.randn(n - n // 2)])
    got = compile_module(POWERS.format(n=n), "powers", threads=1)(x, y, *(torch.empty(n) for _ in range(4)))
    torch.testing.assert_close(got[0], torch.pow(x, 3), rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(got[1], torch.pow(x, -2), rtol=3e-7, atol=0, equal_nan=True)
    torch.testing.assert_close(got[2], torch.pow(x, 2.5), rtol=1e-6, atol=0, equal_nan=True)
    torch.testing.assert_close(got[3], torch.pow(x, y), rtol=1e-6, atol=1e-30, equal_nan=True)


def test_geglu_reads_its_second_half_as_vectors_and_cubes_by_multiplying() -> None:
    """``x[tile_t, tile_h.index + hidden]`` is a moved slice, loaded like the first half (one
    vector load per register block, no lane-by-lane gather); ``pow(a, 3)`` is ``a * a * a``."""
    text = example_module("geglu", (torch.randn(64, 512),), block_sizes=[16, 256])
    elements = host_vector_shape().elements
    lowered = lower_module(text, "geglu", threads=1, in_place=True)
    run_filecheck(lowered, f"""
        // CHECK-LABEL: llvm.func @geglu(
        // CHECK: %[[A:.*]] = llvm.load %{{{{.*}}}} : !llvm.ptr -> vector<{elements}xf32>
        // CHECK: %[[B:.*]] = llvm.load %{{{{.*}}}} : !llvm.ptr -> vector<{elements}xf32>
        // CHECK-NEXT: %[[SQUARE:.*]] = llvm.fmul %[[A]], %[[A]] : vector<{elements}xf32>
        // CHECK-NEXT: llvm.fmul %[[SQUARE]], %[[A]] : vector<{elements}xf32>
        // CHECK: llvm.fmul %{{{{.*}}}}, %[[B]] : vector<{elements}xf32>
        // CHECK-LABEL: llvm.func @_mlir_ciface_geglu(
    """)
    assert "powf" not in lowered and "-> f32" not in lowered.split("llvm.func @_mlir_ciface_geglu")[0]


# ------------------------------------------------------------------ in-place destinations
REVERSE_ADD = """
func.func @reverse_add(%x: tensor<64xf32>, %y: tensor<64xf32>, %out: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (63 - d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%x, %y : tensor<64xf32>, tensor<64xf32>) outs(%out : tensor<64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}
"""


def test_in_place_destination_is_written_and_returned_as_the_same_tensor() -> None:
    fn = compile_module(REVERSE_ADD, "reverse_add", in_place=True)
    assert fn.held_by == (2,)
    x, y, out = torch.randn(64), torch.randn(64), torch.empty(64)
    x_before, y_before = x.clone(), y.clone()
    (got,) = fn(x, y, out)
    assert got is out and torch.equal(out, x.flip(0) + y)
    assert torch.equal(x, x_before) and torch.equal(y, y_before)


def test_in_place_destination_that_is_not_contiguous_is_written_back() -> None:
    fn = compile_module(REVERSE_ADD, "reverse_add", in_place=True)
    x, y = torch.randn(64), torch.randn(64)
    out = torch.zeros(64, 2)[:, 0]  # every other element of its storage
    (got,) = fn(x, y, out)
    assert got is out and torch.equal(out, x.flip(0) + y)


def test_in_place_destination_sharing_memory_with_an_input_keeps_value_semantics() -> None:
    fn = compile_module(REVERSE_ADD, "reverse_add", in_place=True)
    x, y = torch.randn(64), torch.randn(64)
    expected = x.flip(0) + y
    (got,) = fn(x, y, x)  # written in place, the reversed reads would see half-written values
    assert got is x and torch.equal(x, expected)


def test_without_in_place_the_destination_is_left_alone() -> None:
    fn = compile_module(REVERSE_ADD, "reverse_add")
    assert fn.held_by == (None,)
    x, y, out = torch.randn(64), torch.randn(64), torch.full((64,), 7.0)
    (got,) = fn(x, y, out)
    assert got is not out and torch.equal(got, x.flip(0) + y) and (out == 7.0).all()


COUNT_INTO_BINS = """
func.func @count(%bins: tensor<6xi64>, %counts: tensor<4xi32>) -> tensor<4xi32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %one = arith.constant 1 : i32
  %r = scf.for %i = %c0 to %c6 step %c1 iter_args(%acc = %counts) -> (tensor<4xi32>) {
    %b64 = tensor.extract %bins[%i] : tensor<6xi64>
    %b = arith.index_cast %b64 : i64 to index
    %old = tensor.extract %acc[%b] : tensor<4xi32>
    %new = arith.addi %old, %one : i32
    %elt = tensor.from_elements %new : tensor<1xi32>
    %stored = tensor.insert_slice %elt into %acc[%b] [1] [1] : tensor<1xi32> into tensor<4xi32>
    scf.yield %stored : tensor<4xi32>
  }
  return %r : tensor<4xi32>
}
"""


def test_element_stores_update_the_carried_buffer_in_place() -> None:
    # A one-element slice store becomes tensor.insert, which computes the loop's tensor in
    # its carried buffer: one store per element, no copy of the whole tensor per iteration.
    text = lower_module(COUNT_INTO_BINS, "count", threads=1, in_place=True)
    assert text.count("llvm.store") == 1 and "malloc" not in text
    fn = compile_module(COUNT_INTO_BINS, "count", in_place=True)
    assert fn.held_by == (1,)
    bins, counts = torch.tensor([3, 0, 3, 1, 3, 0]), torch.zeros(4, dtype=torch.int32)
    (got,) = fn(bins, counts)
    assert got is counts and torch.equal(counts, torch.bincount(bins, minlength=4).to(torch.int32))


# ------------------------------------------------------------------ OpenMP workers
def test_parallel_tiles_keep_two_cores_busy() -> None:
    """In a fresh process: while parallel calls run, a thread other than the caller (a
    worker of torch's OpenMP runtime) accumulates CPU time (Linux: /proc/self/task)."""
    code = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, "tests")
        import torch
        from examples_util import load_example_by_name
        from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel

        def cpu_ticks():
            ticks = {}
            for tid in os.listdir("/proc/self/task"):
                fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                ticks[int(tid)] = int(fields[11]) + int(fields[12])  # utime + stime
            return ticks

        torch.set_num_threads(1)  # torch's ops start no worker: every worker is the kernel's
        add = load_example_by_name("add")
        x, y = torch.randn(2048, 2048), torch.randn(2048, 2048)
        want = x + y
        compiled = compile_kernel(add.KERNEL.bind((x, y)), threads=2)
        before = cpu_ticks()
        for _ in range(40):
            assert torch.equal(compiled(x, y), want)
        after = cpu_ticks()
        print(max((ticks - before.get(tid, 0) for tid, ticks in after.items() if tid != os.getpid()), default=0))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) > 0, out.stdout + out.stderr


def test_one_thread_needs_no_openmp() -> None:
    text = example_module("add", (torch.randn(1024, 1024), torch.randn(1024, 1024)))
    assert "omp." not in lower_module(text, "add", threads=1)
    assert "omp.parallel" in lower_module(text, "add", threads=2)


@pytest.mark.parametrize("pipeline", ["fast", "plain"])
def test_pipeline_and_thread_count_are_part_of_the_cache_key(pipeline: str) -> None:
    one = compile_module(REVERSE_ADD, "reverse_add", pipeline=pipeline, threads=1)
    assert compile_module(REVERSE_ADD, "reverse_add", pipeline=pipeline, threads=1) is one
    assert one.pipeline == pipeline
    if pipeline == "fast":
        assert compile_module(REVERSE_ADD, "reverse_add", threads=2) is not one
        assert compile_module(REVERSE_ADD, "reverse_add", threads=1, in_place=True) is not one
    else:
        with pytest.raises(ValueError, match="in_place needs the fast pipeline"):
            compile_module(REVERSE_ADD, "reverse_add", pipeline="plain", in_place=True)
