"""Small fixed-size buffers on the stack (``promote-small-buffers-to-stack``), freed once per
iteration in a loop (``lower-allocation-scopes``).

A buffer allocated in a loop body, also in a branch there (a kernel's ``if log_target:``
choosing the tile), goes on the stack when no view of it outlives the iteration, and the
loop body saves and restores the stack pointer, so the stack does not grow with the trip
count. A buffer carried to the next iteration or returned, of a dynamic size, or past the
limits (per buffer, per scope) stays on the heap.
"""

from __future__ import annotations

import helion
import pytest
import torch
from examples_util import load_example_by_name
from fast_pipeline_util import example_module
from filecheck_util import run_filecheck

from helion_mlir import compile_kernel
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.engine import lower_module
from helion_mlir.runtime.cpu.rewrites.buffer.alloca_scopes import (
    lower_allocation_scopes,
)
from helion_mlir.runtime.cpu.rewrites.buffer.stack_buffers import (
    STACK_ALLOCATION_LIMIT,
    STACK_SCOPE_LIMIT,
    promote_small_buffers_to_stack,
)
from helion_mlir.verify import parse_module

# A row tile chosen by a flag in each iteration (yielded out of the branch, used in the body),
# summed by an inner loop that allocates nothing.
_BRANCH_TILE = """
func.func @branch_tile(%x: memref<64x256xf32>, %flag: i1, %out: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c64 step %c1 {
    %row = memref.subview %x[%i, 0] [1, 256] [1, 1] : memref<64x256xf32> to memref<256xf32, strided<[1], offset: ?>>
    %tile = scf.if %flag -> (memref<256xf32>) {
      %a = memref.alloc() : memref<256xf32>
      memref.copy %row, %a : memref<256xf32, strided<[1], offset: ?>> to memref<256xf32>
      scf.yield %a : memref<256xf32>
    } else {
      %b = memref.alloc() : memref<256xf32>
      linalg.fill ins(%zero : f32) outs(%b : memref<256xf32>)
      scf.yield %b : memref<256xf32>
    }
    %sum = scf.for %j = %c0 to %c256 step %c1 iter_args(%s = %zero) -> (f32) {
      %v = memref.load %tile[%j] : memref<256xf32>
      %t = arith.addf %s, %v : f32
      scf.yield %t : f32
    }
    memref.store %sum, %out[%i] : memref<64xf32>
  }
  return
}

func.func @parallel_tile(%x: memref<64x256xf32>, %out: memref<64x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.forall (%i) = (0) to (64) step (16) {
    %tile = memref.alloc() : memref<16x256xf32>
    scf.for %r = %c0 to %c16 step %c1 {
      %row = memref.alloc() : memref<256xf32>
      %src = memref.subview %tile[%r, 0] [1, 256] [1, 1] : memref<16x256xf32> to memref<256xf32, strided<[1], offset: ?>>
      memref.copy %src, %row : memref<256xf32, strided<[1], offset: ?>> to memref<256xf32>
    }
  }
  return
}
"""

_LIMIT_ELEMENTS = STACK_ALLOCATION_LIMIT // 4
_SCOPE_BUFFERS = STACK_SCOPE_LIMIT // STACK_ALLOCATION_LIMIT

# Buffers that must stay on the heap, and a scope given one more buffer than its limit holds.
_HEAP = f"""
func.func @carried(%n: index) -> memref<16xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = memref.alloc() : memref<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%buf = %init) -> (memref<16xf32>) {{
    %next = memref.alloc() : memref<16xf32>
    memref.copy %buf, %next : memref<16xf32> to memref<16xf32>
    scf.yield %next : memref<16xf32>
  }}
  return %r : memref<16xf32>
}}

func.func @returned_view() -> memref<4xf32, strided<[1], offset: 4>> {{
  %a = memref.alloc() : memref<16xf32>
  %v = memref.subview %a[4] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 4>>
  return %v : memref<4xf32, strided<[1], offset: 4>>
}}

func.func @dynamic_and_too_big(%n: index, %m: index, %out: memref<f32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %n step %c1 {{
    %d = memref.alloc(%m) : memref<?xf32>
    %big = memref.alloc() : memref<{_LIMIT_ELEMENTS + 1}xf32>
    memref.store %zero, %d[%c0] : memref<?xf32>
    memref.store %zero, %big[%c0] : memref<{_LIMIT_ELEMENTS + 1}xf32>
  }}
  return
}}

func.func @scope_budget(%n: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %n step %c1 {{
""" + "".join(f"""    %a{k} = memref.alloc() : memref<{_LIMIT_ELEMENTS}xf32>
    memref.store %zero, %a{k}[%c0] : memref<{_LIMIT_ELEMENTS}xf32>
""" for k in range(_SCOPE_BUFFERS + 1)) + """  }
  return
}
"""


def _promoted(text: str) -> tuple[int, str, str]:
    """How many buffers went on the stack, the module then, and after lowering the scopes."""
    with mlir_session():
        module = parse_module(text)
        promoted = promote_small_buffers_to_stack(module)
        assert module.operation.verify()
        after_promotion = str(module)
        lower_allocation_scopes(module)
        assert module.operation.verify()
        return promoted, after_promotion, str(module)


