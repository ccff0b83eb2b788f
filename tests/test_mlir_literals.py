"""Every number the package prints into IR is one MLIR reads back as exactly the intended bits.

``mlir_types.literal`` is the only printer of numbers. Each literal is parsed by torch-mlir's
MLIR (the shared context) as an ``arith.constant``; its bits are read back through an
``arith.bitcast`` that the canonicalizer folds into an integer constant, so NaN payloads,
signed zeros and subnormals are compared exactly. The intended bits are the ones torch
stores for the value in that dtype (half types round through float32, as torch does).
Kernels with float literals (``examples/rms_norm_eps.py``, ``gelu_tanh_manual.py``) show
the spelling in emitted modules.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from examples_util import load_example_by_name
from filecheck_util import run_filecheck
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch_mlir import ir, passmanager

from helion_mlir import generate_mlir
from helion_mlir.errors import HelionMLIRError
from helion_mlir.mlir_context import mlir_session
from helion_mlir.mlir_types import _round_to_format, _value_of, element_type, float_bits, literal

FLOAT_TYPES = {"f64": ("i64", 64), "f32": ("i32", 32), "f16": ("i16", 16), "bf16": ("i16", 16)}
FORMATS = {"f64": (11, 52), "f32": (8, 23), "f16": (5, 10), "bf16": (8, 7)}
INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def examples(count: int) -> int:
    """``count`` examples under the ci profile; more when the loaded profile asks for more (explore)."""
    return max(count, settings.default.max_examples)


def _only_op(module: ir.Module) -> ir.Operation:
    return module.body.operations[0].regions[0].blocks[0].operations[0]


def parsed_bits(text: str, mlir_type: str) -> int:
    """The bits of ``arith.constant <text> : <mlir_type>`` as MLIR reads them (unsigned)."""
    int_type, width = FLOAT_TYPES[mlir_type]
    source = (
        f"func.func @f() -> {int_type} {{\n"
        f"  %c = arith.constant {text} : {mlir_type}\n"
        f"  %b = arith.bitcast %c : {mlir_type} to {int_type}\n"
        f"  return %b : {int_type}\n}}"
    )
    with mlir_session():
        module = ir.Module.parse(source)
        passmanager.PassManager.parse("builtin.module(func.func(canonicalize))").run(module.operation)
        return ir.IntegerAttr(_only_op(module).attributes["value"]).value % (1 << width)


def parsed_int(text: str, mlir_type: str) -> int:
    source = f"func.func @f() -> {mlir_type} {{\n  %c = arith.constant {text} : {mlir_type}\n  return %c : {mlir_type}\n}}"
    with mlir_session():
        return ir.IntegerAttr(_only_op(ir.Module.parse(source)).attributes["value"]).value


SPECIAL_FLOATS = [0.0, -0.0, 5e-324, -5e-324, 1e-6, 1e-5, 0.1, 1 / 3, 65504.0, 65520.0, 3.3895313892515355e38,
                  1.0 + 2**-11 + 2**-30, 1.0 + 2**-8 + 2**-30, 1e300, math.inf, -math.inf, math.nan]


@settings(max_examples=examples(400))
@given(value=st.floats() | st.sampled_from(SPECIAL_FLOATS), mlir_type=st.sampled_from(list(FLOAT_TYPES)))
def test_float_literal_reads_back_as_the_bits_torch_stores(value: float, mlir_type: str) -> None:
    text = literal(value, mlir_type)
    assert parsed_bits(text, mlir_type) == float_bits(value, mlir_type), text


@settings(max_examples=examples(400))
@given(data=st.data(), mlir_type=st.sampled_from(list(FLOAT_TYPES)))
def test_every_finite_and_infinite_bit_pattern_survives_printing(data: st.DataObject, mlir_type: str) -> None:
    _int_type, width = FLOAT_TYPES[mlir_type]
    bits = data.draw(st.integers(0, (1 << width) - 1), label="bits")
    value = _value_of(bits, *FORMATS[mlir_type])
    if math.isnan(value):  # a Python float cannot carry every NaN payload of a narrower type
        return
    assert float_bits(value, mlir_type) == bits  # representable values are stored as they are
    assert parsed_bits(literal(value, mlir_type), mlir_type) == bits


@settings(max_examples=examples(300))
@given(data=st.data(), dtype=st.sampled_from(INT_DTYPES))
def test_integer_literal_reads_back_in_every_integer_dtype(data: st.DataObject, dtype: torch.dtype) -> None:
    info = torch.iinfo(dtype)
    value = data.draw(st.integers(info.min, info.max), label="value")
    mlir_type = element_type(dtype)
    width = info.bits
    assert parsed_int(literal(value, mlir_type), mlir_type) % (1 << width) == value % (1 << width)
    if abs(value) < 2**52:  # a float is truncated towards zero, as torch converts it
        assert literal(value + math.copysign(0.5, value), mlir_type) == str(value)


@given(value=st.booleans())
def test_bool_literal_is_true_or_false(value: bool) -> None:
    assert literal(value, element_type(torch.bool)) == ("true" if value else "false")
    source = f"func.func @f() -> i1 {{\n  %c = arith.constant {literal(value, 'i1')}\n  return %c : i1\n}}"
    with mlir_session():
        assert ir.BoolAttr(_only_op(ir.Module.parse(source)).attributes["value"]).value is value


@settings(max_examples=examples(2000))
@given(value=st.floats(allow_nan=False))
@example(1.0 + 2**-11)  # a tie between two float16 values
@example(2.0**-149 * 1.5)  # a tie between float32 subnormals
def test_rounding_of_a_double_matches_the_ieee_conversion(value: float) -> None:
    with np.errstate(over="ignore"):
        assert _round_to_format(value, 8, 23) == int(np.array(value).astype(np.float32).view(np.uint32))
        assert _round_to_format(value, 5, 10) == int(np.array(value).astype(np.float16).view(np.uint16))
    assert _round_to_format(value, 11, 52) == int(np.array(value).view(np.uint64))


@pytest.mark.parametrize(("value", "mlir_type", "text"), [
    (1e-6, "f32", "1.0e-06"), (1e-5, "f64", "1.0e-05"), (0.1, "f32", "0.1"), (3.0, "f16", "3.0"),
    (-0.0, "bf16", "-0.0"), (math.inf, "f32", "0x7F800000"), (-math.inf, "bf16", "0xFF80"),
    (0.044715, "f32", "0.044715"), (65520.0, "f16", "0x7C00"), (200, "i8", "200"),
    (-128, "i8", "-128"), (7, "index", "7"),
])
def test_literals_are_the_shortest_spelling_mlir_reads_back(value: float, mlir_type: str, text: str) -> None:
    assert literal(value, mlir_type) == text


@pytest.mark.parametrize(("value", "mlir_type"), [
    (256, "i8"), (-129, "i8"), (2**64, "i64"), (2**63, "index"), (math.inf, "i32"), (math.nan, "i64"), (1.0, "tf32"),
])
def test_numbers_a_type_cannot_hold_are_refused(value: float, mlir_type: str) -> None:
    with pytest.raises(HelionMLIRError):
        literal(value, mlir_type)


# ------------------------------------------------------------------ in emitted kernels
@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "tosa", "stablehlo"])
def test_kernel_float_literals_are_spelled_for_mlir(output_type: str) -> None:
    # rms_norm_eps adds the literal 1e-6, gelu_tanh_manual multiplies by four constants;
    # each becomes a float32 0-d tensor (the compute type) built from one arith.constant.
    rms = load_example_by_name("rms_norm_eps")
    run_filecheck(generate_mlir(rms.KERNEL.bind(rms.make_args("ragged")), output_type=output_type), """
        // CHECK: %[[EPS:[A-Za-z0-9_]+]] = arith.constant 1.0e-06 : f32
        // CHECK-NEXT: tensor.from_elements %[[EPS]] : tensor<f32>
    """)
    gelu = load_example_by_name("gelu_tanh_manual")
    run_filecheck(generate_mlir(gelu.KERNEL.bind(gelu.make_args("ragged")), output_type=output_type), """
        // CHECK-DAG: arith.constant 0.044715 : f32
        // CHECK-DAG: arith.constant 0.7978846 : f32
        // CHECK-DAG: arith.constant 0.5 : f32
        // CHECK-DAG: arith.constant 1.0 : f32
    """)
