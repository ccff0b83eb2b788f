"""Helion's autodiff (``helion.experimental.backward``) of kernels whose backward is a scan
over their inner loop runs on CPU: the scan graphs Helion builds name the CPU, not the CUDA
device torch's autograd would abort the process on, and the backward kernel, on the forward
kernel's backend, compiles through helion_mlir and gives torch autograd's gradients."""

from __future__ import annotations

from pathlib import Path

import helion
import pytest
import torch
from kernels import autodiff_kernels as ak

pytestmark = pytest.mark.slow  # AOT autograd of a scan and two compilations: seconds each

@pytest.fixture
def through_mlir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every module compiled is dumped; Helion's default backend stays Triton, so the backward
    kernel is ours only because its forward kernel is."""
    monkeypatch.delenv("HELION_BACKEND", raising=False)
    monkeypatch.setenv("HELION_MLIR_DUMP", str(tmp_path))
    return tmp_path

def _gradients(kernel: helion.Kernel, grad_out: torch.Tensor, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    kernel(*inputs)
    grads = helion.experimental.backward(kernel, grad_out, *inputs)
    return grads if isinstance(grads, tuple) else (grads,)

def _autograd(fn: object, grad_out: torch.Tensor, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    fn(*leaves).backward(grad_out)  # type: ignore[operator]
    return tuple(leaf.grad for leaf in leaves)

def test_a_two_pass_softmax_over_ragged_rows_differentiates_on_cpu(through_mlir: Path) -> None:
    kernel = helion.kernel(ak.softmax_two_pass.fn, backend="mlir", config=helion.Config(block_sizes=[8, 16]))
    x, grad_out = torch.randn(37, 48), torch.randn(37, 48)
    (got,) = _gradients(kernel, grad_out, x)
    (want,) = _autograd(lambda t: torch.softmax(t, 1), grad_out, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert list(through_mlir.glob("backward_kernel_*.mlir")), "the backward kernel did not compile through helion_mlir"
    assert helion.Settings().backend == "triton", "Helion's default backend is steered only inside backward()"

def test_a_matmul_then_rms_norm_differentiates_on_cpu(through_mlir: Path) -> None:
    kernel = helion.kernel(ak.matmul_rms_norm.fn, backend="mlir", config=helion.Config(block_sizes=[8, 32]))
    x, w, weight = torch.randn(24, 64), torch.randn(64, 16) * 0.2, torch.randn(16)
    grad_out = torch.randn(24, 16)
    got = _gradients(kernel, grad_out, x, w, weight)
    want = _autograd(ak.matmul_rms_norm_reference, grad_out, x, w, weight)
    for got_grad, want_grad in zip(got, want, strict=True):
        torch.testing.assert_close(got_grad, want_grad, rtol=1e-4, atol=1e-4)
    assert list(through_mlir.glob("backward_kernel_*.mlir"))
