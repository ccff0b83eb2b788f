"""torch's NaN semantics for the ops that compare floats (``lowering/rules/extrema.py``).

torch lets NaN win: ``clamp(nan, -1, 1)``, ``maximum(nan, 0)`` and the ``amax`` of a row
holding a NaN are NaN, ``argmax`` and ``max.dim`` give the first NaN's index; a NaN bound
clamps to NaN, and ``relu(-0.0)`` is ``-0.0``. Kernels written as users write them run on
data with NaN, infinities and signed zeros at random positions (and whole rows of them),
in every output type and both CPU pipelines, rolled or not, and are compared with torch
bit for bit: NaN exactly where torch has NaN, the same numbers elsewhere, the same zero
signs where torch fixes them. Each kernel is compiled once per variant; hypothesis varies
the data (``--hypothesis-profile=explore`` for thousands of cases).
"""

from __future__ import annotations

import functools
import math
import string
from typing import Any

import helion
import pytest
import torch
from config_fuzz import random_configs
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import extrema_kernels as kernels

from helion_mlir import compile_kernel, generate_mlir

OUTPUT_TYPES = ["linalg-on-tensors", "tosa", "stablehlo", "raw"]
PIPELINES = ["fast", "plain"]
SPECIALS = (math.nan, math.inf, -math.inf, 0.0, -0.0)
SHAPE = (37, 100)  # ragged against every tile of the kernels
SSA = "[A-Za-z0-9_#]+"
# A quarter of the profile's examples per test: 25 in CI (the kernels' compiles cost as much),
# 1250 with --hypothesis-profile=explore.
EXAMPLES = settings(max_examples=max(1, settings.default.max_examples // 4))


@st.composite
def floats_with_specials(draw: st.DrawFn, shape: tuple[int, int] = SHAPE, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Normal numbers with NaN, +-inf and +-0.0 written at drawn positions and over drawn whole rows."""
    rows, cols = shape
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    x = torch.randn(rows, cols, generator=gen).to(dtype)
    special = st.sampled_from(SPECIALS)
    scattered = draw(st.lists(st.tuples(st.integers(0, rows * cols - 1), special), max_size=64))
    if scattered:
        positions, values = zip(*scattered)
        x.view(-1)[torch.tensor(positions)] = torch.tensor(values, dtype=dtype)
    for row, value in draw(st.lists(st.tuples(st.integers(0, rows - 1), special), max_size=2)):
        x[row] = value
    return x


def assert_same(got: torch.Tensor, expected: torch.Tensor, what: str, *, signed_zeros: bool = False,
                exact: bool = True) -> None:
    """``got`` is torch's ``expected``: NaN at the same positions, equal values (``exact``)
    or close ones, and with ``signed_zeros`` the same sign on every zero."""
    assert got.dtype == expected.dtype and got.shape == expected.shape, f"{what}: {got.dtype}{list(got.shape)}"
    if not expected.is_floating_point():
        wrong = got != expected
    else:
        nan_got, nan_expected = got.isnan(), expected.isnan()
        if exact:
            wrong = (nan_got != nan_expected) | (~nan_expected & (got != expected))
        else:  # one rounding of the result's dtype apart
            rtol = 1e-5 if expected.dtype == torch.float32 else 2 * torch.finfo(expected.dtype).eps
            close = torch.isclose(got, expected, rtol=rtol, atol=1e-6, equal_nan=True)
            wrong = (nan_got != nan_expected) | ~close
        if signed_zeros:
            wrong |= (expected == 0) & (torch.signbit(got) != torch.signbit(expected))
    if wrong.any():
        at = wrong.nonzero()[:4].tolist()
        pairs = [(got[tuple(p)].item(), expected[tuple(p)].item()) for p in at]
        pytest.fail(f"{what}: {int(wrong.sum())} element(s) differ from torch, e.g. at {at} (got, torch) {pairs}")


@functools.cache
def _compiled(name: str, output_type: str, pipeline: str, config: str | int | None = None,
              dtype: torch.dtype = torch.float32) -> Any:
    """The kernel compiled once per variant; ``config``: "rolled", the index of a generated
    config, or None for the kernel's own."""
    kernel = getattr(kernels, name)
    x = torch.randn(*SHAPE).to(dtype)
    args = (x, x, 0.0, 1.0) if name == "activations" else (x,)
    chosen = ROLLED if config == "rolled" else _generated_configs()[config] if isinstance(config, int) else None
    return compile_kernel(kernel.bind(args), output_type=output_type, pipeline=pipeline, config=chosen)


ROLLED = helion.Config(block_sizes=[4], reduction_loops=[32])


_bounds = st.sampled_from((-1.0, 0.5, 0.0, -0.0, 2.0, math.nan, math.inf, -math.inf))


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
@EXAMPLES
@given(x=floats_with_specials(), y=floats_with_specials(), lo=_bounds, hi=_bounds)
def test_clamps_and_pairwise_extremes_keep_nan_and_zero_signs_as_torch(
    output_type: str, pipeline: str, x: torch.Tensor, y: torch.Tensor, lo: float, hi: float
) -> None:
    got = _compiled("activations", output_type, pipeline)(x, y, lo, hi)
    expected = kernels.activations_reference(x, y, lo, hi)
    names = ("clamp(x, -1, 1)", "clamp(x, lo, hi)", "relu", "hardsigmoid + relu6", "maximum", "minimum", "clamp_min(x, y)")
    for i, (g, e, name) in enumerate(zip(got, expected, names)):
        exact = i != 3  # hardsigmoid divides by 6
        assert_same(g, e, name, signed_zeros=i in kernels.ACTIVATIONS_SIGNED_ZEROS and exact, exact=exact)


def _check_rows(got: tuple[torch.Tensor, ...], x: torch.Tensor) -> None:
    names = ("amax", "amin", "max.dim values", "max.dim indices", "argmin", "softmax", "hl.reduce(maximum)")
    for g, e, name in zip(got, kernels.row_extremes_reference(x), names):
        assert_same(g, e, name, exact=name != "softmax")


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
@EXAMPLES
@given(x=floats_with_specials())
def test_row_maxima_minima_and_their_first_positions_match_torch(output_type: str, pipeline: str, x: torch.Tensor) -> None:
    _check_rows(_compiled("row_extremes", output_type, pipeline)(x), x)


@pytest.mark.parametrize(("output_type", "pipeline"), [
    ("linalg-on-tensors", "fast"), ("linalg-on-tensors", "plain"), ("tosa", "fast"), ("stablehlo", "plain"), ("raw", "fast"),
])
@EXAMPLES
@given(x=floats_with_specials())
def test_rolled_row_reductions_match_torch(output_type: str, pipeline: str, x: torch.Tensor) -> None:
    # zip in _check_rows stops at the six results; hl.reduce keeps Helion from rolling a row
    _check_rows(_compiled("rollable_row_extremes", output_type, pipeline, "rolled")(x), x)


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
@EXAMPLES
@given(x=floats_with_specials())
def test_a_row_maximum_taken_chunk_by_chunk_matches_torch(output_type: str, x: torch.Tensor) -> None:
    # amax over a ragged 32-column tile, then maximum with the running value.
    assert_same(_compiled("chunked_row_max", output_type, "fast")(x), kernels.chunked_row_max_reference(x), "row max")


@EXAMPLES
@given(x=floats_with_specials(dtype=torch.bfloat16))
def test_bfloat16_row_extremes_match_torch(x: torch.Tensor) -> None:
    _check_rows(_compiled("row_extremes", "linalg-on-tensors", "fast", dtype=torch.bfloat16)(x), x)


@EXAMPLES
@given(x=floats_with_specials(shape=(23, 70)))
def test_row_extremes_with_dynamic_shapes_match_torch(x: torch.Tensor) -> None:
    _check_rows(_dynamic_row_extremes("plain")(x), x)


def test_argmin_beside_max_dim_with_dynamic_shapes_in_the_fast_pipeline() -> None:
    # The index reductions share one fill: see test_parallel_insertions.py.
    x = torch.randn(23, 70)
    _check_rows(_dynamic_row_extremes("fast")(x), x)


@functools.cache
def _dynamic_row_extremes(pipeline: str) -> Any:
    kernel = helion.kernel(kernels.row_extremes.fn, config=helion.Config(block_sizes=[4]), static_shapes=False)
    return compile_kernel(kernel.bind((torch.randn(*SHAPE),)), pipeline=pipeline)


@EXAMPLES
@given(data=st.data())
def test_row_extremes_under_configs_from_helions_generator_match_torch(data: st.DataObject) -> None:
    x = data.draw(floats_with_specials())
    index = data.draw(st.integers(0, len(_generated_configs()) - 1))
    _check_rows(_compiled("row_extremes", "linalg-on-tensors", "fast", index)(x), x)


@functools.cache
def _generated_configs() -> list[helion.Config]:
    return random_configs(kernels.row_extremes.bind((torch.randn(*SHAPE),)), seed=11, count=3)


# -- the emitted forms ------------------------------------------------------------------------------
def _emit(name: str, output_type: str) -> str:
    x = torch.randn(*SHAPE)
    args = (x, x, 0.0, 1.0) if name == "activations" else (x,)
    return generate_mlir(getattr(kernels, name).bind(args), output_type=output_type)


def filecheck(text: str, patterns: str) -> None:
    run_filecheck(text, string.Template(patterns).substitute(V=SSA))


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_clamp_selects_the_bound_only_past_it_or_when_it_is_nan(output_type: str) -> None:
    # clamp(v, -1.0, 1.0): literal bounds need no NaN check; clamp(v, min=lo, max=hi) with
    # float arguments does. torch-mlir's linalg lowering used `cmpf ult` (NaN -> the bound).
    filecheck(_emit("activations", output_type), """
        // CHECK:      linalg.generic
        // CHECK-NEXT: ^bb0(%[[X:$V]]: f32, %{{$V}}: f32):
        // CHECK-NEXT:   %[[LO:$V]] = arith.constant -1.0 : f32
        // CHECK-NEXT:   %[[BELOW:$V]] = arith.cmpf olt, %[[X]], %[[LO]] : f32
        // CHECK-NEXT:   %[[R:$V]] = arith.select %[[BELOW]], %[[LO]], %[[X]] : f32
        // CHECK-NEXT:   linalg.yield %[[R]] : f32
        // CHECK:      linalg.generic
        // CHECK-NEXT: ^bb0(%[[Y:$V]]: f32, %{{$V}}: f32):
        // CHECK-NEXT:   %[[HI:$V]] = arith.constant 1.0 : f32
        // CHECK-NEXT:   %[[ABOVE:$V]] = arith.cmpf ogt, %[[Y]], %[[HI]] : f32
        // CHECK-NEXT:   %[[R2:$V]] = arith.select %[[ABOVE]], %[[HI]], %[[Y]] : f32
        // CHECK-NEXT:   linalg.yield %[[R2]] : f32
        // CHECK:      %[[RUNTIME:$V]] = arith.truncf %lo : f64 to f32
        // CHECK:      linalg.generic
        // CHECK-NEXT: ^bb0(%[[Z:$V]]: f32, %{{$V}}: f32):
        // CHECK-NEXT:   %[[PAST:$V]] = arith.cmpf olt, %[[Z]], %[[RUNTIME]] : f32
        // CHECK-NEXT:   %[[NAN:$V]] = arith.cmpf uno, %[[RUNTIME]], %[[RUNTIME]] : f32
        // CHECK-NEXT:   %[[EITHER:$V]] = arith.ori %[[PAST]], %[[NAN]] : i1
        // CHECK-NEXT:   arith.select %[[EITHER]], %[[RUNTIME]], %[[Z]] : f32
        // CHECK-NOT:  cmpf ult
        // CHECK:      arith.maximumf
        // CHECK:      arith.minimumf
    """)


def test_argmax_is_the_extreme_then_its_first_position_or_the_first_nan() -> None:
    # max.dim of a row: the maximum (a reduction with arith.maximumf, above), then the
    # smallest position whose lane equals it or is NaN. torch-mlir's stablehlo and linalg
    # lowerings took positions with a strict `>`, which skipped every NaN.
    filecheck(_emit("row_extremes", "stablehlo"), """
        // CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%{{$V}}, %{{$V}} : tensor<4x100xf32>, tensor<4xf32>) outs(%{{$V}} : tensor<4xi64>)
        // CHECK-NEXT: ^bb0(%[[LANE:$V]]: f32, %[[BEST:$V]]: f32, %[[FIRST:$V]]: i64):
        // CHECK-NEXT:   %[[I:$V]] = linalg.index 1 : index
        // CHECK-NEXT:   %[[POS:$V]] = arith.index_cast %[[I]] : index to i64
        // CHECK-NEXT:   %[[EQ:$V]] = arith.cmpf oeq, %[[LANE]], %[[BEST]] : f32
        // CHECK-NEXT:   %[[NAN:$V]] = arith.cmpf uno, %[[LANE]], %[[LANE]] : f32
        // CHECK-NEXT:   %[[HIT:$V]] = arith.ori %[[EQ]], %[[NAN]] : i1
        // CHECK:        %[[CAND:$V]] = arith.select %[[HIT]], %[[POS]], %{{$V}} : i64
        // CHECK-NEXT:   arith.minsi %[[CAND]], %[[FIRST]] : i64
    """)
