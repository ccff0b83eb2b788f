"""Kernels compute in their own precision in every output type: torch's statistics (``var``,
``std``, ``var_mean``) in float32 for float32 and half-precision inputs, and integer floor
division, remainder and ``fmod`` in integers, never through f64 (torch-mlir's forms of both
go through f64, which TOSA has in no profile and which is inexact for integers past 2**53).

Every example's module is checked for f64 in ``test_examples_mlir.py``; here, kernels that
use the ops are compared with torch, with static and dynamic shapes and a rolled reduction,
and the integer ops on values past 2**53.
"""

from __future__ import annotations

import functools
import string
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from examples_util import clone_args, f64_computations, load_example, load_example_by_name
from filecheck_util import run_filecheck

from helion_mlir import compile_kernel, generate_mlir

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "statistics_kernels.py")
SSA = "[A-Za-z0-9_#]+"


def _rows(dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(3)
    return (torch.randn(37, 100, generator=gen) * 3 + 5).to(dtype)  # ragged rows; a mean far from 0


def _assert_close(got: Any, expected: Any, tolerance: float, where: str) -> None:
    for index, (g, e) in enumerate(zip(got, expected)):
        torch.testing.assert_close(g, e, rtol=tolerance, atol=tolerance, msg=lambda m: f"{where}[{index}]: {m}")


@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "tosa", "stablehlo"])
@pytest.mark.parametrize(("dtype", "static_shapes", "config"), [
    (torch.float32, True, helion.Config(block_sizes=[8])),
    (torch.bfloat16, False, helion.Config(block_sizes=[8])),
    (torch.float32, True, helion.Config(block_sizes=[4], reduction_loops=[32])),
], ids=["f32-static", "bf16-dynamic", "f32-rolled"])
def test_variance_and_std_are_computed_in_float32_and_match_torch(
    output_type: str, dtype: torch.dtype, static_shapes: bool, config: helion.Config
) -> None:
    kernel = helion.kernel(KERNELS.row_statistics.fn, config=config, static_shapes=static_shapes)
    x = _rows(dtype)
    compiled = compile_kernel(kernel.bind((x,)), output_type=output_type)
    assert f64_computations(compiled.mlir) == []
    tolerance = 1e-4 if dtype == torch.float32 else 2e-2
    _assert_close(compiled(x), KERNELS.row_statistics_reference(x), tolerance, f"{output_type} {dtype}")


def test_var_mean_sums_the_row_and_its_squared_deviations_in_float32() -> None:
    """residual_layer_norm's var_mean: torch-mlir's form extended the row to f64 and summed there."""
    module = load_example_by_name("residual_layer_norm")
    text = generate_mlir(module.KERNEL.bind(module.make_args("ragged")))
    run_filecheck(text, string.Template("""
        // CHECK:      func.func @residual_layer_norm({{.*}}%eps: f64
        // CHECK-NOT:  {{xf64|to f64}}
        // CHECK:      %[[SUM:$V]] = linalg.generic {{.*}}"reduction"]} ins(%[[H:$V]] : tensor<8x100xf32>)
        // CHECK-NEXT:   ^bb{{.*}}: f32, %{{$V}}: f32):
        // CHECK-NEXT:     arith.addf %{{$V}}, %{{$V}} : f32
        // CHECK:      %[[MEAN:$V]] = linalg.generic {{.*}} ins(%[[SUM]], %{{$V}} : tensor<8x1xf32>, tensor<f32>)
        // CHECK-NEXT:   ^bb
        // CHECK-NEXT:     arith.divf %{{$V}}, %{{$V}} : f32
        // CHECK:      %[[DEV:$V]] = linalg.generic {{.*}} ins(%[[H]], %[[MEAN]] : tensor<8x100xf32>, tensor<8x1xf32>)
        // CHECK-NEXT:   ^bb
        // CHECK-NEXT:     arith.subf %{{$V}}, %{{$V}} : f32
        // CHECK:      %[[SQUARES:$V]] = linalg.generic {{.*}} ins(%[[DEV]], %[[DEV]] : tensor<8x100xf32>, tensor<8x100xf32>)
        // CHECK-NEXT:   ^bb
        // CHECK-NEXT:     arith.mulf %{{$V}}, %{{$V}} : f32
        // CHECK:      linalg.generic {{.*}}"reduction"]} ins(%[[SQUARES]] : tensor<8x100xf32>)
        // CHECK-NEXT:   ^bb
        // CHECK-NEXT:     arith.addf %{{$V}}, %{{$V}} : f32
        // CHECK-NOT:  {{xf64|to f64}}
    """).substitute(V=SSA))


@functools.cache
def _int_divmod(width: int, output_type: str) -> Any:
    module = load_example_by_name("int_divmod")
    return compile_kernel(module.KERNEL.bind((_large_integers(), width)), output_type=output_type)


