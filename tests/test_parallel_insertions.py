"""Parallel tiles whose outputs share a buffer before bufferization (``order-parallel-insertions``).

One-shot bufferization writes the ``tensor.parallel_insert_slice`` ops ending an
``scf.forall`` tile as copies in their order and misses that a copy into one output can
overwrite the buffer a later insertion reads (a value computed in place in that output's
slice). ``eliminate-empty-tensors`` makes such values out of a fill two reductions share,
as in a tile computing ``torch.max(x, dim)`` and ``torch.argmin``: the argmin came out as
the argmax. The rewrite puts such an insertion first, or copies its value when two
insertions each read the other's output.
"""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch
from filecheck_util import run_filecheck

from helion_mlir import compile_kernel
from helion_mlir.mlir_context import mlir_session, pass_manager
from helion_mlir.runtime.cpu.engine import compile_module
from helion_mlir.runtime.cpu.rewrites.tensor.parallel_insertions import (
    order_parallel_insertions,
)
from helion_mlir.verify import parse_module

# Two outputs of one tile from one fill, computed in the first output's slice (as
# eliminate-empty-tensors leaves the max.dim + argmin tile): o1 = x + 7, o2 = x - 7.
_SHARED_FILL = """
func.func @two_from_one_fill(%x: tensor<8xi64>, %a: tensor<8xi64>, %b: tensor<8xi64>) -> (tensor<8xi64>, tensor<8xi64>) {
  %c7 = arith.constant 7 : i64
  %r:2 = scf.forall (%i) = (0) to (8) step (4) shared_outs(%o1 = %a, %o2 = %b) -> (tensor<8xi64>, tensor<8xi64>) {
    %s = tensor.extract_slice %o1[%i] [4] [1] : tensor<8xi64> to tensor<4xi64>
    %in = tensor.extract_slice %x[%i] [4] [1] : tensor<8xi64> to tensor<4xi64>
    %f = linalg.fill ins(%c7 : i64) outs(%s : tensor<4xi64>) -> tensor<4xi64>
    %r1 = linalg.add ins(%in, %f : tensor<4xi64>, tensor<4xi64>) outs(%f : tensor<4xi64>) -> tensor<4xi64>
    %r2 = linalg.sub ins(%in, %f : tensor<4xi64>, tensor<4xi64>) outs(%f : tensor<4xi64>) -> tensor<4xi64>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %r1 into %o1[%i] [4] [1] : tensor<4xi64> into tensor<8xi64>
      tensor.parallel_insert_slice %r2 into %o2[%i] [4] [1] : tensor<4xi64> into tensor<8xi64>
    }
  }
  return %r#0, %r#1 : tensor<8xi64>, tensor<8xi64>
}
"""

# Each output computed in the other's slice: o1 = x + 7, o2 = x - 7; no order of the two
# insertions is right, one value needs a buffer of its own.
_CROSSED = """
func.func @crossed(%x: tensor<8xi64>, %a: tensor<8xi64>, %b: tensor<8xi64>) -> (tensor<8xi64>, tensor<8xi64>) {
  %c7 = arith.constant 7 : i64
  %r:2 = scf.forall (%i) = (0) to (8) step (4) shared_outs(%o1 = %a, %o2 = %b) -> (tensor<8xi64>, tensor<8xi64>) {
    %s1 = tensor.extract_slice %o1[%i] [4] [1] : tensor<8xi64> to tensor<4xi64>
    %s2 = tensor.extract_slice %o2[%i] [4] [1] : tensor<8xi64> to tensor<4xi64>
    %in = tensor.extract_slice %x[%i] [4] [1] : tensor<8xi64> to tensor<4xi64>
    %f1 = linalg.fill ins(%c7 : i64) outs(%s1 : tensor<4xi64>) -> tensor<4xi64>
    %f2 = linalg.fill ins(%c7 : i64) outs(%s2 : tensor<4xi64>) -> tensor<4xi64>
    %r1 = linalg.add ins(%in, %f1 : tensor<4xi64>, tensor<4xi64>) outs(%f2 : tensor<4xi64>) -> tensor<4xi64>
    %r2 = linalg.sub ins(%in, %f2 : tensor<4xi64>, tensor<4xi64>) outs(%f1 : tensor<4xi64>) -> tensor<4xi64>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %r1 into %o1[%i] [4] [1] : tensor<4xi64> into tensor<8xi64>
      tensor.parallel_insert_slice %r2 into %o2[%i] [4] [1] : tensor<4xi64> into tensor<8xi64>
    }
  }
  return %r#0, %r#1 : tensor<8xi64>, tensor<8xi64>
}
"""


