"""Symbolic arithmetic shared by the kernel state and the rules: sympy expressions over a
kernel's symbols (block sizes, tensor sizes, scalar arguments) and tile properties,
folded to Python numbers where they are known and emitted as ``index``/``f64`` ops where
they are not."""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable
from typing import Any

import sympy
from torch.utils._sympy import functions as torch_sympy

from ..errors import HelionMLIRError
from ..mlir_types import is_float_type
from .emitter import Emitter
from .values import Scalar, Tile

__all__ = ["TileProperty", "emit_sympy", "is_float_value", "scalar_arith", "tile_scalar"]


class TileProperty(enum.Enum):
    """A scalar property of the active tile (``tile.begin`` ...)."""

    BEGIN = "begin"
    END = "end"
    EXTENT = "extent"
    ID = "id"
    COUNT = "count"


def is_float_value(x: Any) -> bool:
    """A Python float or a float Scalar."""
    return isinstance(x, float) or (isinstance(x, Scalar) and is_float_type(x.type))


#: Python's ``%`` of integers (the result takes the divisor's sign), which ``arith`` lacks.
FLOOR_MOD = "floor-mod"


def index_arith(emit: Emitter, int_op: str, a: "Scalar | int", b: "Scalar | int") -> Scalar:
    """``a <int_op> b`` on ``index`` values; :data:`FLOOR_MOD` is ``arith.remsi`` (whose result
    takes the dividend's sign) plus the divisor where the signs differ, as Python's ``%``:
    ``(i - 2) % n`` is ``n - 2`` for ``i = 0``, not ``-2``."""
    a, b = emit.index(a), emit.index(b)
    if int_op != FLOOR_MOD:
        return emit.binary(int_op, a, b)
    rem = emit.binary("arith.remsi", a, b)
    zero = emit.index(0)
    signs_differ = emit.binary("arith.xori", emit.binary("arith.cmpi slt", rem, zero),
                               emit.binary("arith.cmpi slt", b, zero))
    adjust = emit.binary("arith.andi", emit.binary("arith.cmpi ne", rem, zero), signs_differ)
    shifted = emit.binary("arith.addi", rem, b)
    return Scalar(emit.assign("mod", f"arith.select {adjust.ssa}, {shifted.ssa}, {rem.ssa} : index"), "index")


def scalar_arith(emit: Emitter, a: Any, b: Any, fold: Any, int_op: str, float_op: str | None) -> Any:
    """``fold(a, b)`` on Python numbers, else the int (index) or float (f64) MLIR op."""
    if not isinstance(a, Scalar) and not isinstance(b, Scalar):
        return fold(a, b)
    if is_float_value(a) or is_float_value(b):
        if float_op is None:
            raise HelionMLIRError(f"{int_op} has no floating-point form")
        return emit.binary(float_op, emit.convert(a, "f64"), emit.convert(b, "f64"))
    return index_arith(emit, int_op, a, b)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _to_float(emit: Emitter, x: Any) -> Any:
    return float(x) if not isinstance(x, Scalar) else emit.convert(x, "f64")


# Binary sympy functions (torch's and sympy's own) as (fold, int op, float op).
_BINARY: dict[type, tuple[Callable[[Any, Any], Any], str, str | None]] = {
    torch_sympy.FloorDiv: (operator.floordiv, "arith.floordivsi", None),
    torch_sympy.CleanDiv: (operator.floordiv, "arith.divsi", None),
    torch_sympy.CeilDiv: (_ceil_div, "arith.ceildivsi", None),
    torch_sympy.Mod: (operator.mod, "arith.remsi", None),  # of non-negative operands (torch's assumption)
    torch_sympy.PythonMod: (operator.mod, FLOOR_MOD, None),
    sympy.Mod: (operator.mod, FLOOR_MOD, None),
}
# Variadic ones, folded left to right.
_VARIADIC: dict[type, tuple[Callable[[Any, Any], Any], str, str | None]] = {
    sympy.Add: (operator.add, "arith.addi", "arith.addf"),
    sympy.Mul: (operator.mul, "arith.muli", "arith.mulf"),
    torch_sympy.Max: (max, "arith.maxsi", "arith.maximumf"),
    sympy.Max: (max, "arith.maxsi", "arith.maximumf"),
    torch_sympy.Min: (min, "arith.minsi", "arith.minimumf"),
    sympy.Min: (min, "arith.minsi", "arith.minimumf"),
}
_TRUE_DIVISIONS = (torch_sympy.FloatTrueDiv, torch_sympy.IntTrueDiv)


def emit_sympy(emit: Emitter, resolve: Callable[[sympy.Symbol], Any], expr: sympy.Expr) -> Any:
    """Emit a sympy expression whose symbols ``resolve`` gives: ``index`` for integers, ``f64`` for floats."""
    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, (sympy.Float, sympy.Rational)):
        return float(expr)
    if isinstance(expr, sympy.Symbol):
        return resolve(expr)
    kind = type(expr)
    args = [emit_sympy(emit, resolve, a) for a in expr.args]
    family = sympy.Add if isinstance(expr, sympy.Add) else sympy.Mul if isinstance(expr, sympy.Mul) else kind
    if family in _VARIADIC:
        fold, int_op, float_op = _VARIADIC[family]
        result = args[0]
        for term in args[1:]:
            result = scalar_arith(emit, result, term, fold, int_op, float_op)
        return result
    if kind in _BINARY:
        fold, int_op, float_op = _BINARY[kind]
        return scalar_arith(emit, args[0], args[1], fold, int_op, float_op)
    if kind in _TRUE_DIVISIONS:
        return scalar_arith(emit, _to_float(emit, args[0]), args[1], operator.truediv, "arith.divf", "arith.divf")
    if kind is torch_sympy.ToFloat:
        return _to_float(emit, args[0])
    raise HelionMLIRError(f"symbolic expression {expr} ({kind.__name__}) is not supported")


def tile_scalar(emit: Emitter, tile: Tile, what: TileProperty) -> Scalar | int:
    """``begin``, ``end``, ``extent``, ``id`` or ``count`` of the active ``tile``."""
    if what is TileProperty.BEGIN:
        return tile.offset
    if what is TileProperty.EXTENT:
        return tile.extent
    if what is TileProperty.END:
        if isinstance(tile.offset, int) and isinstance(tile.extent, int):
            return tile.offset + tile.extent
        end = emit.binary("arith.addi", emit.index(tile.offset), emit.index(tile.extent))
        emit.know_at_most(tile.offset, end)  # a tile ends inside its loop's range
        if tile.end is not None:
            emit.know_at_most(end, tile.end)
        return end
    step = tile.block_size
    if what is TileProperty.ID:
        if isinstance(tile.offset, int) and isinstance(step, int):
            return tile.offset // step
        return emit.binary("arith.divui", emit.index(tile.offset), emit.index(step))
    if tile.end is None:
        raise HelionMLIRError("tile.count of a tile whose loop range is unknown")
    if isinstance(tile.begin, int) and isinstance(tile.end, int) and isinstance(step, int):
        return -(-(tile.end - tile.begin) // step)
    span = emit.binary("arith.subi", emit.index(tile.end), emit.index(tile.begin))
    return emit.binary("arith.ceildivsi", span, emit.index(step))
