"""Spelling torch dtypes and shapes as MLIR types, and numbers as MLIR literals; what
each MLIR scalar type is (its width, float or integer).

:func:`literal` is the one place the package prints a number into IR. MLIR's float
literal needs a ``.`` in its mantissa (``1.0e-06``, not Python's ``1e-06``), and MLIR reads
a decimal literal as the nearest double, then rounds that to the attribute's type
(nearest, ties to even); torch, however, rounds a Python float to ``float16`` and
``bfloat16`` through ``float32``. So a value is first stored the way torch stores it in
the dtype, then spelled with the fewest significant digits MLIR reads back as exactly
those bits; infinities and NaNs are spelled as hex bit patterns, which MLIR takes as is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from .errors import HelionMLIRError

__all__ = [
    "element_type",
    "torch_element_type",
    "tensor_type",
    "storage_shape",
    "DTYPES_OF_ELEMENT_TYPES",
    "LOW_PRECISION_FLOATS",
    "PACKED_PAIR_DTYPES",
    "SIGNED_OF_UNSIGNED",
    "UNSIGNED_DTYPES",
    "bit_width",
    "is_float_type",
    "is_int_type",
    "scalar_type_of_python",
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
    torch.uint16: "i16",
    torch.uint32: "i32",
    torch.uint64: "i64",
    torch.bool: "i1",
    torch.float8_e4m3fn: "f8E4M3FN",
    torch.float8_e5m2: "f8E5M2",
    torch.float8_e4m3fnuz: "f8E4M3FNUZ",
    torch.float8_e5m2fnuz: "f8E5M2FNUZ",
    torch.float8_e8m0fnu: "f8E8M0FNU",
    torch.float4_e2m1fn_x2: "f4E2M1FN",  # one element per value: see storage_shape
}

#: The MLIR float types narrower than 16 bits. They have no LLVM type: their conversions
#: go through f32 (see lowering.emitter.scalar_convert_op and runtime.rewrites.low_precision_floats).
LOW_PRECISION_FLOATS = ("f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E8M0FNU", "f4E2M1FN")

#: Dtypes that pack two values per byte. A tensor of shape [..., N] of such a dtype is a
#: tensor<...xNx2x...> of its element type: the pair is a trailing dimension of 2, the
#: value in the low nibble first (docs/abi.md).
PACKED_PAIR_DTYPES = frozenset({torch.float4_e2m1fn_x2})


#: Unsigned integer dtypes: signless integers of their width in MLIR, unsigned in the ops.
UNSIGNED_DTYPES = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)

#: The signed dtype of each unsigned one's width (the dtype its MLIR element type reads as).
SIGNED_OF_UNSIGNED = {torch.uint8: torch.int8, torch.uint16: torch.int16, torch.uint32: torch.int32,
                      torch.uint64: torch.int64}

# MLIR element type -> the torch dtype a value of that type is read as: integers are
# signless in MLIR, so i8 reads as int8 (a uint8 tensor converts on the way in).
DTYPES_OF_ELEMENT_TYPES: dict[str, torch.dtype] = {
    name: dtype for dtype, name in reversed(list(_ELEMENT_TYPES.items())) if dtype not in UNSIGNED_DTYPES
}


def element_type(dtype: torch.dtype) -> str:
    """The MLIR element type of a torch dtype (signless integers, as linalg and tosa use)."""
    try:
        return _ELEMENT_TYPES[dtype]
    except KeyError:
        raise HelionMLIRError(f"dtype {dtype} has no MLIR element type in helion_mlir") from None


def torch_element_type(dtype: torch.dtype) -> str:
    """The element type of the torch dialect's ``!torch.vtensor`` for a dtype: integers are
    signed (``si64``) or unsigned (``ui8``) there, ``i1`` and floats as in :func:`element_type`."""
    name = element_type(dtype)
    if dtype in UNSIGNED_DTYPES:
        return "u" + name
    if dtype.is_floating_point or dtype == torch.bool:
        return name
    return "s" + name


#: Bit width of each MLIR integer and float type the package uses (``index`` aside).
_INT_WIDTHS: dict[str, int] = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
_FLOAT_WIDTHS: dict[str, int] = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64} | {
    t: 4 if t.startswith("f4") else 8 for t in LOW_PRECISION_FLOATS
}


def bit_width(mlir_type: str) -> int:
    """The width in bits of an MLIR integer or float type."""
    width = _INT_WIDTHS.get(mlir_type) or _FLOAT_WIDTHS.get(mlir_type)
    if width is None:
        raise HelionMLIRError(f"{mlir_type} is not an integer or float type helion_mlir knows")
    return width


def is_float_type(mlir_type: str) -> bool:
    return mlir_type in _FLOAT_WIDTHS


def is_int_type(mlir_type: str) -> bool:
    """A signless integer type (``i1`` ... ``i64``; ``index`` is not one)."""
    return mlir_type in _INT_WIDTHS


def storage_shape(shape: Sequence[int | None], dtype: torch.dtype) -> tuple[int | None, ...]:
    """The MLIR shape of a torch tensor: its own, plus the pair dimension of a packed dtype."""
    return tuple(shape) + ((2,) if dtype in PACKED_PAIR_DTYPES else ())


def tensor_type(shape: Sequence[int | None], dtype: torch.dtype) -> str:
    """``tensor<4x?xf32>``; ``None`` marks a dynamic dimension."""
    dims = "".join(f"{'?' if d is None else int(d)}x" for d in shape)
    return f"tensor<{dims}{element_type(dtype)}>"


def scalar_type_of_python(value: object) -> str:
    """MLIR type of a Python scalar argument at the function boundary (Python floats are doubles)."""
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i64"
    if isinstance(value, float):
        return "f64"
    raise HelionMLIRError(f"unsupported scalar {value!r} of type {type(value).__name__}")


# ---------------------------------------------------------------------------- literals
# (exponent bits, stored mantissa bits) of the float types.
_FLOAT_FORMATS: dict[str, tuple[int, int]] = {"f64": (11, 52), "f32": (8, 23), "f16": (5, 10), "bf16": (8, 7)}
_SAME_WIDTH_INT = {"f64": torch.int64, "f32": torch.int32, "f16": torch.int16, "bf16": torch.int16,
                   **{t: torch.uint8 for t in LOW_PRECISION_FLOATS if t != "f4E2M1FN"}}  # float8
_MAX_DIGITS = 17  # enough for any double


def literal(value: float | int | bool, mlir_type: str) -> str:
    """The literal of ``value`` as an ``arith.constant`` of ``mlir_type`` reads it.

    Floats are rounded as torch stores them in that type (``inf`` beyond its range).
    Integers must fit: signless types take the signed and the unsigned range (an ``i8``
    holds int8 and uint8 values), ``index`` the signed 64-bit one; a float is truncated
    towards zero first, as torch converts it. ``i1`` is ``true``/``false``.
    """
    if mlir_type == "i1":
        return "true" if value else "false"
    if mlir_type in _FLOAT_FORMATS:
        return _float_literal(value, mlir_type)
    if mlir_type in LOW_PRECISION_FLOATS:
        return _low_precision_literal(value, mlir_type)
    if mlir_type == "index":
        return _int_literal(value, -(2**63), 2**63 - 1, mlir_type)
    if is_int_type(mlir_type):
        width = bit_width(mlir_type)
        return _int_literal(value, -(2 ** (width - 1)), 2**width - 1, mlir_type)
    raise HelionMLIRError(f"helion_mlir has no literal of type {mlir_type}")


def float_bits(value: float | int | bool, mlir_type: str) -> int:
    """The bit pattern torch stores for ``value`` in the float type, as an unsigned int."""
    try:
        number = float(value)
    except OverflowError:  # an int beyond the doubles
        raise HelionMLIRError(f"{value} is too large for {mlir_type}") from None
    # On a real CPU tensor, outside any fake mode the caller has active: emission runs in the
    # bound kernel's fake mode, which every thread emitting that kernel shares (and which
    # would cost a fake dispatch per op).
    with unset_fake_temporarily():
        stored = torch.tensor(number, dtype=torch.float64, device="cpu").to(DTYPES_OF_ELEMENT_TYPES[mlir_type])
        return int(stored.view(_SAME_WIDTH_INT[mlir_type]).item()) % (1 << (8 * stored.element_size()))


def _int_literal(value: float | int | bool, low: int, high: int, mlir_type: str) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise HelionMLIRError(f"{value} has no value of type {mlir_type}")
        value = math.trunc(value)
    number = int(value)
    if not low <= number <= high:
        raise HelionMLIRError(f"{number} is out of range for {mlir_type} ({low}..{high})")
    return str(number)


def _float_literal(value: float | int | bool, mlir_type: str) -> str:
    bits = float_bits(value, mlir_type)
    exponent_bits, mantissa_bits = _FLOAT_FORMATS[mlir_type]
    stored = _value_of(bits, exponent_bits, mantissa_bits)
    if math.isfinite(stored):
        for digits in range(1, _MAX_DIGITS + 1):
            read = float(f"{stored:.{digits}g}")  # the double MLIR reads from the shortest decimal
            if _round_to_format(read, exponent_bits, mantissa_bits) == bits:
                return _spelled(read)
    return f"0x{bits:0{(1 + exponent_bits + mantissa_bits) // 4}X}"


def _spelled(x: float) -> str:
    """Python's shortest spelling of the double ``x`` (``100.0``, ``1e-06``), with the ``.``
    MLIR's float literal needs in the mantissa (``1.0e-06``)."""
    mantissa, e, exponent = repr(x).partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exponent


