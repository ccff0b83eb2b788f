"""Spelling torch dtypes and shapes as MLIR types."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import torch

from .errors import HelionMLIRError

__all__ = [
    "element_type",
    "tensor_type",
    "storage_shape",
    "DTYPES_OF_ELEMENT_TYPES",
    "LOW_PRECISION_FLOATS",
    "PACKED_PAIR_DTYPES",
    "is_float",
    "is_bool",
    "is_signed_int",
    "scalar_type_of_python",
    "zero_literal",
    "literal",
]

_ELEMENT_TYPES: dict[torch.dtype, str] = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "i8",
    torch.bool: "i1",
    torch.float8_e4m3fn: "f8E4M3FN",
    torch.float8_e5m2: "f8E5M2",
    torch.float8_e4m3fnuz: "f8E4M3FNUZ",
    torch.float8_e5m2fnuz: "f8E5M2FNUZ",
    torch.float8_e8m0fnu: "f8E8M0FNU",
    torch.float4_e2m1fn_x2: "f4E2M1FN",  # one element per value: see storage_shape
}

#: The MLIR float types narrower than 16 bits. They have no LLVM type: their conversions
#: go through f32 (see lowering.emitter.scalar_convert_op and runtime.low_precision).
LOW_PRECISION_FLOATS = ("f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E8M0FNU", "f4E2M1FN")

#: Dtypes that pack two values per byte. A tensor of shape [..., N] of such a dtype is a
#: tensor<...xNx2x...> of its element type: the pair is a trailing dimension of 2, the
#: value in the low nibble first (docs/abi.md).
PACKED_PAIR_DTYPES = frozenset({torch.float4_e2m1fn_x2})


# MLIR element type -> the torch dtype a value of that type is read as: integers are
# signless in MLIR, so i8 reads as int8 (a uint8 tensor converts on the way in).
DTYPES_OF_ELEMENT_TYPES: dict[str, torch.dtype] = {
    name: dtype for dtype, name in reversed(list(_ELEMENT_TYPES.items())) if dtype is not torch.uint8
}


def element_type(dtype: torch.dtype) -> str:
    """The MLIR element type of a torch dtype (signless integers, as linalg and tosa use)."""
    try:
        return _ELEMENT_TYPES[dtype]
    except KeyError:
        raise HelionMLIRError(f"dtype {dtype} has no MLIR element type in helion_mlir") from None


def storage_shape(shape: Sequence[int | None], dtype: torch.dtype) -> tuple[int | None, ...]:
    """The MLIR shape of a torch tensor: its own, plus the pair dimension of a packed dtype."""
    return tuple(shape) + ((2,) if dtype in PACKED_PAIR_DTYPES else ())


def tensor_type(shape: Sequence[int | None], dtype: torch.dtype) -> str:
    """``tensor<4x?xf32>``; ``None`` marks a dynamic dimension."""
    dims = "".join(f"{'?' if d is None else int(d)}x" for d in shape)
    return f"tensor<{dims}{element_type(dtype)}>"


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def is_bool(dtype: torch.dtype) -> bool:
    return dtype == torch.bool


def is_signed_int(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and dtype not in (torch.bool, torch.uint8)


def scalar_type_of_python(value: object) -> str:
    """MLIR type of a Python scalar argument at the function boundary (Python floats are doubles)."""
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i64"
    if isinstance(value, float):
        return "f64"
    raise HelionMLIRError(f"unsupported scalar {value!r} of type {type(value).__name__}")


def literal(value: float | int | bool, dtype: torch.dtype) -> str:
    """An ``arith.constant`` literal of ``value`` in ``dtype`` (inf/nan spelled as hex floats)."""
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        v = float(value)
        if v != v or v in (float("inf"), float("-inf")):
            return _float_bits_literal(v, dtype)
        text = repr(v)  # shortest round-trip; MLIR wants a '.' in a float literal (1.0e-12)
        if "." not in text:
            mantissa, _, exponent = text.partition("e")
            text = f"{mantissa}.0" + (f"e{exponent}" if exponent else "")
        return text
    return str(int(value))


def zero_literal(dtype: torch.dtype) -> str:
    return literal(0, dtype)


def _float_bits_literal(value: float, dtype: torch.dtype) -> str:
    """The bit pattern of ``value`` (an inf or nan) in ``dtype``, as MLIR's hex float literal."""
    if dtype == torch.bfloat16:  # the upper half of the float32 pattern (exact for inf and nan)
        raw = struct.unpack(">I", struct.pack(">f", value))[0] >> 16
        return f"0x{raw:04X}"
    if dtype in PACKED_PAIR_DTYPES:
        raise HelionMLIRError(f"{dtype} has no inf or NaN")
    if dtype.itemsize == 1:  # float8: torch's own conversion (e4m3fn saturates inf to +-448)
        raw = torch.tensor(value).to(dtype).view(torch.uint8).item()
        return f"0x{raw:02X}"
    code, width = {torch.float64: ("d", 64), torch.float32: ("f", 32), torch.float16: ("e", 16)}[dtype]
    raw = int.from_bytes(struct.pack(f">{code}", value), "big")
    return f"0x{raw:0{width // 4}X}"
