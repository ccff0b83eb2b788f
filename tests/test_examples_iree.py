"""Every example kernel, emitted for every output type, compiles with IREE (llvm-cpu) and
runs on IREE's runtime with the numbers of Helion's reference mode: the emitted modules
are plain upstream MLIR that a second compiler takes as is.

Run alone with ``scripts/test -m iree`` (or deselect with ``-m "not iree"``).
"""

from __future__ import annotations

import re
from typing import Any

import helion
import pytest

from examples_util import (
    HELION_NEEDS_STATIC_SHAPES,
    KNOWN_NUMERIC_GAPS,
    assert_matches,
    bound_args,
    clone_args,
    clone_kwargs,
    dynamic_shapes_kernel,
    example_call,
    example_names,
    load_example_by_name,
    run_reference_mode,
)
from helion_mlir.errors import ExecutionError
from helion_mlir.runtime.compiled_kernel import compile_kernel
from helion_mlir.runtime.iree_engine import iree_available

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
    # IREE tracks the sizes of tensors carried by scf.for only: the result of an scf.if (a
    # store in one branch) or scf.while of dynamic shape keeps a tensor.dim.
    **{(name, t): _UNRESOLVED_SIZE for t in OUTPUT_TYPES
       for name in ("cross_entropy_ignore", "routed_accumulate", "row_branch", "row_rescale", "tile_branch")},
    # torch-mlir's TOSA of a broadcast against a whole dynamic row leaves sizes IREE cannot resolve.
    ("rms_norm", "tosa"): _UNRESOLVED_SIZE,
    # torch-mlir guards dynamic stablehlo broadcasts with shape.cstr_broadcastable/shape.assuming.
    ("rms_norm", "stablehlo"): "one or more illegal operations were found in the compiler input",
    # IREE's StableHLO requires a static result of stablehlo.reshape.
    ("attention", "stablehlo"): r"'stablehlo\.reshape' op result #0 must be statically shaped",
}


def _run_through_iree(kernel: helion.Kernel, module: Any, output_type: str, where: str,
                      compile_gaps: dict[tuple[str, str], str]) -> None:
    args, kwargs = example_call(module, "ragged")
    bound = kernel.bind(bound_args(kernel, args, kwargs))
    key = (module.__name__.rsplit(".", 1)[-1], output_type)
    if key in compile_gaps:
        with pytest.raises(ExecutionError, match="iree-compile") as refused:
            compile_kernel(bound, output_type=output_type, runtime="iree")
        assert re.search(compile_gaps[key], str(refused.value)), f"{where}: another error than the known gap"
        return
    compiled = compile_kernel(bound, output_type=output_type, runtime="iree")
    if key in KNOWN_RUN_GAPS:
        with pytest.raises(ExecutionError, match=KNOWN_RUN_GAPS[key]):
            compiled(*clone_args(args), **clone_kwargs(kwargs))
        return
    got = compiled(*clone_args(args), **clone_kwargs(kwargs))
    expected, _torch = run_reference_mode(module, "ragged")
    if key in KNOWN_NUMERIC_GAPS:
        with pytest.raises(AssertionError):
            assert_matches(got, expected, module.TOLERANCE, where)
        return
    assert_matches(got, expected, module.TOLERANCE, where)


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
