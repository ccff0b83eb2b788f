"""Backward kernels, as Helion's autodiff writes them, get the fast pipeline's vector code and
its numbers: a reduction folding ``acc - x`` is split across lanes like a sum, an op a
transform refuses keeps its loops without failing the others, and the pairing of lanes
passes over scalar reads of one element."""

from __future__ import annotations

import logging
from collections.abc import Callable

import helion
import pytest
import torch
from kernels import backward_kernels as bk

from helion_mlir import compile_kernel

BACKWARDS = {
    "softmax": (bk.softmax_backward, bk.softmax_backward_reference),
    "layer_norm": (bk.layer_norm_backward, bk.layer_norm_backward_reference),
}


def _compiled(kernel: helion.Kernel, args: tuple[object, ...], caplog: pytest.LogCaptureFixture) -> Callable:
    """The kernel through the fast pipeline, checked to have skipped none of its optimizations."""
    caplog.set_level(logging.DEBUG, logger="helion_mlir.runtime.cpu.pipelines.runner")
    compiled = compile_kernel(kernel.bind(args), pipeline="fast")
    assert "skipped" not in caplog.text
    return compiled


@pytest.mark.parametrize(
    ("name", "shape", "block"),
    [("softmax", (64, 32), 16), ("layer_norm", (64, 32), 16), ("layer_norm", (37, 50), 8)],
    ids=["softmax-divisible", "layer_norm-divisible", "layer_norm-ragged"],
)
def test_a_row_backward_folding_a_negated_sum_is_vectorized_and_right(
    name: str, shape: tuple[int, int], block: int, caplog: pytest.LogCaptureFixture
) -> None:
    fn, reference = BACKWARDS[name]
    grad_out, x = torch.randn(*shape), torch.randn(*shape)
    kernel = helion.kernel(fn.fn, config=helion.Config(block_sizes=[block]))
    got = _compiled(kernel, (grad_out, x), caplog)(grad_out, x)
    torch.testing.assert_close(got, reference(grad_out, x), rtol=1e-5, atol=1e-5)


def test_a_logsumexp_backward_is_vectorized_and_right(caplog: pytest.LogCaptureFixture) -> None:
    grad_out, x = torch.randn(64), torch.randn(64, 32)
    got = _compiled(bk.logsumexp_backward, (grad_out, x), caplog)(grad_out, x)
    torch.testing.assert_close(got, bk.logsumexp_backward_reference(grad_out, x), rtol=1e-5, atol=1e-5)


def test_a_gated_recurrence_over_two_heads_gets_the_fast_code(caplog: pytest.LogCaptureFixture) -> None:
    """The gates' last dim is 2 (two heads): their scalar reads are not pairs of lanes."""
    k, v, gate = torch.randn(2, 45, 2, 16) * 0.3, torch.randn(2, 45, 2, 32), -torch.rand(2, 45, 2)
    kernel = helion.kernel(bk.gated_state_recurrence.fn, config=helion.Config(block_sizes=[16]))
    got = _compiled(kernel, (k, v, gate, 16), caplog)(k, v, gate, 16)
    torch.testing.assert_close(got, bk.gated_state_recurrence_reference(k, v, gate, 16), rtol=1e-5, atol=1e-5)
