"""Pairs taken apart by ``hl.split`` and put together by ``hl.join`` on the fast pipeline: read
and written as contiguous vectors (``runtime/cpu/rewrites/vector/interleaved_pairs.py``), and the same numbers
as the plain pipeline's element-by-element moves for any shape, tile and thread count."""

from __future__ import annotations

import helion
import pytest
import torch
from examples_util import load_example_by_name
from fast_pipeline_util import after_step, example_module
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st

from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.engine import compile_module
from helion_mlir.runtime.cpu.rewrites.vector.interleaved_pairs import (
    move_pairs_contiguously,
)
from helion_mlir.runtime.cpu.rewrites.tensor.vectorize_tiles import host_vector_shape
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.verify import parse_module

pytestmark = pytest.mark.usefixtures("parallel_even_when_small")

THREADS = st.sampled_from([1, 2])


def _kernel(name: str, static_shapes: bool = True, **config: object) -> helion.Kernel:
    return helion.kernel(load_example_by_name(name).KERNEL.fn, config=helion.Config(**config),
                         static_shapes=static_shapes)


def test_one_lane_of_the_pairs_is_a_contiguous_read_and_a_deinterleave(tmp_path, monkeypatch) -> None:
    """rope's ``[seq, 16, 2]`` tile: each half is taken from one read of 32 contiguous elements
    (the stride-2 read it replaces was lowered to one scalar load per lane)."""
    text = example_module("rope", (torch.randn(64, 32), 10000.0), block_sizes=[16])
    run_filecheck(after_step(tmp_path, monkeypatch, text, "rope", "move-pairs-contiguously"), """
        // CHECK-LABEL: func.func @rope(
        // CHECK-NOT: permutation_map
        // CHECK: %[[FLAT:.*]] = tensor.collapse_shape %{{.*}} {{\\[\\[}}0], [1, 2]] : tensor<64x16x2xf32> into tensor<64x32xf32>
        // CHECK: %[[PAIRS:.*]] = vector.transfer_read %[[FLAT]][%{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<64x32xf32>, vector<32xf32>
        // CHECK: vector.deinterleave %[[PAIRS]] : vector<32xf32> -> vector<16xf32>
        // CHECK-NOT: permutation_map
        // CHECK-LABEL: // LOWERED
        // CHECK: %[[LOADED:.*]] = llvm.load %{{.*}} : !llvm.ptr -> vector<32xf32>
        // CHECK: llvm.shufflevector %[[LOADED]], %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
        // CHECK: llvm.shufflevector %[[LOADED]], %{{.*}} [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31]
    """)


def test_joined_halves_are_interleaved_and_stored_whole_into_the_output_tile(tmp_path, monkeypatch) -> None:
    """The two insertions of ``hl.join`` become a loop storing one interleaved pair of registers
    per step into the output's tile itself (no tile buffer copied into the output afterwards)."""
    lanes = host_vector_shape().lanes
    text = example_module("rope", (torch.randn(256, 128), 10000.0), block_sizes=[16])
    run_filecheck(after_step(tmp_path, monkeypatch, text, "rope", "move-pairs-contiguously"), f"""
        // CHECK-LABEL: func.func @rope(
        // CHECK: scf.forall {{{{.*}}}} shared_outs(%[[OUT:.*]] = %{{{{.*}}}})
        // CHECK-NOT: tensor.empty() : tensor<16x64x2xf32>
        // CHECK: %[[TILE:.*]] = tensor.extract_slice %[[OUT]][%{{{{.*}}}}, 0, 0] [16, 64, 2] [1, 1, 1]
        // CHECK: tensor.collapse_shape %[[TILE]] {{{{\\[\\[}}}}0], [1, 2]] : tensor<16x64x2xf32> into tensor<16x128xf32>
        // CHECK: scf.for
        // CHECK: scf.for
        // CHECK: %[[BOTH:.*]] = vector.interleave %{{{{.*}}}}, %{{{{.*}}}} : vector<{lanes}xf32> -> vector<{2 * lanes}xf32>
        // CHECK: vector.transfer_write %[[BOTH]], %{{{{.*}}}}[%{{{{.*}}}}, %{{{{.*}}}}] {{in_bounds = [true]}} : vector<{2 * lanes}xf32>, tensor<16x128xf32>
        // CHECK: tensor.expand_shape
        // CHECK: tensor.parallel_insert_slice
        // CHECK-NOT: tensor.insert_slice {{{{.*}}}} [1, 1, 1] : tensor<16x64xf32> into tensor<16x64x2xf32>
        // CHECK-LABEL: // LOWERED
        // CHECK-LABEL: llvm.func @rope(
        // CHECK: %[[PAIRED:.*]] = llvm.shufflevector %{{{{.*}}}}, %{{{{.*}}}} [0, {lanes}, 1, {lanes + 1}, 2, {lanes + 2},
        // CHECK: llvm.store %[[PAIRED]], %{{{{.*}}}} {{{{.*}}}} : vector<{2 * lanes}xf32>, !llvm.ptr
    """)