def _large_integers() -> torch.Tensor:
    """Values past 2**53 (where f64 is inexact), multiples of the widths, small values of either sign."""
    large = torch.tensor([2**62 + 1, -(2**62) - 7, 2**53 + 1, -(2**53) - 3, 123456789012345678, 2**63 - 1, -(2**63)])
    exact = torch.tensor([21, -21, 0, 2**60 * 7, -(2**59) * 15])
    small = torch.randint(-1000, 1000, (500 - len(large) - len(exact),), generator=torch.Generator().manual_seed(5))
    return torch.cat([large, exact, small])


@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "stablehlo", "raw"])
@pytest.mark.parametrize("width", [3, -7, 2**40 + 1])
def test_integer_floor_division_remainder_and_fmod_are_exact_past_2_to_the_53(output_type: str, width: int) -> None:
    module = load_example_by_name("int_divmod")
    t = _large_integers()
    got = _int_divmod(width, output_type)(t.clone(), width)
    for name, g, e in zip(("//", "%", "trunc div", "fmod"), got, module.reference(t.clone(), width)):
        assert torch.equal(g, e), f"{name} by {width} [{output_type}]: {(g != e).sum()} values differ"


_INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=30)
@given(output_type=st.sampled_from(["linalg-on-tensors", "stablehlo"]),
       width=st.one_of(st.integers(2, 1000), st.integers(-1000, -2), st.integers(2, 2**62), st.integers(-(2**62), -2)),
       specials=st.lists(_INT64, max_size=20), seed=st.integers(0, 2**16))
def test_integer_division_of_any_int64_values_matches_torch(
        output_type: str, width: int, specials: list[int], seed: int) -> None:
    """One compiled kernel per output type, called with any width: the rewrite's quotient
    and remainder agree with torch's for values of every size and sign."""
    module = load_example_by_name("int_divmod")
    values = torch.randint(-(2**63), 2**63 - 1, (500,), generator=torch.Generator().manual_seed(seed))
    values[: len(specials)] = torch.tensor(specials, dtype=torch.int64)
    values[len(specials):len(specials) + 8] = width * torch.arange(-4, 4)  # exact multiples
    got = _int_divmod(3, output_type)(values.clone(), width)
    for name, g, e in zip(("//", "%", "trunc div", "fmod"), got, module.reference(values.clone(), width)):
        assert torch.equal(g, e), f"{name} by {width} [{output_type}]"


def test_tosa_computes_int64_arithmetic_in_32_bits_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """A documented gap (docs/lowering.md): torch-mlir's TOSA form casts int64 operands of
    add, sub and mul to i32 (TOSA has no 64-bit arithmetic), so ``//`` of values past 2**31
    is wrong while values that fit 32 bits are exact. The emission warns, naming each op and
    its source line; exact output types do not. Pinned so that a fix shows."""
    module = load_example_by_name("int_divmod")
    with caplog.at_level("WARNING", logger="helion_mlir"):
        generate_mlir(module.KERNEL.bind((_large_integers(), 3)), output_type="linalg-on-tensors")
    assert not [r for r in caplog.records if "32 bits" in r.getMessage()]
    with caplog.at_level("WARNING", logger="helion_mlir"):
        generate_mlir(module.KERNEL.bind((_large_integers(), 3)), output_type="tosa")
    warned = [r.getMessage() for r in caplog.records if "computes an int64 result in 32 bits" in r.getMessage()]
    assert any("'div' (aten.div.Tensor_mode)" in m and "int_divmod.py\":28:" in m for m in warned), warned
    assert len(warned) == len(set(warned)), warned  # once per op and line
    compiled = _int_divmod(3, "tosa")
    small = torch.randint(-2**30, 2**30, (500,), generator=torch.Generator().manual_seed(6))
    for g, e in zip(compiled(small.clone(), 3), module.reference(small.clone(), 3)):
        assert torch.equal(g, e)
    floor_q = compiled(_large_integers(), 3)[0]
    assert not torch.equal(floor_q, _large_integers() // 3)


@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "tosa", "stablehlo"])
def test_float_remainder_takes_the_divisors_sign_in_every_output_type(output_type: str) -> None:
    """stablehlo.remainder truncates (C's fmod); torch's remainder floors."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(200, generator=gen) * 5
    y = torch.randn(200, generator=gen) + 2.5 * torch.sign(torch.randn(200, generator=gen))  # either sign, not ~0
    compiled = compile_kernel(KERNELS.float_remainders.bind((x, y)), output_type=output_type)
    assert f64_computations(compiled.mlir) == []
    _assert_close(compiled(*clone_args((x, y))), KERNELS.float_remainders_reference(x, y), 1e-5, output_type)