def test_buffers_of_loop_bodies_and_their_branches_go_on_the_stack_freed_each_iteration() -> None:
    promoted, after, lowered = _promoted(_BRANCH_TILE)
    assert promoted == 4
    run_filecheck(after, """
        // CHECK: scf.if
        // CHECK: memref.alloca() : memref<256xf32>
        // CHECK: } else {
        // CHECK: memref.alloca() : memref<256xf32>
    """)
    assert "memref.alloc(" not in after
    run_filecheck(lowered, """
        // CHECK-LABEL: func.func @branch_tile(
        // CHECK: scf.for
        // CHECK-NEXT: %[[SAVED:.*]] = llvm.intr.stacksave : !llvm.ptr
        // CHECK: memref.alloca()
        // CHECK: memref.alloca()
        // CHECK: scf.for
        // CHECK-NOT: llvm.intr.stack
        // CHECK: memref.store
        // CHECK-NEXT: llvm.intr.stackrestore %[[SAVED]] : !llvm.ptr
        // CHECK-NEXT: }
        // CHECK-NOT: llvm.intr.stack
        // CHECK: return
        // The parallel tile's buffer is freed by the alloca_scope convert-scf-to-openmp gives its body.
        // CHECK-LABEL: func.func @parallel_tile(
        // CHECK: scf.forall
        // CHECK-NEXT: memref.alloca() : memref<16x256xf32>
        // CHECK-NEXT: scf.for
        // CHECK-NEXT: %[[ROW_SAVED:.*]] = llvm.intr.stacksave
        // CHECK-NEXT: memref.alloca() : memref<256xf32>
        // CHECK: llvm.intr.stackrestore %[[ROW_SAVED]]
        // CHECK-NEXT: }
        // CHECK-NOT: llvm.intr.stack
    """)


def test_carried_returned_dynamic_and_oversized_buffers_stay_on_the_heap() -> None:
    promoted, after, lowered = _promoted(_HEAP)
    assert promoted == _SCOPE_BUFFERS
    run_filecheck(after, f"""
        // CHECK-LABEL: func.func @carried(
        // CHECK: memref.alloc() : memref<16xf32>
        // CHECK: scf.for
        // CHECK: memref.alloc() : memref<16xf32>
        // CHECK-LABEL: func.func @returned_view(
        // CHECK: memref.alloc() : memref<16xf32>
        // CHECK-LABEL: func.func @dynamic_and_too_big(
        // CHECK: memref.alloc(%{{{{.*}}}}) : memref<?xf32>
        // CHECK: memref.alloc() : memref<{_LIMIT_ELEMENTS + 1}xf32>
        // CHECK-LABEL: func.func @scope_budget(
        // CHECK-COUNT-{_SCOPE_BUFFERS}: memref.alloca() : memref<{_LIMIT_ELEMENTS}xf32>
        // CHECK: memref.alloc() : memref<{_LIMIT_ELEMENTS}xf32>
    """)
    assert lowered.count("llvm.intr.stacksave") == 1  # the scope_budget loop's alone


@pytest.fixture(scope="module")
def kl_div_text() -> str:
    """KL divergence in [16, 256] tiles (rows by column chunks), ``if log_target:`` in each chunk."""
    rows, cols = 37, 1000
    return example_module("kl_div_loss", (torch.randn(rows, cols), torch.randn(rows, cols), True, "none"),
                          block_sizes=[16, 256])


@pytest.mark.parametrize("threads", [1, 2])
def test_kl_divergence_chunks_allocate_nothing_on_the_heap(kl_div_text: str, threads: int) -> None:
    run_filecheck(lower_module(kl_div_text, "kl_div_loss", threads=threads, in_place=True), """
        // CHECK-LABEL: llvm.func @kl_div_loss(
        // CHECK-NOT: llvm.call @malloc
        // CHECK: %[[SAVED:.*]] = llvm.intr.stacksave
        // CHECK-NOT: llvm.call @malloc
        // CHECK: llvm.intr.stackrestore %[[SAVED]]
        // CHECK-NOT: llvm.call @malloc
        // CHECK-LABEL: llvm.func @_mlir_ciface_kl_div_loss(
    """)


@pytest.mark.parametrize("threads", [1, 2])
def test_kl_divergence_with_stack_tiles_matches_torch_for_both_targets(threads: int) -> None:
    example = load_example_by_name("kl_div_loss")
    kernel = helion.kernel(example.KERNEL.fn, config=helion.Config(block_sizes=[16, 256]))
    pred, target = (torch.randn(37, 1000).log_softmax(-1) for _ in range(2))
    compiled = compile_kernel(kernel, (pred, target, True, "none"), threads=threads)
    for log_target, given in ((True, target), (False, target.exp())):
        expected = torch.nn.functional.kl_div(pred, given, reduction="none", log_target=log_target).sum(-1)
        torch.testing.assert_close(compiled(pred, given, log_target, "none"), expected, **example.TOLERANCE)