def test_a_join_of_tiles_of_run_time_size_is_emitted_with_their_sizes() -> None:
    """``hl.join`` under ``static_shapes=False``: the joined tensor and its two insertions take
    the halves' run-time sizes (they were printed as ``None``, and the module did not verify)."""
    example = load_example_by_name("rope_tables")
    args = example.make_args("ragged")
    compiled = compile_kernel(_kernel("rope_tables", static_shapes=False, block_sizes=[2, 8]).bind(args))
    torch.testing.assert_close(compiled(*args), example.reference(*args), **example.TOLERANCE)


@settings(max_examples=8)
@given(m=st.integers(1, 40), n=st.integers(1, 150), block_m=st.sampled_from([1, 2, 4, 8, 16]),
       block_n=st.sampled_from([1, 8, 16, 32, 64, 128]), static=st.booleans(), threads=THREADS)
def test_complex_products_are_identical_to_the_plain_pipeline(m, n, block_m, block_n, static, threads) -> None:
    """Moving pairs changes no arithmetic: the fast pipeline's results equal the plain one's bit for bit."""
    gen = torch.Generator().manual_seed(m * 1000 + n)
    a, b = torch.randn(m, n, 2, generator=gen), torch.randn(m, n, 2, generator=gen)
    kernel = _kernel("complex_multiply", static_shapes=static, block_sizes=[block_m, block_n])
    fast, plain = (compile_kernel(kernel.bind((a, b, 0.5)), pipeline=p, threads=threads)(a, b, 0.5)
                   for p in ("fast", "plain"))
    assert torch.equal(fast, plain)
    torch.testing.assert_close(fast, load_example_by_name("complex_multiply").reference(a, b, 0.5))


@settings(max_examples=8)
@given(batch_heads=st.sampled_from([(1, 1), (2, 3), (1, 4)]), seq=st.integers(1, 70),
       half=st.sampled_from([1, 3, 16, 24, 64]), block_bh=st.sampled_from([1, 2, 4]),
       block_s=st.sampled_from([1, 4, 16, 32]), dtype=st.sampled_from([torch.float32, torch.bfloat16]),
       static=st.booleans(), threads=THREADS)
def test_rotary_tables_match_torch_in_every_tile_and_dtype(batch_heads, seq, half, block_bh, block_s, dtype,
                                                            static, threads) -> None:
    example = load_example_by_name("rope_tables")
    q = torch.randn(*batch_heads, seq, 2 * half, generator=torch.Generator().manual_seed(seq)).to(dtype)
    cos, sin = example.tables(seq, 2 * half)
    kernel = _kernel("rope_tables", static_shapes=static, block_sizes=[block_bh, block_s])
    got = compile_kernel(kernel.bind((q, cos, sin)), threads=threads)(q, cos, sin)
    want = example.reference(q, cos, sin)
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, **tolerance)


JOINED_THEN_STORED_IN_A_LOOP = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %out: tensor<6x8x2xf32>) -> tensor<6x8x2xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %e = tensor.empty() : tensor<4x8x2xf32>
  %lane0 = tensor.insert_slice %a into %e[0, 0, 0] [4, 8, 1] [1, 1, 1] : tensor<4x8xf32> into tensor<4x8x2xf32>
  %joined = tensor.insert_slice %b into %lane0[0, 0, 1] [4, 8, 1] [1, 1, 1] : tensor<4x8xf32> into tensor<4x8x2xf32>
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %out) -> (tensor<6x8x2xf32>) {
    %s = tensor.insert_slice %joined into %acc[%i, 0, 0] [4, 8, 2] [1, 1, 1] : tensor<4x8x2xf32> into tensor<6x8x2xf32>
    scf.yield %s : tensor<6x8x2xf32>
  }
  return %r : tensor<6x8x2xf32>
}
"""


def test_a_joined_tile_stored_inside_a_later_loop_is_interleaved_into_a_buffer_of_its_own() -> None:
    """The output slice the tile goes to is known only inside the loop (its iteration argument
    and induction variable): the interleaved stores go to the join's own tile, which the loop
    then copies, and the module still verifies (the slice was once taken before the loop, from
    values defined only inside it)."""
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    expected = torch.zeros(6, 8, 2)
    for i in range(3):
        expected[i:i + 4] = torch.stack([a, b], -1)
    [got] = compile_module(JOINED_THEN_STORED_IN_A_LOOP, "f")(a, b, torch.zeros(6, 8, 2))
    torch.testing.assert_close(got, expected)
    with mlir_session():
        module = parse_module(JOINED_THEN_STORED_IN_A_LOOP)
        assert move_pairs_contiguously(module) == (0, 1)
        assert module.operation.verify()
        assert "tensor.extract_slice" not in str(module)
