"""Math functions in the fast CPU pipeline: vector code (polynomials or libmvec calls), never
one scalar libm call per lane, within a few ulp of the exact result over the float32 range.

The sweep takes every 4099th float32 bit pattern (about a million values, every sign and
exponent, NaNs and subnormals included) plus the edge cases of tests/math_sweep.py; the
whole range is measured by scripts/math_accuracy.py (docs/cpu-math.md).
"""

from __future__ import annotations

import math
import re

import helion
import pytest
import torch
from filecheck_util import run_filecheck
from kernels import math_kernels
from math_sweep import UNARY, float32_sweep, signs_of_zeros_kept, ulp_errors, unary_module

from helion_mlir import generate_mlir
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.cpu.engine import clear_compile_cache, compile_module, lower_module
from helion_mlir.runtime.cpu.rewrites.vector import polynomial_exp
from helion_mlir.runtime.cpu.rewrites.vector.vector_math import VECTOR_FUNCTIONS, host_vector_math

LIBRARY = host_vector_math()
needs_libmvec = pytest.mark.skipif(
    LIBRARY is None or not {"math.tanh", "math.log1p", "math.sin"} <= LIBRARY.functions,
    reason="glibc's libmvec (2.35 or later) is not available",
)

# Largest error allowed, in float32 ulps: glibc documents 4 for its vector functions; the
# pipeline's own polynomials measure below 1.6 over every float32 (docs/cpu-math.md); sqrt
# is exact, rsqrt is 1 / sqrt (two roundings).
POLYNOMIALS = ("exp", "exp2", "expm1", "erf", "sin", "cos")
MAX_ULPS = {name: 4.0 for name in UNARY} | {name: 2.0 for name in POLYNOMIALS} | {"sqrt": 0.5, "rsqrt": 1.5}


def _whole_registers(x: torch.Tensor) -> torch.Tensor:
    """``x`` padded with ones to whole steps of 64 lanes: the vector width kernels get."""
    return torch.cat([x, torch.ones(-x.numel() % 64)])


