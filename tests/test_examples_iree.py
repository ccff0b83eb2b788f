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
    KNOWN_NUMERIC_GAPS,
    assert_matches,
    bound_args,
    clone_args,
    clone_kwargs,
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

KNOWN_COMPILE_GAPS = {
    ("int_divmod", "raw"): "IREE's bundled torch-mlir cannot legalize torch.aten.fmod.Scalar with a runtime divisor",
    # The kernel converts to int64; IREE validates TOSA against the spec's profiles, none of
    # which has a cast to or from i64 (torch-mlir's TOSA checks no profile).
    ("histogram", "tosa"): "tosa.cast f32 -> i64 is in no TOSA profile",
    **{("nvfp4_gemv", t): "IREE's HAL has no f4E2M1FN element type for a float4_e2m1fn_x2 argument"
       for t in OUTPUT_TYPES},
}
# IREE 3.13's runtime rejects a command buffer of the branch of an scf.if inside a tile loop
# (the module runs when the condition is made constant).
KNOWN_RUN_GAPS = {
    ("causal_attention_skip", t): "OUT_OF_RANGE; indirect buffer reference slot 0" for t in OUTPUT_TYPES
}
# Dynamic shapes through IREE: one kernel per construct the emission adapts for it
# (nested tile loops over tensors with two or more dynamic sizes and with one, a loop
# that may run zero times, three-level nests, lane loops of atomics; stablehlo broadcasts
# whose expansion is stated).
DYNAMIC = [(name, "linalg-on-tensors") for name in
           ("add", "bmm", "column_stats", "histogram", "jagged_sum", "row_mean_dynamic", "softmax_two_pass")]
DYNAMIC += [("softmax_one_pass", "stablehlo"), ("cross_entropy", "stablehlo")]


def _run_through_iree(kernel: helion.Kernel, module: Any, output_type: str, where: str) -> None:
    args, kwargs = example_call(module, "ragged")
    bound = kernel.bind(bound_args(kernel, args, kwargs))
    key = (module.__name__.rsplit(".", 1)[-1], output_type)
    if key in KNOWN_COMPILE_GAPS:
        with pytest.raises(ExecutionError, match="iree-compile"):
            compile_kernel(bound, output_type=output_type, runtime="iree")
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
    _run_through_iree(module.KERNEL, module, output_type, f"{name} [{output_type}, IREE]")


@pytest.mark.parametrize(("name", "output_type"), DYNAMIC)
def test_example_with_dynamic_shapes_compiles_and_runs_in_iree(name: str, output_type: str) -> None:
    module = load_example_by_name(name)
    kernel = helion.kernel(module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False)
    _run_through_iree(kernel, module, output_type, f"{name} [{output_type}, dynamic, IREE]")
