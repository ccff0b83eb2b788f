"""Low-precision types: float8 constants are read back as the codes torch stores, and packed
float4 tensors carry their pair dimension. (Every other dtype: tests/test_mlir_literals.py.)"""

from __future__ import annotations

import math

import pytest
import torch
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


@pytest.mark.parametrize(
    "dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz], ids=str
)
@pytest.mark.parametrize("value", [float("inf"), -float("inf"), float("nan")])
def test_float8_inf_and_nan_are_torchs_codes(dtype: torch.dtype, value: float) -> None:
    parsed = _parsed(literal(value, element_type(dtype)), element_type(dtype))
    expected = torch.tensor(value).to(dtype).float().item()
    assert parsed == expected or (math.isnan(parsed) and math.isnan(expected))


def test_a_packed_float4_tensor_type_has_the_pair_dimension() -> None:
    shape = storage_shape([4096, None, 8], torch.float4_e2m1fn_x2)
    assert tensor_type(shape, torch.float4_e2m1fn_x2) == "tensor<4096x?x8x2xf4E2M1FN>"
    assert storage_shape([3, 4], torch.uint8) == (3, 4)


@pytest.mark.parametrize(("value", "expected"), [(0.25, 0.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (5.0, 4.0),
                                                 (-5.5, -6.0), (100.0, 6.0), (-0.0, -0.0)])
def test_float4_constants_round_to_nearest_even_and_saturate(value: float, expected: float) -> None:
    parsed = _parsed(literal(value, "f4E2M1FN"), "f4E2M1FN")
    assert parsed == expected and math.copysign(1.0, parsed) == math.copysign(1.0, expected)
