"""The last tile of a size its block does not divide is peeled off its loop on the fast pipeline
(``runtime/cpu/rewrites/tensor/tile_size_bounds.py``, upstream ``transform.loop.peel``): the full tiles get
static sizes, with no padding copy, and only the last one is padded; a tile grid of many rows
is parallel over its rows, one of few rows stays one parallel nest."""

from __future__ import annotations

import pytest
import torch
from fast_pipeline_util import after_step, example_module
from filecheck_util import run_filecheck

from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.rewrites.tensor.tile_size_bounds import peel_partial_tiles, tile_sizes_as_affine_min
from helion_mlir.verify import parse_module

pytestmark = pytest.mark.usefixtures("parallel_even_when_small")


def test_full_row_tiles_are_static_and_only_the_last_is_padded(tmp_path, monkeypatch) -> None:
    """37 rows in tiles of 16: two full tiles of [16, 128] read straight from the input in
    parallel, then the last 5 rows padded to a block of 16 on their own."""
    text = example_module("softmax_one_pass", (torch.randn(37, 128),), block_sizes=[16])
    run_filecheck(after_step(tmp_path, monkeypatch, text, "softmax_one_pass", "parallelize-tile-loops"), """
        // CHECK-LABEL: func.func @softmax_one_pass(
        // CHECK: scf.forall (%[[ROW:.*]]) = (0) to (32) step (16)
        // CHECK: %[[TILE:.*]] = tensor.extract_slice %arg0[%[[ROW]], 0] [16, 128] [1, 1] : tensor<37x128xf32> to tensor<16x128xf32>
        // CHECK-NOT: tensor.insert_slice %{{.*}} into %{{.*}}[0, 0]
        // CHECK: scf.forall.in_parallel
        // CHECK: tensor.extract_slice %arg0[32, 0] [5, 128] [1, 1] : tensor<37x128xf32> to tensor<5x128xf32>
        // CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, 0] [5, 128] [1, 1] : tensor<5x128xf32> into tensor<16x128xf32>
        // CHECK-LABEL: // LOWERED
    """)


def test_a_ragged_grid_of_few_rows_stays_one_parallel_nest_with_its_rows_peeled(tmp_path, monkeypatch) -> None:
    """37x300 in [16, 128] tiles: the rows' last tile is peeled, the columns' is not (3 row tiles
    are too few to share between workers; the grid stays one parallel nest over both)."""
    text = example_module("bias_gelu", (torch.randn(37, 300), torch.randn(300)), block_sizes=[16, 128])
    run_filecheck(after_step(tmp_path, monkeypatch, text, "bias_gelu", "parallelize-tile-loops"), """
        // CHECK-LABEL: func.func @bias_gelu(
        // CHECK: scf.forall (%{{.*}}, %[[COLUMN:.*]]) = (0, 0) to (32, 300) step (16, 128)
        // CHECK: affine.min #{{.*}}(%[[COLUMN]])
        // CHECK: tensor.extract_slice %arg0[%{{.*}}, %[[COLUMN]]] [16, %{{.*}}] [1, 1] : tensor<37x300xf32> to tensor<16x?xf32>
        // CHECK: scf.forall.in_parallel
        // CHECK: tensor.extract_slice %arg0[32, %{{.*}}] [5, %{{.*}}] [1, 1] : tensor<37x300xf32> to tensor<5x?xf32>
        // CHECK-LABEL: // LOWERED
    """)


