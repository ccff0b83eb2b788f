"""8- and 4-bit float conversions as integer code, exact as torch converts.

LLVM has no 8- or 4-bit float types: memrefs of ``f8E4M3FN`` and friends lower to ``i8``
(``f4E2M1FN`` to ``i4``) storage, but ``arith.extf`` / ``arith.truncf`` on them have no
lowering, and the expansions MLIR ships (``arith-expand`` for f8E8M0FNU and f4E2M1FN)
round differently from torch. :func:`emulate_low_precision_floats` runs after
bufferization, after the upstream passes of :data:`MOVE_TO_F32` (named steps of the
pipelines): ``arith-emulate-unsupported-floats`` moves every other arith op on these
types to f32; then each remaining ``extf`` / ``truncf`` becomes a call of a small private
function of integer ops, defined in the module only when used; LLVM inlines them.

The functions reproduce torch's conversions bit for bit (measured over every code of each
8-bit format and millions of f32 inputs, see tests/test_low_precision.py):

- f8 -> f32 is exact; NaN codes decode to torch's NaN bit patterns.
- f32 -> f8 rounds to nearest, ties to even, with each format's overflow rule: e5m2 to
  inf, the FN formats to their NaN (e4m3fn: 0x7F), the FNUZ formats to 0x80 (their only
  NaN, which is also what NaN and inf become; they have no -0), f4E2M1FN saturates to +-6.
  torch saturates e4m3fn instead: the lowering emits that clamp explicitly before the
  ``truncf``, so the module says what torch does and the conversion here stays MLIR's.
- f8E8M0FNU takes the magnitude and rounds to the nearest power of two, ties away from
  zero, as torch does (including torch's treatment of f32 subnormals: code 1 above 2^-127).
- Sources other than f32 go through f32 first (f64 is rounded to f32, as torch does).

This stands in for upstream's ``arith-expand`` conversions, which cover only f8E8M0FNU and
f4E2M1FN and differ from torch there (e8m0's 2^-127 flushed to 0 and rounding toward zero,
an e2m1 ``truncf`` that does not round to nearest even), and for ``arith-to-apfloat``, which
needs a runtime library the wheel does not ship.
"""

from __future__ import annotations

import dataclasses

from torch_mlir import ir

from .....mlir_types import LOW_PRECISION_FLOATS
from ..ir_walk import ops_where

__all__ = ["MOVE_TO_F32", "emulate_low_precision_floats", "uses_low_precision_floats"]


@dataclasses.dataclass(frozen=True)
class _Format:
    """An IEEE-like format: sign bit (except e8m0), exponent, mantissa, bias, special codes."""

    width: int
    exp_bits: int
    man_bits: int
    bias: int
    max_code: int  # largest finite magnitude code
    overflow_code: int  # magnitude code of a result too large to represent
    nan_code: int  # code a NaN input becomes
    no_negative_zero: bool  # FNUZ: 0x80 is NaN, -0.0 becomes +0.0


_FORMATS: dict[str, _Format] = {
    "f8E4M3FN": _Format(8, 4, 3, 7, 0x7E, 0x7F, 0x7F, False),
    "f8E5M2": _Format(8, 5, 2, 15, 0x7B, 0x7C, 0x7F, False),
    "f8E4M3FNUZ": _Format(8, 4, 3, 8, 0x7F, 0x80, 0x80, True),
    "f8E5M2FNUZ": _Format(8, 5, 2, 16, 0x7F, 0x80, 0x80, True),
    "f4E2M1FN": _Format(4, 2, 1, 1, 0x7, 0x7, 0x7, False),
}
_E8M0 = "f8E8M0FNU"
assert set(LOW_PRECISION_FLOATS) == {*_FORMATS, _E8M0}

_TORCH_FNUZ_NAN = 0x7F800001  # what torch decodes the FNUZ and e8m0 NaN codes to


