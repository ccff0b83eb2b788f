"""Symbolic arithmetic shared by the visitor and the rules: sympy expressions over a
kernel's symbols (block sizes, tensor sizes, scalar arguments) and tile properties,
folded to Python numbers where they are known and emitted as ``index``/``f64`` ops where
they are not."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import sympy

from ..errors import HelionMLIRError
from .values import Scalar, Tile

if TYPE_CHECKING:
    from .visitor import IRVisitor

__all__ = ["emit_sympy", "is_float_value", "scalar_arith", "tile_scalar"]


def is_float_value(x: Any) -> bool:
    return isinstance(x, float) or (isinstance(x, Scalar) and x.type in ("f64", "f32", "f16", "bf16"))


def scalar_arith(v: "IRVisitor", a: Any, b: Any, fold: Any, int_op: str, float_op: str | None) -> Any:
    """``fold(a, b)`` on Python numbers, else the int (index) or float (f64) MLIR op."""
    if not isinstance(a, Scalar) and not isinstance(b, Scalar):
        return fold(a, b)
    if is_float_value(a) or is_float_value(b):
        if float_op is None:
            raise HelionMLIRError(f"{int_op} has no floating-point form")
        return v.ops.binary(float_op, v.ops.convert(a, "f64"), v.ops.convert(b, "f64"))
    return v.ops.binary(int_op, v.ops.index(a), v.ops.index(b))


def emit_sympy(v: "IRVisitor", expr: sympy.Expr) -> Any:
    """Emit a sympy expression over resolved symbols: ``index`` for integers, ``f64`` for floats."""
    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, (sympy.Float, sympy.Rational)):
        return float(expr)
    if isinstance(expr, sympy.Symbol):
        return v.resolve_symbol(expr)
    name = type(expr).__name__
    args = [emit_sympy(v, a) for a in expr.args]
    if isinstance(expr, sympy.Add):
        result = args[0]
        for term in args[1:]:
            result = scalar_arith(v, result, term, operator.add, "arith.addi", "arith.addf")
        return result
    if isinstance(expr, sympy.Mul):
        result = args[0]
        for term in args[1:]:
            result = scalar_arith(v, result, term, operator.mul, "arith.muli", "arith.mulf")
        return result
    if name == "FloorDiv":
        return scalar_arith(v, args[0], args[1], operator.floordiv, "arith.floordivsi", None)
    if name in ("Mod", "PythonMod"):
        return scalar_arith(v, args[0], args[1], operator.mod, "arith.remsi", None)
    if name in ("CeilDiv", "CleanDiv"):
        fold = (lambda a, b: -(-a // b)) if name == "CeilDiv" else operator.floordiv
        return scalar_arith(v, args[0], args[1], fold, "arith.ceildivsi" if name == "CeilDiv" else "arith.divsi", None)
    if name in ("FloatTrueDiv", "IntTrueDiv"):
        return scalar_arith(v, float(args[0]) if not isinstance(args[0], Scalar) else v.ops.convert(args[0], "f64"),
                      args[1], operator.truediv, "arith.divf", "arith.divf")
    if name == "ToFloat":
        return float(args[0]) if not isinstance(args[0], Scalar) else v.ops.convert(args[0], "f64")
    if name in ("Max", "Min"):
        fold = max if name == "Max" else min
        int_op, float_op = ("arith.maxsi", "arith.maximumf") if name == "Max" else ("arith.minsi", "arith.minimumf")
        result = args[0]
        for term in args[1:]:
            result = scalar_arith(v, result, term, fold, int_op, float_op)
        return result
    raise HelionMLIRError(f"symbolic expression {expr} ({name}) is not supported")


def tile_scalar(v: "IRVisitor", tile: Tile, what: str) -> Scalar | int:
    """``begin``, ``end``, ``extent``, ``id`` or ``count`` of the active ``tile``."""
    if what == "begin":
        return tile.offset
    if what == "extent":
        return tile.extent
    if what == "end":
        if isinstance(tile.offset, int) and isinstance(tile.extent, int):
            return tile.offset + tile.extent
        return v.ops.binary("arith.addi", v.ops.index(tile.offset), v.ops.index(tile.extent))
    step = tile.block_size
    if what == "id":
        if isinstance(tile.offset, int) and isinstance(step, int):
            return tile.offset // step
        return v.ops.binary("arith.divui", v.ops.index(tile.offset), v.ops.index(step))
    if what == "count":
        if tile.end is None:
            raise HelionMLIRError("tile.count of a tile whose loop range is unknown")
        if isinstance(tile.begin, int) and isinstance(tile.end, int) and isinstance(step, int):
            return -(-(tile.end - tile.begin) // step)
        span = v.ops.binary("arith.subi", v.ops.index(tile.end), v.ops.index(tile.begin))
        return v.ops.binary("arith.ceildivsi", span, v.ops.index(step))
    raise HelionMLIRError(f"unknown tile property {what}")
