"""``hl.dot`` with dynamic result dims (``static_shapes=False``): the zero accumulator it
starts from is sized by the operands' ``tensor.dim``, and one compiled kernel computes the
product for any sizes. (Helion pads a non-power-of-two ``dv`` of ``hl.zeros`` and then
refuses to add the ``[tile, dv]`` product, and sizes 0 and 1 are specialized, so the sizes
drawn avoid both.)"""

from __future__ import annotations

import functools
import string
from pathlib import Path

import torch
from examples_util import load_example
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir import CompiledKernel, compile_kernel, generate_mlir

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "dynamic_dot_kernels.py")
SSA = "[A-Za-z0-9_#]+"


def _args(m: int = 37, n: int = 29, d: int = 16, dv: int = 32, seed: int = 0) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(m, d, generator=gen), torch.randn(n, d, generator=gen), torch.randn(n, dv, generator=gen)


@functools.cache
def compiled() -> CompiledKernel:
    return compile_kernel(KERNELS.scores_times_values.bind(_args()))


def test_dot_without_accumulator_fills_a_zero_tile_sized_by_its_operands() -> None:
    text = generate_mlir(KERNELS.scores_times_values.bind(_args()))
    run_filecheck(text, string.Template("""
        // CHECK-LABEL: func.func @scores_times_values(%q: tensor<?x?xf32>, %k: tensor<?x?xf32>, %v: tensor<?x?xf32>,
        // CHECK:       tensor.extract_slice %v[
        // CHECK:       %[[VT:$V]] = tensor.insert_slice {{.*}} : tensor<?x?xf32> into tensor<16x?xf32>
        // CHECK:       %[[WIDTH:$V]] = tensor.dim %[[VT]], %{{$V}} : tensor<16x?xf32>
        // CHECK-NEXT:  %[[INIT:$V]] = tensor.empty(%[[WIDTH]]) : tensor<16x?xf32>
        // CHECK-NEXT:  %[[ZERO:$V]] = linalg.fill ins(%{{$V}} : f32) outs(%[[INIT]] : tensor<16x?xf32>)
        // CHECK-NEXT:  linalg.matmul ins(%{{$V}}, %[[VT]] : tensor<16x16xf32>, tensor<16x?xf32>) outs(%[[ZERO]] : tensor<16x?xf32>)
    """).substitute(V=SSA))


@settings(max_examples=15)
@given(m=st.integers(2, 40), n=st.integers(2, 40), dv=st.sampled_from([2, 8, 32, 64]), seed=st.integers(0, 2**16))
def test_dynamic_dot_matches_torch_for_any_sizes(m: int, n: int, dv: int, seed: int) -> None:
    q, k, v = _args(m, n, 16, dv, seed)
    torch.testing.assert_close(compiled()(q, k, v), (q @ k.T) @ v, rtol=1e-4, atol=1e-4)