class _Body:
    """Straight-line i32 code of one helper function, one SSA value per line."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, op: str) -> str:
        name = f"%v{len(self.lines)}"
        self.lines.append(f"  {name} = {op}")
        return name

    def const(self, value: int, type_: str = "i32") -> str:
        return self(f"arith.constant {value} : {type_}")

    def binary(self, op: str, a: str, b: str | int, type_: str = "i32") -> str:
        rhs = self.const(b, type_) if isinstance(b, int) else b
        return self(f"arith.{op} {a}, {rhs} : {type_}")

    def cmp(self, predicate: str, a: str, b: int) -> str:
        return self(f"arith.cmpi {predicate}, {a}, {self.const(b)} : i32")

    def select(self, cond: str, a: str | int, b: str | int) -> str:
        a = self.const(a) if isinstance(a, int) else a
        b = self.const(b) if isinstance(b, int) else b
        return self(f"arith.select {cond}, {a}, {b} : i32")

    def function(self, name: str, arg_type: str, result: str, result_type: str) -> str:
        body = "\n".join(self.lines)
        return (
            f"func.func private @{name}(%x: {arg_type}) -> {result_type} {{\n"
            f"{body}\n  return {result} : {result_type}\n}}\n"
        )


def _extf(type_: str) -> str:
    """``type_`` -> f32, exact."""
    b = _Body()
    if type_ == _E8M0:
        u = b(f"arith.extui {b(f'arith.bitcast %x : {type_} to i8')} : i8 to i32")
        bits = b.select(b.cmp("eq", u, 0), 0x400000, b.binary("shli", u, 23))  # code 0 is 2^-127
        bits = b.select(b.cmp("eq", u, 0xFF), _TORCH_FNUZ_NAN, bits)
        return b.function(f"__helion_mlir_extf_{type_}", type_, b(f"arith.bitcast {bits} : i32 to f32"), "f32")
    fmt = _FORMATS[type_]
    narrow = f"i{fmt.width}"
    u = b(f"arith.extui {b(f'arith.bitcast %x : {type_} to {narrow}')} : {narrow} to i32")
    sign = b.binary("shli", b.binary("shrui", u, fmt.width - 1), 31)
    exponent = b.binary("andi", b.binary("shrui", u, fmt.man_bits), (1 << fmt.exp_bits) - 1)
    mantissa = b.binary("andi", u, (1 << fmt.man_bits) - 1)
    normal = b.binary(
        "ori",
        b.binary("shli", b.binary("addi", exponent, 127 - fmt.bias), 23),
        b.binary("shli", mantissa, 23 - fmt.man_bits),
    )
    # A subnormal is its mantissa times the smallest subnormal, exact in f32.
    smallest = 2.0 ** (1 - fmt.bias - fmt.man_bits)
    scaled = b(f"arith.mulf {b(f'arith.uitofp {mantissa} : i32 to f32')}, {b(f'arith.constant {smallest!r} : f32')} : f32")
    subnormal = b(f"arith.bitcast {scaled} : f32 to i32")
    bits = b.binary("ori", sign, b.select(b.cmp("eq", exponent, 0), subnormal, normal))
    magnitude = b.binary("andi", u, (1 << (fmt.width - 1)) - 1)
    if type_ == "f8E4M3FN":  # S.1111.111 is NaN; torch decodes it with the mantissa bits in place
        bits = b.select(b.cmp("eq", magnitude, 0x7F), b.binary("ori", sign, 0x7FF00000), bits)
    elif type_ == "f8E5M2":  # IEEE: exponent 31 is inf (mantissa 0) or NaN, payload kept
        special = b.cmp("eq", exponent, 31)
        inf = b.binary("ori", sign, 0x7F800000)
        nan = b.binary("ori", inf, b.binary("ori", b.binary("shli", mantissa, 21), 0x400000))
        bits = b.select(special, b.select(b.cmp("ne", mantissa, 0), nan, inf), bits)
    elif fmt.no_negative_zero:
        bits = b.select(b.cmp("eq", u, 0x80), _TORCH_FNUZ_NAN, bits)
    return b.function(f"__helion_mlir_extf_{type_}", type_, b(f"arith.bitcast {bits} : i32 to f32"), "f32")


def _truncf(type_: str) -> str:
    """f32 -> ``type_``: round to nearest even, the format's overflow and NaN codes."""
    b = _Body()
    u = b("arith.bitcast %x : f32 to i32")
    a = b.binary("andi", u, 0x7FFFFFFF)
    if type_ == _E8M0:
        # Nearest power of two of |x|, ties away from zero: add half an exponent step.
        normal = b.binary("minui", b.binary("shrui", b.binary("addi", a, 0x400000), 23), 0xFF)
        subnormal = b(f"arith.extui {b.cmp('ugt', a, 0x400000)} : i1 to i32")
        code = b.select(b.cmp("ult", a, 0x800000), subnormal, normal)
        code = b.select(b.cmp("ugt", a, 0x7F800000), 0xFF, code)
        narrow = b(f"arith.trunci {code} : i32 to i8")
        return b.function(f"__helion_mlir_truncf_{type_}", "f32", b(f"arith.bitcast {narrow} : i8 to {type_}"), type_)
    fmt = _FORMATS[type_]
    # Below the smallest normal: adding 2^23 times the smallest subnormal makes the f32
    # adder round |x| to a multiple of it (to nearest even); the low bits are the code.
    magic = (127 + 24 - fmt.bias - fmt.man_bits) << 23
    summed = b(
        f"arith.addf {b(f'arith.bitcast {a} : i32 to f32')}, "
        f"{b(f'arith.bitcast {b.const(magic)} : i32 to f32')} : f32"
    )
    subnormal = b.binary("subi", b(f"arith.bitcast {summed} : f32 to i32"), magic)
    # Normal: rebias the exponent, round the dropped mantissa bits to nearest even, shift.
    shift = 23 - fmt.man_bits
    odd = b.binary("andi", b.binary("shrui", a, shift), 1)
    rounded = b.binary("addi", b.binary("addi", a, (fmt.bias - 127) << 23), b.binary("addi", odd, (1 << (shift - 1)) - 1))
    normal = b.binary("shrui", rounded, shift)
    code = b.select(b.cmp("ult", a, (128 - fmt.bias) << 23), subnormal, normal)
    code = b.select(b.cmp("ugt", code, fmt.max_code), fmt.overflow_code, code)
    code = b.select(b.cmp("ugt", a, 0x7F800000), fmt.nan_code, code)
    sign = b.binary("shli", b.binary("shrui", u, 31), fmt.width - 1)
    if fmt.no_negative_zero:  # no -0, and the NaN code is the sign bit alone
        signed = b(f"arith.andi {b.cmp('ne', code, 0)}, {b.cmp('ne', code, 0x80)} : i1")
        sign = b.select(signed, sign, 0)
    narrow_type = f"i{fmt.width}"
    narrow = b(f"arith.trunci {b.binary('ori', code, sign)} : i32 to {narrow_type}")
    return b.function(f"__helion_mlir_truncf_{type_}", "f32", b(f"arith.bitcast {narrow} : {narrow_type} to {type_}"), type_)


