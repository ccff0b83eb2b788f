"""A top-level ``hl.grid(begin, end, step)`` visits ``range(begin, end, step)`` per
dimension, as Python's ``range`` and Helion's reference mode do, with a constant step, a
step per dimension or a step the caller passes; a negative constant step is refused (scf.for
steps upward only; Helion itself refuses a step of zero)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from examples_util import load_example

from helion_mlir import HelionMLIRError
from helion_mlir.runtime.reference import reference_kernel

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "grid_step_kernels.py")


@pytest.mark.parametrize("n", [16, 17])
def test_a_stepped_grid_writes_every_other_element_between_its_bounds(n: int) -> None:
    x = torch.randn(n)
    out = KERNELS.every_other_doubled(x)
    expected = torch.zeros(n)
    expected[1:n - 1:2] = x[1:n - 1:2] * 2
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(8, 9), (7, 10)])
def test_a_grid_steps_each_dimension_by_its_own_step(shape: tuple[int, int]) -> None:
    x = torch.randn(*shape)
    out = KERNELS.strided_cells_negated(x)
    expected = torch.zeros(shape)
    expected[::2, ::3] = -x[::2, ::3]
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(out, reference_kernel(KERNELS.strided_cells_negated)(x), rtol=0, atol=0)


def test_a_step_the_caller_passes_is_honoured_on_each_call() -> None:
    x = torch.randn(23)
    for k in (3, 1, 5, 30):
        out = KERNELS.every_kth_plus_one(x, k)
        expected = torch.zeros(23)
        expected[::k] = x[::k] + 1
        torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_a_negative_step_is_refused() -> None:
    with pytest.raises(HelionMLIRError, match="step -2.*must be positive"):
        KERNELS.negative_step(torch.randn(8))