def test_a_ragged_grid_of_many_rows_is_peeled_in_both_dimensions_and_parallel_over_its_rows(
        tmp_path, monkeypatch) -> None:
    """130x300 in [16, 128] tiles (8 full row tiles): each row of tiles stores two full [16, 128]
    column tiles in a loop, then its last 44 columns, all into the rows' own [16, 300] slice,
    which the parallel loop over rows inserts once; no full tile is padded."""
    text = example_module("bias_gelu", (torch.randn(130, 300), torch.randn(300)), block_sizes=[16, 128])
    run_filecheck(after_step(tmp_path, monkeypatch, text, "bias_gelu", "parallelize-tile-loops"), """
        // CHECK-LABEL: func.func @bias_gelu(
        // CHECK: scf.forall (%[[ROW:.*]]) = (0) to (128) step (16) shared_outs(%[[OUT:.*]] = %arg2)
        // CHECK: %[[OWN:.*]] = tensor.extract_slice %[[OUT]][%[[ROW]], 0] [16, 300] [1, 1]
        // CHECK: %[[FULL:.*]] = scf.for %[[COLUMN:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ROWS:.*]] = %[[OWN]]) -> (tensor<16x300xf32>)
        // CHECK: tensor.extract_slice %arg0[%[[ROW]], %[[COLUMN]]] [16, 128] [1, 1] : tensor<130x300xf32> to tensor<16x128xf32>
        // CHECK: tensor.insert_slice %{{.*}} into %[[ROWS]][0, %[[COLUMN]]] [16, 128] [1, 1] : tensor<16x128xf32> into tensor<16x300xf32>
        // CHECK: tensor.extract_slice %arg0[%[[ROW]], 256] [16, 44] [1, 1] : tensor<130x300xf32> to tensor<16x44xf32>
        // CHECK: %[[LAST:.*]] = tensor.insert_slice %{{.*}} into %[[FULL]][0, 256] [16, 44] [1, 1] : tensor<16x44xf32> into tensor<16x300xf32>
        // CHECK: scf.forall.in_parallel
        // CHECK-NEXT: tensor.parallel_insert_slice %[[LAST]] into %[[OUT]][%[[ROW]], 0] [16, 300] [1, 1]
        // CHECK-LABEL: // LOWERED
    """)


_LOOP = """
func.func @f(%n: index) -> index {{
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c8 = arith.constant 8 : index
  %total = scf.for %i = %c0 to %n step %c16 iter_args(%acc = %c0) -> (index) {{
    %left = arith.subi %n, %i : index
    %size = arith.minsi {operands} : index
    %next = arith.addi %acc, %size : index
    scf.yield %next : index
  }}
  return %total : index
}}
"""


@pytest.mark.parametrize(("operands", "raised"), [
    ("%left, %c16", 1), ("%c16, %left", 1), ("%left, %c8", 0),
], ids=["size-then-step", "step-then-size", "not-the-step"])
def test_only_a_tile_size_of_its_own_loop_becomes_affine_min(operands, raised) -> None:
    with mlir_session():
        module = parse_module(_LOOP.format(operands=operands), what="test module")
        assert tile_sizes_as_affine_min(module) == raised
        assert module.operation.verify()
        if raised:
            run_filecheck(str(module), """
                // CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[N:[^ ]*]] step %[[STEP:[^ ]*]]
                // CHECK: affine.min #{{.*}}(%[[I]])[%[[N]], %[[STEP]]]
                // CHECK-NOT: arith.minsi
            """)


def test_loops_with_nothing_to_peel_or_an_unknown_step_keep_the_module_valid() -> None:
    """A step of 1 (every trip whole) is not given to the peeling (upstream refuses such a loop,
    which failed the compilation); a step known only at run time is, and whether upstream peels
    it or not, the module stays valid (a refusal leaves the loop as it was)."""
    text = """
    func.func @f(%n: index) -> index {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %total = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %c0) -> (index) {
        %left = arith.subi %n, %i : index
        %size = arith.minsi %left, %c1 : index
        %next = arith.addi %acc, %size : index
        scf.yield %next : index
      }
      %again = scf.for %i = %c0 to %n step %n iter_args(%acc = %total) -> (index) {
        %left = arith.subi %n, %i : index
        %size = arith.minsi %left, %n : index
        %next = arith.addi %acc, %size : index
        scf.yield %next : index
      }
      return %again : index
    }
    """
    with mlir_session():
        module = parse_module(text, what="test module")
        assert peel_partial_tiles(module) == 1  # the second loop: a run-time step, given to the peeling
        assert module.operation.verify()
        assert str(module).count("scf.for") >= 2


def test_a_loop_with_a_run_time_bound_is_peeled_at_no_less_than_its_lower_bound() -> None:
    """Upstream peeling splits at ``n - (n - 0) mod 16``, -48 for ``n = -40``: its last tile would
    then run once at offset -48 in a loop that runs no tile. The bound is raised to the lower
    bound first, for the loop and its tile sizes, so both loops of the peeled pair are empty."""
    with mlir_session():
        module = parse_module(_LOOP.format(operands="%left, %c16"), what="test module")
        assert peel_partial_tiles(module) == 1
        assert module.operation.verify()
        run_filecheck(str(module), """
            // CHECK: %[[UB:.*]] = arith.maxsi %arg0, %c0 : index
            // CHECK: scf.for %{{.*}} = %c0 to %[[SPLIT:[^ ]*]] step %c16
            // CHECK: scf.for %[[I:.*]] = %[[SPLIT]] to %[[UB]] step %c16
            // CHECK: affine.apply #{{.*}}(%[[I]])[%[[UB]]]
        """)
