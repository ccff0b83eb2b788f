"""A linalg op consuming a tensor an ``scf.if`` chooses is computed in both branches on the fast
pipeline (``runtime/cpu/rewrites/tensor/branch_consumers.py``), so that each branch fuses into one loop,
and only where that computes nothing twice; kernels with such options match torch."""

from __future__ import annotations

import helion
import pytest
import torch
from examples_util import load_example_by_name
from fast_pipeline_util import after_step
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st
from config_fuzz import random_configs
from kernels import row_kernels

from helion_mlir import generate_mlir
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.cpu.rewrites.tensor.branch_consumers import compute_consumers_in_branches
from helion_mlir.verify import parse_module

pytestmark = pytest.mark.usefixtures("parallel_even_when_small")


def _kl_kernel(static_shapes: bool = True, **config: object) -> helion.Kernel:
    example = load_example_by_name("kl_div_loss")
    return helion.kernel(example.KERNEL.fn, config=helion.Config(**config), static_shapes=static_shapes,
                         ignore_warnings=[helion.exc.TensorOperationInWrapper])


def _log_probabilities(rows: int, cols: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.log_softmax(torch.randn(rows, cols, generator=gen), -1) for _ in range(2))


def test_each_branch_of_an_option_reduces_its_own_elementwise_tile(tmp_path, monkeypatch) -> None:
    """KL divergence's ``if log_target:`` chooses a ``[16, 1024]`` tile that a row sum then reads:
    after the move and fusion, each branch is one reduction over the inputs yielding the
    ``[16]`` sums, and no branch yields a tile (it had a buffer of its own, read back)."""
    y_pred, y_true = _log_probabilities(64, 1024, 0)
    text = generate_mlir(_kl_kernel(block_sizes=[16, 1024]).bind((y_pred, y_true, True, "none")))
    run_filecheck(after_step(tmp_path, monkeypatch, text, "kl_div_loss", "func.func-linalg-fuse-elementwise-ops"), """
        // CHECK-LABEL: func.func @kl_div_loss(
        // CHECK: scf.if %{{.*}} -> (tensor<16xf32>)
        // CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins({{.*}}tensor<16x1024xf32>
        // CHECK: scf.yield %{{.*}} : tensor<16xf32>
        // CHECK: } else {
        // CHECK: math.log
        // CHECK: scf.yield %{{.*}} : tensor<16xf32>
        // CHECK-NOT: scf.yield %{{.*}} : tensor<16x1024xf32>
        // CHECK-LABEL: // LOWERED
    """)


_FILL = "  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>\n"
_COMPUTED = """  %init = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%e : tensor<8xf32>) {
  ^bb0(%o: f32):
    %v = arith.addf %o, %zero : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
"""


def _chosen_tile_summed(*, init_after_the_if: str = "", tile_also_returned: bool = False) -> str:
    """A row sum of the tile an ``scf.if`` chooses, its initial value filled before the
    ``scf.if`` (or made after it by ``init_after_the_if``), the tile also returned or not."""
    second, second_type = ("%t", "tensor<8x4xf32>") if tile_also_returned else ("%s", "tensor<8xf32>")
    return f"""
func.func @f(%c: i1, %a: tensor<8x4xf32>, %b: tensor<8x4xf32>) -> (tensor<8xf32>, {second_type}) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
{"" if init_after_the_if else _FILL}  %t = scf.if %c -> (tensor<8x4xf32>) {{
    scf.yield %a : tensor<8x4xf32>
  }} else {{
    scf.yield %b : tensor<8x4xf32>
  }}
{init_after_the_if}  %s = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}} ins(%t : tensor<8x4xf32>) outs(%init : tensor<8xf32>) {{
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  }} -> tensor<8xf32>
  return %s, {second} : tensor<8xf32>, {second_type}
}}
"""