def _ordered(text: str) -> tuple[int, str]:
    with mlir_session():
        module = parse_module(text)
        changed = order_parallel_insertions(module)
        assert module.operation.verify()
        return changed, str(module)


def test_an_insertion_reading_another_outputs_slice_goes_first() -> None:
    changed, text = _ordered(_SHARED_FILL)
    assert changed == 2  # both moved: the second to the front
    run_filecheck(text, """
        // CHECK: shared_outs(%[[O1:.*]] = %{{.*}}, %[[O2:.*]] = %{{.*}})
        // CHECK: %[[SUM:.*]] = linalg.add
        // CHECK: %[[DIFFERENCE:.*]] = linalg.sub
        // CHECK: scf.forall.in_parallel
        // CHECK-NEXT: tensor.parallel_insert_slice %[[DIFFERENCE]] into %[[O2]][
        // CHECK-NEXT: tensor.parallel_insert_slice %[[SUM]] into %[[O1]][
    """)


def test_insertions_reading_each_others_outputs_copy_one_value() -> None:
    changed, text = _ordered(_CROSSED)
    assert changed == 3  # one copy, two moves
    run_filecheck(text, """
        // CHECK: shared_outs(%[[O1:.*]] = %{{.*}}, %[[O2:.*]] = %{{.*}})
        // CHECK: %[[SUM:.*]] = linalg.add
        // CHECK: %[[DIFFERENCE:.*]] = linalg.sub
        // CHECK: %[[COPY:.*]] = bufferization.alloc_tensor() copy(%[[SUM]])
        // CHECK: scf.forall.in_parallel
        // CHECK-NEXT: tensor.parallel_insert_slice %[[DIFFERENCE]] into %[[O2]][
        // CHECK-NEXT: tensor.parallel_insert_slice %[[COPY]] into %[[O1]][
    """)


def test_a_tile_without_shared_buffers_keeps_its_insertions() -> None:
    text = _SHARED_FILL.replace("%s = tensor.extract_slice %o1[%i] [4] [1] : tensor<8xi64> to tensor<4xi64>",
                                "%s = tensor.empty() : tensor<4xi64>")
    assert _ordered(text)[0] == 0


@pytest.mark.parametrize("module", [_SHARED_FILL, _CROSSED], ids=["shared fill", "crossed"])
def test_outputs_computed_in_each_others_slices_come_out_right_on_two_threads(module: str) -> None:
    name = "two_from_one_fill" if module is _SHARED_FILL else "crossed"
    function = compile_module(module, name, threads=2)
    x = torch.arange(8, dtype=torch.int64) * 10
    plus, minus = function(x, torch.zeros(8, dtype=torch.int64), torch.zeros(8, dtype=torch.int64))
    assert torch.equal(plus, x + 7) and torch.equal(minus, x - 7)


def test_upstream_bufferization_alone_overwrites_the_later_insertions_value() -> None:
    """Pins the upstream behaviour the rewrite works around: if this starts failing, the
    bundled MLIR orders the copies itself and the rewrite may go."""
    with mlir_session():
        module = parse_module(_SHARED_FILL)
        pass_manager("builtin.module(one-shot-bufferize{bufferize-function-boundaries "
                     "function-boundary-type-conversion=identity-layout-map})").run(module.operation)
        text = str(module)
    run_filecheck(text, """
        // CHECK: %[[SLICE:.*]] = memref.subview %arg1
        // CHECK: linalg.sub {{.*}} outs(%[[SLICE]]
        // CHECK: memref.copy %{{.*}}, %{{.*}}
        // CHECK: memref.copy %[[SLICE]], %{{.*}}
    """)


@helion.kernel(config=helion.Config(block_sizes=[4]), static_shapes=False)
def row_max_and_argmin(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, _ = x.size()
    best = torch.empty([rows], dtype=x.dtype, device=x.device)
    best_at = torch.empty([rows], dtype=torch.int64, device=x.device)
    lowest_at = torch.empty([rows], dtype=torch.int64, device=x.device)
    for tile in hl.tile(rows):
        value, index = torch.max(x[tile, :], dim=-1)
        best[tile] = value
        best_at[tile] = index
        lowest_at[tile] = torch.argmin(x[tile, :], dim=-1)
    return best, best_at, lowest_at


@pytest.mark.parametrize("rows", [23, 64])
def test_max_dim_beside_argmin_in_parallel_tiles_gives_each_its_own_indices(rows: int) -> None:
    x = torch.randn(rows, 70)
    compiled = compile_kernel(row_max_and_argmin.bind((x,)), threads=2)
    best, best_at, lowest_at = compiled(x)
    assert torch.equal(best, x.amax(-1)) and torch.equal(best_at, x.argmax(-1))
    assert torch.equal(lowest_at, x.argmin(-1))