def _helper(kind: str, type_: str) -> str:
    return _extf(type_) if kind == "extf" else _truncf(type_)


def uses_low_precision_floats(module: ir.Module) -> bool:
    """Whether the module names an 8- or 4-bit float type (the condition of the upstream
    passes that move their arithmetic and math to f32 before :func:`emulate_low_precision_floats`)."""
    text = str(module.operation)
    return any(t in text for t in LOW_PRECISION_FLOATS)


#: The upstream passes that run first, where the module uses such floats: math ops first
#: (their extension to f32 makes conversions too), then every other arith op moved to f32.
MOVE_TO_F32 = (
    "func.func(math-extend-to-supported-types{target-type=f32})",
    f"func.func(arith-emulate-unsupported-floats{{source-types={','.join(LOW_PRECISION_FLOATS)} target-type=f32}})",
)


def emulate_low_precision_floats(module: ir.Module) -> None:
    """Rewrite every f8/f4 conversion into integer code.

    Runs on a bufferized module, after the passes of :data:`MOVE_TO_F32` moved arithmetic
    and math on those types to f32; each conversion left becomes a helper call.
    """
    def low_precision_type(op: ir.Operation) -> str | None:
        """The 8- or 4-bit float type an ``extf`` widens from or a ``truncf`` narrows to."""
        if op.name == "arith.extf":
            return str(op.operands[0].type)
        if op.name == "arith.truncf":
            return str(op.results[0].type)
        return None

    needed: set[tuple[str, str]] = set()
    for op in ops_where(module, lambda op: low_precision_type(op) in LOW_PRECISION_FLOATS):
        needed |= _replace_with_call(op, op.name.removeprefix("arith."), low_precision_type(op))  # type: ignore[arg-type]
    if needed:
        helpers = ir.Module.parse("".join(_helper(kind, type_) for kind, type_ in sorted(needed)))
        for helper in helpers.body.operations:
            helper.operation.clone(ir.InsertionPoint(module.body))


def _create(name: str, result: ir.Type, operand: ir.Value, **attributes: ir.Attribute) -> ir.Value:
    return ir.Operation.create(name, results=[result], operands=[operand], attributes=attributes).result


def _callee(kind: str, type_: str) -> ir.FlatSymbolRefAttr:
    return ir.FlatSymbolRefAttr.get(f"__helion_mlir_{kind}_{type_}")


def _replace_with_call(op: ir.Operation, kind: str, type_: str) -> set[tuple[str, str]]:
    """Replace ``op`` (an extf from / truncf to ``type_``) by a call of the helper, via f32;
    returns the helpers used."""
    f32 = ir.F32Type.get()
    callee = _callee(kind, type_)
    used = {(kind, type_)}
    value, result_type = op.operands[0], op.results[0].type
    with ir.InsertionPoint(op), op.location:
        if kind == "extf":
            result = _create("func.call", f32, value, callee=callee)
            if str(result_type) == "f64":
                result = _create("arith.extf", result_type, result)
            elif str(result_type) != "f32":  # f16/bf16, or a narrower float: one rounding
                result = _create("arith.truncf", result_type, result)
        else:
            source = str(value.type)
            if source == "f64":  # torch rounds f64 to f32 first, too
                value = _create("arith.truncf", f32, value)
            elif source in LOW_PRECISION_FLOATS:  # e.g. f8 -> f4: exact in f32
                value = _create("func.call", f32, value, callee=_callee("extf", source))
                used.add(("extf", source))
            elif source != "f32":  # f16/bf16: exact in f32
                value = _create("arith.extf", f32, value)
            result = _create("func.call", result_type, value, callee=callee)
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return used
