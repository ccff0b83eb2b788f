"""Parameters the host code rebinds to views (slices, ``transpose``, ``reshape``, ``view``,
``expand``) before the tile loops: the compiled function takes the views the host code
passes, with their shapes and strides, for static and dynamic sizes and every output type."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from examples_util import load_example

from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "host_view_kernels.py")
OUTPUT_TYPES = ["linalg-on-tensors", "stablehlo", "raw", "tosa"]


def _args() -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(5)
    m, n = 13, 20
    return (torch.randn(n, m, generator=gen), torch.randn(m * n, generator=gen), torch.randn(m + 1, n + 2, generator=gen),
            torch.randn(m * n, generator=gen), torch.randn(1, n, generator=gen))


def _expected(a, b, c, d, bias):  # type: ignore[no-untyped-def]
    m, n = a.size(1), a.size(0)
    return a.t() * 2.0 + b.view(m, n) - c[1:, :-2] + d.view(m, n) * bias


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_views_of_parameters_made_on_the_host_are_what_the_device_code_reads(output_type: str) -> None:
    args = _args()
    compiled = compile_kernel(KERNELS.views_static.bind(args), output_type=output_type)
    header = next(line for line in compiled.mlir.splitlines() if "func.func" in line)
    assert "%a: tensor<13x20xf32>, %b: tensor<13x20xf32>, %c: tensor<13x20xf32>" in header, header
    torch.testing.assert_close(compiled(*args), _expected(*args))


def test_views_of_parameters_with_dynamic_sizes_bind_the_parameters_sizes_through_the_views() -> None:
    args = _args()
    compiled = compile_kernel(KERNELS.views_dynamic.bind(args))
    torch.testing.assert_close(compiled(*args), _expected(*args))
    gen = torch.Generator().manual_seed(6)
    m, n = 7, 11
    other = (torch.randn(n, m, generator=gen), torch.randn(m * n, generator=gen),
             torch.randn(m + 1, n + 2, generator=gen), torch.randn(m * n, generator=gen), torch.randn(1, n, generator=gen))
    torch.testing.assert_close(compiled(*other), _expected(*other))


def test_a_store_through_a_rebound_slice_writes_the_callers_tensor() -> None:
    out, x = torch.zeros(9, 20), torch.randn(8, 20)
    compiled = compile_kernel(KERNELS.shift_into.bind((out.clone(), x)))
    got = out.clone()
    compiled(got, x)
    assert torch.equal(got[0], torch.zeros(20))
    torch.testing.assert_close(got[1:], x + 1.0)