@pytest.mark.parametrize(("text", "moved"), [
    (_chosen_tile_summed(), 1),
    (_chosen_tile_summed(tile_also_returned=True), 0),
    (_chosen_tile_summed(init_after_the_if=_FILL), 1),
    (_chosen_tile_summed(init_after_the_if=_COMPUTED), 0),
], ids=["only-use", "also-returned", "fill-after-the-if-moves-before-it", "computed-after-the-if"])
def test_a_consumer_moves_into_the_branches_only_when_nothing_runs_twice_or_out_of_order(text, moved) -> None:
    """Moved when the tile has no other use and the consumer's other operands exist before the
    ``scf.if`` or are views and fills that can be moved there; not when one is computed after it."""
    with mlir_session():
        module = parse_module(text, what="test module")
        assert compute_consumers_in_branches(module) == moved
        assert module.operation.verify()
        if moved:
            run_filecheck(str(module), """
                // CHECK: scf.if %{{.*}} -> (tensor<8xf32>)
                // CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<8x4xf32>)
                // CHECK: } else {
                // CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<8x4xf32>)
            """)


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 300), block_rows=st.sampled_from([1, 2, 8, 16]),
       block_cols=st.sampled_from([16, 64, 256]), log_target=st.booleans(),
       reduction=st.sampled_from(["none", "sum", "batchmean"]), static=st.booleans(), threads=st.sampled_from([1, 2]))
def test_kl_divergence_matches_torch_with_either_option(rows, cols, block_rows, block_cols, log_target, reduction,
                                                        static, threads) -> None:
    example = load_example_by_name("kl_div_loss")
    y_pred, y_true = _log_probabilities(rows, cols, rows * 1000 + cols)
    if not log_target:
        y_true = y_true.exp()
    args = (y_pred, y_true, log_target, reduction)
    kernel = _kl_kernel(static, block_sizes=[block_rows, block_cols])
    got = compile_kernel(kernel.bind(args), threads=threads)(*args)
    torch.testing.assert_close(got, example.reference(*args), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("smooth", [True, False], ids=["smoothed", "plain"])
def test_a_loss_with_an_option_matches_torch_under_helions_generated_configs(static, smooth) -> None:
    """A soft-target loss written as users write it (a label-smoothing option chosen by a bool
    argument, a module constant, a temperature, class weights) under configs from Helion's own
    generator: its ``if smooth:`` tile is summed in each branch, and its row statistics fused."""
    logits, targets = 3 * torch.randn(48, 320), torch.softmax(torch.randn(48, 320), -1)
    args = (logits, targets, torch.rand(320) + 0.5, smooth, 0.8)
    kernel = helion.kernel(row_kernels.soft_target_loss.fn, static_shapes=static)
    want = row_kernels.soft_target_loss_reference(*args)
    for config in random_configs(kernel.bind(args), seed=5 + static + 2 * smooth, count=4):
        got = compile_kernel(kernel.bind(args), config=config, threads=2)(*args)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m, c=config: f"{c}: {m}")


def test_a_loss_with_an_option_sums_each_branch_in_place(tmp_path, monkeypatch) -> None:
    """The soft-target loss's ``if smooth:`` yields each row block's weighted sums, not the
    ``[16, 320]`` target tile that products and a sum after the ``scf.if`` read back (the
    weights' broadcast and the sum's initial value, made after it, move before it)."""
    args = (torch.randn(48, 320), torch.softmax(torch.randn(48, 320), -1), torch.rand(320), True, 0.8)
    kernel = helion.kernel(row_kernels.soft_target_loss.fn, config=helion.Config(block_sizes=[16]), static_shapes=True)
    text = generate_mlir(kernel.bind(args))
    run_filecheck(after_step(tmp_path, monkeypatch, text, "soft_target_loss", "compute-consumers-in-branches"), """
        // CHECK-LABEL: func.func @soft_target_loss(
        // CHECK-NOT: -> (tensor<16x320xf32>)
        // CHECK: scf.if %{{.*}} -> (tensor<16xf32>)
        // CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<16x320xf32>)
        // CHECK: scf.yield %{{.*}} : tensor<16xf32>
        // CHECK: } else {
        // CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<16x320xf32>)
        // CHECK: scf.yield %{{.*}} : tensor<16xf32>
        // CHECK-NOT: -> (tensor<16x320xf32>)
        // CHECK-LABEL: // LOWERED
    """)
