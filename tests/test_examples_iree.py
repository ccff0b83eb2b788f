"""Every example kernel, emitted for every output type, compiles with IREE (llvm-cpu) and
runs on IREE's runtime with the numbers of Helion's reference mode: the emitted modules
are plain upstream MLIR that a second compiler takes as is.

Run alone with ``scripts/test -m iree`` (or deselect with ``-m "not iree"``).
"""

from __future__ import annotations

from typing import Any

import helion
import pytest

from examples_util import (
    HELION_NEEDS_STATIC_SHAPES,
    dynamic_shapes_kernel,
    example_names,
    load_example_by_name,
    run_through_iree,
)
from helion_mlir.runtime.iree.engine import iree_available

pytestmark = [
    pytest.mark.iree,
    pytest.mark.skipif(not iree_available(), reason="IREE is not installed (pip install -e '.[test]')"),
]

OUTPUT_TYPES = ["linalg-on-tensors", "stablehlo", "raw", "tosa"]

# Known gaps of IREE 3.13 (docs/downstream.md): each maps to a pattern of the error it gives,
# so that a gap that disappears or fails otherwise fails its test.
KNOWN_COMPILE_GAPS = {
    # The kernel converts to int64; IREE validates TOSA against the spec's profiles, none of
    # which has a cast to or from i64 (torch-mlir's TOSA checks no profile).
    ("histogram", "tosa"): r"'tosa\.cast' op illegal: .* got \(f32,i64\)",
    # IREE refuses a slice of a sub-byte (float4_e2m1fn_x2) tensor inside a dispatch.
    **{("nvfp4_gemv", t): "non-full load of unsupported element type" for t in OUTPUT_TYPES},
}
# IREE 3.13's runtime rejects a command buffer of the branch of an scf.if inside a tile loop
# (the module runs when the condition is made constant).
KNOWN_RUN_GAPS = {
    ("causal_attention_skip", t): "OUT_OF_RANGE; indirect buffer reference slot 0" for t in OUTPUT_TYPES
}

# Dynamic shapes (static_shapes=False) through IREE: every example for linalg-on-tensors; for
# the other output types, kernels of the constructs the emission adapts for IREE (nested tile
# loops over dynamically sized tensors, loops over data-dependent ranges, several tensors
# carried by one loop, stablehlo broadcasts whose expansion is stated) and one of each gap.
DYNAMIC = [(name, "linalg-on-tensors") for name in sorted(set(example_names()) - HELION_NEEDS_STATIC_SHAPES)]
DYNAMIC += [(name, t) for t in ("stablehlo", "raw", "tosa")
            for name in ("grouped_gemm", "jagged_mean", "rms_norm")]
DYNAMIC += [("softmax_one_pass", "stablehlo"), ("cross_entropy", "stablehlo"), ("attention_backward", "stablehlo"),
            ("fp8_quantize", "stablehlo"),
            ("fp8_quantize", "raw"), ("attention", "stablehlo"), ("tile_branch", "raw")]

_UNRESOLVED_SIZE = r"'tensor\.dim' op unexpected during shape cleanup"
KNOWN_DYNAMIC_COMPILE_GAPS = {
    **KNOWN_COMPILE_GAPS,
    # IREE tracks the sizes of tensors carried by scf.for only: the result of an scf.while of
    # dynamic shape keeps a tensor.dim (branches carrying them are emitted as loops).
    **{("row_rescale", t): _UNRESOLVED_SIZE for t in OUTPUT_TYPES},
    # torch-mlir's TOSA of a broadcast against a whole dynamic row leaves sizes IREE cannot resolve.
    ("rms_norm", "tosa"): _UNRESOLVED_SIZE,
    # torch-mlir guards dynamic stablehlo broadcasts with shape.cstr_broadcastable/shape.assuming.
    ("rms_norm", "stablehlo"): "one or more illegal operations were found in the compiler input",
    # IREE's StableHLO requires a static result of stablehlo.reshape.
    ("attention", "stablehlo"): r"'stablehlo\.reshape' op result #0 must be statically shaped",
}


def _run_through_iree(kernel: helion.Kernel, module: Any, output_type: str, where: str,
                      compile_gaps: dict[tuple[str, str], str], **options: Any) -> None:
    key = (module.__name__.rsplit(".", 1)[-1], output_type)
    run_through_iree(kernel, module, output_type, where, compile_gap=compile_gaps.get(key),
                     run_gap=KNOWN_RUN_GAPS.get(key), **options)


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
@pytest.mark.parametrize("name", example_names())
def test_example_compiles_and_runs_in_iree_and_matches_helion_reference_mode(name: str, output_type: str) -> None:
    module = load_example_by_name(name)
    _run_through_iree(module.KERNEL, module, output_type, f"{name} [{output_type}, IREE]", KNOWN_COMPILE_GAPS)


@pytest.mark.parametrize(("name", "output_type"), DYNAMIC)
def test_example_with_dynamic_shapes_compiles_and_runs_in_iree(name: str, output_type: str) -> None:
    module = load_example_by_name(name)
    _run_through_iree(dynamic_shapes_kernel(name), module, output_type, f"{name} [{output_type}, dynamic, IREE]",
                      KNOWN_DYNAMIC_COMPILE_GAPS)


# The examples computing in 16-bit floats, compiled for a CPU this one can run that lacks its
# bfloat16 and float16 instructions: a baseline x86-64 (no AVX, F16C or AVX512-BF16; an AVX-512
# CPU without AVX512-BF16 is in test_cpu_portability.py). Code must not depend on the host
# having them. CI runs two (bfloat16 truncations after an int4 matmul, a bf16 matmul in
# stablehlo); ``--iree-all`` runs all in both output types.
HALF_PRECISION = ["attention_causal", "bias_gelu", "fp8_quantize", "fp8_scaled_gemm", "gelu_tanh_manual", "int4_gemm",
                  "layer_norm", "matmul_bf16", "nvfp4_gemv_grouped", "swiglu"]
HALF_PRECISION_CI = [("int4_gemm", "linalg-on-tensors"), ("matmul_bf16", "stablehlo")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function is test_example_in_16_bit_floats_runs_in_iree_on_a_cpu_without_native_bf16:
        cases = ([(name, t) for name in HALF_PRECISION for t in ("linalg-on-tensors", "stablehlo")]
                 if metafunc.config.getoption("--iree-all") else HALF_PRECISION_CI)
        metafunc.parametrize(("name", "output_type"), cases)


def test_example_in_16_bit_floats_runs_in_iree_on_a_cpu_without_native_bf16(name: str, output_type: str) -> None:
    module = load_example_by_name(name)
    _run_through_iree(module.KERNEL, module, output_type, f"{name} [{output_type}, IREE on x86-64]",
                      KNOWN_COMPILE_GAPS, device="cpu:x86-64")


def test_one_row_tiles_gathering_one_element_each_compile_and_run_in_iree() -> None:
    # Rows one at a time: the gathered target logit is one element, which IREE fuses into
    # the row's log-sum-exp; as a linalg.generic extracting it, MLIR's vectorizer made
    # invalid IR of the fused 0-d op ('arith.subf' op requires the same type ...).
    module = load_example_by_name("cross_entropy")
    _run_through_iree(module.KERNEL, module, "linalg-on-tensors", "cross_entropy [linalg-on-tensors, block 1, IREE]",
                      KNOWN_COMPILE_GAPS, config=helion.Config(block_sizes=[1]))
