"""Constants are spelled so that MLIR reads back the value meant, in every float dtype."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch_mlir import ir

from helion_mlir.mlir_context import mlir_session
from helion_mlir.mlir_types import element_type, literal, storage_shape, tensor_type
from helion_mlir.verify import parse_module


def _parsed(text: str, mlir_type: str) -> float:
    """The value MLIR reads from ``arith.constant <text> : <mlir_type>``."""
    with mlir_session():
        module = parse_module(f"func.func @f() -> {mlir_type} {{\n  %c = arith.constant {text} : {mlir_type}\n  return %c : {mlir_type}\n}}")
        constant = module.body.operations[0].regions[0].blocks[0].operations[0]
        return ir.FloatAttr(constant.attributes["value"]).value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_double_is_read_back_exactly(value: float) -> None:
    assert _parsed(literal(value, torch.float64), "f64") == value


@pytest.mark.parametrize("value", [1e-12, 1e-5, 2.5e-8, 1e300, -3e-45, 1e16, 5.0])
def test_literals_with_an_exponent_have_the_dot_mlir_needs(value: float) -> None:
    text = literal(value, torch.float32)
    assert "." in text
    assert _parsed(text, "f32") == float(torch.tensor(value, dtype=torch.float32))


@pytest.mark.parametrize(
    "dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz], ids=str
)
@pytest.mark.parametrize("value", [float("inf"), -float("inf"), float("nan")])
def test_float8_inf_and_nan_are_torchs_codes(dtype: torch.dtype, value: float) -> None:
    parsed = _parsed(literal(value, dtype), element_type(dtype))
    expected = torch.tensor(value).to(dtype).float().item()
    assert parsed == expected or (math.isnan(parsed) and math.isnan(expected))


def test_a_packed_float4_tensor_type_has_the_pair_dimension() -> None:
    shape = storage_shape([4096, None, 8], torch.float4_e2m1fn_x2)
    assert tensor_type(shape, torch.float4_e2m1fn_x2) == "tensor<4096x?x8x2xf4E2M1FN>"
    assert storage_shape([3, 4], torch.uint8) == (3, 4)