def _run_unary(x: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    outputs = compile_module(unary_module(x.numel(), names), "unary", threads=2)(
        x, *[torch.empty_like(x) for _ in names])
    return dict(zip(names, outputs))


# A length of whole registers is computed in 64-lane vectors (exp and exp2 scale with one
# vscalefps on AVX-512); the bare sweep's length (8 mod 16) in 8-lane vectors (exponent bits).
@pytest.fixture(scope="module", params=["whole registers", "part of a register"])
def sweep(request) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    x = float32_sweep(step=4099)
    if request.param == "whole registers":
        x = _whole_registers(x)
    return x, _run_unary(x, list(UNARY))


@needs_libmvec
@pytest.mark.parametrize("name", list(UNARY))
def test_function_is_within_its_ulp_bound_over_the_float32_range(name: str, sweep) -> None:
    x, results = sweep
    want = UNARY[name][1](x.double())
    errors = ulp_errors(results[name], want)
    worst = int(errors.argmax())
    assert errors[worst] <= MAX_ULPS[name], f"{name}({x[worst].item()!r}) = {results[name][worst].item()!r}, " \
        f"exactly {want[worst].item()!r}: {errors[worst].item():.2f} ulp"
    assert signs_of_zeros_kept(results[name], want)


@pytest.mark.skipif(not polynomial_exp.host_scales_in_one_instruction(), reason="no AVX-512")
def test_exp_scaled_in_one_instruction_rounds_as_the_exponent_bits_do(monkeypatch) -> None:
    # Both ways round e^r 2^n once: the same float32 for every argument of the sweep.
    x = _whole_registers(float32_sweep(step=4099))
    text = lower_module(unary_module(x.numel(), ["exp", "exp2"]), "unary", threads=1)
    run_filecheck(text, """
        // CHECK: llvm.func @unary(
        // CHECK-COUNT-8: llvm.call_intrinsic "llvm.x86.avx512.mask.scalef.ps.512"({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>, i16, i32) -> vector<16xf32>
        // CHECK-NOT: scalef
    """)
    scaled = _run_unary(x, ["exp", "exp2"])
    clear_compile_cache()
    monkeypatch.setattr(polynomial_exp, "host_scales_in_one_instruction", lambda: False)
    from_bits = _run_unary(x, ["exp", "exp2"])
    clear_compile_cache()
    for name in ("exp", "exp2"):
        assert torch.equal(scaled[name].view(torch.int32), from_bits[name].view(torch.int32)), name


@needs_libmvec
def test_every_function_becomes_vector_code_without_scalar_libm_calls() -> None:
    text = lower_module(unary_module(4096, list(UNARY)), "unary", threads=1)
    isa, lanes = LIBRARY.isa, LIBRARY.lanes
    run_filecheck(text, f"""
        // CHECK-DAG: llvm.call @_ZGV{isa}N{lanes}v_logf({{{{.*}}}}) : (vector<{lanes}xf32>) -> vector<{lanes}xf32>
        // CHECK-DAG: llvm.call @_ZGV{isa}N{lanes}v_log1pf(
        // CHECK-DAG: llvm.call @_ZGV{isa}N{lanes}v_log2f(
        // CHECK-DAG: llvm.call @_ZGV{isa}N{lanes}v_tanhf(
        // CHECK-DAG: llvm.call @_ZGV{isa}N{lanes}v_atanf(
        // CHECK-DAG: llvm.intr.sqrt(%{{{{.*}}}}) : (vector<
    """)
    scalar_calls = set(re.findall(r"llvm\.call @(\w+)\(%\w+\) : \(f32\) -> f32", text))
    assert scalar_calls == set(), scalar_calls
    # exp, exp2, expm1 and erf are polynomials: no call of any kind
    assert not re.search(r"@\w*(expf|exp2f|expm1f|erff)\b", text)


@needs_libmvec
def test_sin_and_cos_call_the_library_only_for_vectors_with_a_large_argument() -> None:
    text = lower_module(unary_module(4096, ["sin"]), "unary", threads=1)
    # |x| > 2^19 in any lane (lanes frozen: masked reads pad with poison): a branch to the
    # library's reduction, else the polynomial
    run_filecheck(text, f"""
        // CHECK: %[[FROZEN:.*]] = llvm.freeze %{{{{.*}}}} : vector<{{{{[0-9]+}}}}xi1>
        // CHECK-NEXT: %[[ANY:.*]] = "llvm.intr.vector.reduce.or"(%[[FROZEN]]) : (vector<{{{{[0-9]+}}}}xi1>) -> i1
        // CHECK-NEXT: llvm.cond_br %[[ANY]], ^[[LIBRARY:.*]], ^[[POLYNOMIAL:[a-z0-9]*]]
        // CHECK: ^[[LIBRARY]]:
        // CHECK-NEXT: llvm.shufflevector
        // CHECK-NEXT: llvm.call @_ZGV{LIBRARY.isa}N{LIBRARY.lanes}v_sinf(
    """)
    big = torch.tensor([5e5, 5.3e5, 1e6, 12345678.0, 1e20, 3.4e38, -7e29, 1.0] * 8)
    sine, cosine = compile_module(unary_module(big.numel(), ["sin", "cos"]), "unary", threads=1)(
        big, torch.empty_like(big), torch.empty_like(big))
    assert ulp_errors(sine, torch.sin(big.double())).max() <= 4
    assert ulp_errors(cosine, torch.cos(big.double())).max() <= 4


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_and_cos_evaluate_one_polynomial_per_lane(name: str) -> None:
    # three multiply-adds take the multiple of pi/2 off, then one polynomial whose
    # coefficients each lane selects by its quadrant (sine or cosine): four more, no other
    text = lower_module(unary_module(4096, [name]), "unary", threads=1)
    run_filecheck(text, """
        // CHECK-LABEL: llvm.func @unary
        // CHECK-COUNT-3: llvm.intr.fma({{.*}}) : (vector<64xf32>
        // CHECK: llvm.select %[[ODD:[0-9]+]], %{{[0-9]+}}, %{{[0-9]+}} : vector<64xi1>, vector<64xf32>
        // CHECK-COUNT-4: llvm.intr.fma({{.*}}) : (vector<64xf32>
        // CHECK-NOT: llvm.intr.fma
    """)


POWERS_AND_ANGLES = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @binary(%x: tensor<{n}x{m}xf32>, %y: tensor<{n}x{m}xf32>, %p: tensor<{n}x{m}xf32>, %a: tensor<{n}x{m}xf32>)
    -> (tensor<{n}x{m}xf32>, tensor<{n}x{m}xf32>) {{
  %r:2 = linalg.generic {{indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %y : tensor<{n}x{m}xf32>, tensor<{n}x{m}xf32>) outs(%p, %a : tensor<{n}x{m}xf32>, tensor<{n}x{m}xf32>) {{
  ^bb0(%u: f32, %v: f32, %o1: f32, %o2: f32):
    %pow = math.powf %u, %v : f32
    %atan2 = math.atan2 %u, %v : f32
    linalg.yield %pow, %atan2 : f32, f32
  }} -> (tensor<{n}x{m}xf32>, tensor<{n}x{m}xf32>)
  return %r#0, %r#1 : tensor<{n}x{m}xf32>, tensor<{n}x{m}xf32>
}}
"""


@needs_libmvec
def test_pow_and_atan2_are_vector_calls_within_four_ulp() -> None:
    # Every pair of a grid of magnitudes and signs, the special values included; a row
    # length that is no multiple of the register width leaves a padded last piece.
    values = torch.cat([torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 2.0, 3.0, -3.0]),
                        torch.logspace(-40, 38, 60) * torch.tensor([1.0, -1.0]).repeat(30)])
    x, y = torch.meshgrid(values, values * 0.37, indexing="ij")
    x, y = x.contiguous(), y.contiguous()
    n, m = x.shape
    text = POWERS_AND_ANGLES.format(n=n, m=m)
    assert f"_ZGV{LIBRARY.isa}N{LIBRARY.lanes}vv_powf" in lower_module(text, "binary", threads=1)
    power, angle = compile_module(text, "binary", threads=1)(x, y, torch.empty_like(x), torch.empty_like(x))
    assert ulp_errors(power, torch.pow(x.double(), y.double())).max() <= 4
    assert ulp_errors(angle, torch.atan2(x.double(), y.double())).max() <= 4


@pytest.mark.parametrize("pipeline", ["fast", "plain"])
def test_expm1_and_log1p_keep_tiny_arguments(pipeline: str) -> None:
    # exp(x) - 1 and log(1 + x) would give 0 below 6e-8: expm1 and log1p exist for these.
    x = torch.tensor([1e-10, -1e-10, 3e-8, -3e-8, 1e-20, 2.0**-140, -(2.0**-149), 1e-3] * 8)
    text = unary_module(x.numel(), ["expm1", "log1p"])
    expm1, log1p = compile_module(text, "unary", pipeline=pipeline)(x, torch.empty_like(x), torch.empty_like(x))
    assert ulp_errors(expm1, torch.expm1(x.double())).max() <= 4
    assert ulp_errors(log1p, torch.log1p(x.double())).max() <= 4


def test_vector_functions_name_existing_libmvec_symbols() -> None:
    if LIBRARY is None:
        pytest.skip("glibc's libmvec is not available")
    assert LIBRARY.functions <= set(VECTOR_FUNCTIONS)
    assert LIBRARY.symbol("math.tanh") == f"_ZGV{LIBRARY.isa}N{LIBRARY.lanes}v_tanhf"
    assert LIBRARY.symbol("math.atan2") == f"_ZGV{LIBRARY.isa}N{LIBRARY.lanes}vv_atan2f"


@needs_libmvec
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_activation_kernels_are_vector_code_in_every_float_type(dtype: torch.dtype) -> None:
    x = (3 * torch.randn(37, 100, generator=torch.Generator().manual_seed(2))).to(dtype)
    kernel = helion.kernel(math_kernels.activations, config=helion.Config(block_sizes=[8, 64]))
    bound = kernel.bind((x,))
    text = lower_module(generate_mlir(bound), "activations", threads=2)
    assert f"llvm.call @_ZGV{LIBRARY.isa}N{LIBRARY.lanes}v_tanhf(" in text  # GELU's tanh form, Mish
    assert f"llvm.call @_ZGV{LIBRARY.isa}N{LIBRARY.lanes}v_log1pf(" in text  # softplus
    assert not re.search(r"llvm\.call @(erff|tanhf|expf|logf|log1pf)\(", text)  # no scalar call
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(compile_kernel(bound)(x), math_kernels.activations_reference(x), **tolerance)