def _value_of(bits: int, exponent_bits: int, mantissa_bits: int) -> float:
    """The exact value of a bit pattern of the format (NaN for every NaN pattern)."""
    sign = -1.0 if bits >> (exponent_bits + mantissa_bits) else 1.0
    biased = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    fraction = bits & ((1 << mantissa_bits) - 1)
    bias = (1 << (exponent_bits - 1)) - 1
    if biased == (1 << exponent_bits) - 1:
        return sign * math.inf if fraction == 0 else math.nan
    if biased == 0:
        return sign * math.ldexp(fraction, 1 - bias - mantissa_bits)
    return sign * math.ldexp(fraction | (1 << mantissa_bits), biased - bias - mantissa_bits)


def _round_to_format(x: float, exponent_bits: int, mantissa_bits: int) -> int:
    """The bits of the non-NaN double ``x`` rounded to the format, to nearest with ties to
    even: what MLIR makes of the double it reads from a decimal literal."""
    sign = 1 << (exponent_bits + mantissa_bits) if math.copysign(1.0, x) < 0 else 0
    infinity = sign | (((1 << exponent_bits) - 1) << mantissa_bits)
    x = abs(x)
    if math.isinf(x):
        return infinity
    if x == 0:
        return sign
    bias = (1 << (exponent_bits - 1)) - 1
    fraction, exponent = math.frexp(x)  # x = fraction * 2**exponent, 0.5 <= fraction < 1
    scaled = int(fraction * (1 << 53))  # x = scaled * 2**(exponent - 53), exactly
    last_place = max(exponent - 1, 1 - bias) - mantissa_bits  # subnormals share the lowest exponent
    shift = last_place - (exponent - 53)
    if shift <= 0:
        places = scaled << -shift
    else:
        places, rest = scaled >> shift, scaled & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and places & 1):
            places += 1
    biased = last_place + mantissa_bits + bias
    if places >> (mantissa_bits + 1):  # rounding carried into the next binade
        places >>= 1
        biased += 1
    if places >> mantissa_bits == 0:  # subnormal or zero
        biased = 0
    if biased >= (1 << exponent_bits) - 1:
        return infinity
    return sign | (biased << mantissa_bits) | (places & ((1 << mantissa_bits) - 1))


# The magnitudes of f4E2M1FN by code (sign in the fourth bit).
_F4_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _low_precision_literal(value: float | int | bool, mlir_type: str) -> str:
    """A float8 or float4 constant as its bit pattern (hex), which MLIR takes as is.

    float8: the bits torch's conversion stores, with each format's own rules for overflow
    and NaN. float4 (which torch cannot convert to): the nearest magnitude, ties to the
    even code, saturating at 6 like the hardware's satfinite conversions.
    """
    number = float(value)
    if mlir_type == "f4E2M1FN":
        if math.isnan(number):
            raise HelionMLIRError("f4E2M1FN has no NaN")
        magnitude = min(abs(number), 6.0)
        code = min(range(8), key=lambda c: (abs(_F4_MAGNITUDES[c] - magnitude), c & 1))
        return f"0x{(8 if math.copysign(1.0, number) < 0 else 0) | code:X}"
    return f"0x{float_bits(number, mlir_type):02X}"
