"""Scalars and symbols: host tensors, symbolic sizes, scalar arguments and SymInt arithmetic.

Integer sizes and offsets are ``index`` values; compile-time-known ones stay Python ints
so that shapes stay static and arithmetic on them folds away.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch
from helion.language import _tracing_ops
from torch import fx

from ...errors import HelionMLIRError
from ..registry import register_lowering
from ..symbolic import is_float_value, scalar_arith
from ..values import HostRef, Scalar, Tensor

if TYPE_CHECKING:
    from ..visitor import IRVisitor

aten = torch.ops.aten


@register_lowering(_tracing_ops._host_tensor)
def lower_host_tensor(v: "IRVisitor", node: fx.Node) -> HostRef:
    name = str(node.args[0])
    if name not in v.state:
        raise HelionMLIRError(f"host tensor '{name}' is not an argument of the emitted function")
    return HostRef(name)


@register_lowering(_tracing_ops._get_symnode)
def lower_get_symnode(v: "IRVisitor", node: fx.Node) -> Any:
    val = node.meta.get("val")
    if isinstance(val, (int, float, bool)):
        return val
    if not isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise HelionMLIRError(f"_get_symnode without a symbolic value (val={val!r})")
    return v.eval_symbolic(val)


@register_lowering(aten.sym_size.int)
def lower_sym_size(v: "IRVisitor", node: fx.Node) -> Any:
    source, axis = node.args[0], int(node.args[1])
    value = v.value(source)
    tensor = v.state[value.name] if isinstance(value, HostRef) else value
    if not isinstance(tensor, Tensor):
        raise HelionMLIRError("sym_size of a non-tensor")
    return v.ops.dim(tensor, axis % tensor.rank)


@register_lowering(_tracing_ops._new_var)
def lower_new_var(v: "IRVisitor", node: fx.Node) -> Any:
    return v.value(node.args[0])


def _int_result(v: "IRVisitor", a: Any, b: Any, fold: Any, mlir_op: str) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return fold(a, b)
    return v.ops.binary(mlir_op, v.ops.index(a), v.ops.index(b))


_INDEX_BINARY = {
    operator.add: (operator.add, "arith.addi"),
    operator.sub: (operator.sub, "arith.subi"),
    operator.mul: (operator.mul, "arith.muli"),
    operator.floordiv: (operator.floordiv, "arith.floordivsi"),
    operator.mod: (operator.mod, "arith.remsi"),
}

_COMPARISONS = {
    operator.lt: (operator.lt, "slt", "olt"),
    operator.le: (operator.le, "sle", "ole"),
    operator.gt: (operator.gt, "sgt", "ogt"),
    operator.ge: (operator.ge, "sge", "oge"),
    operator.eq: (operator.eq, "eq", "oeq"),
    operator.ne: (operator.ne, "ne", "une"),
}


def _is_floatish(v: "IRVisitor", x: Any) -> bool:
    return isinstance(x, float) or (isinstance(x, Scalar) and x.type.startswith(("f", "bf")))


@register_lowering(*_INDEX_BINARY)
def lower_symintscalar_arith(v: "IRVisitor", node: fx.Node) -> Any:
    a, b = v.value(node.args[0]), v.value(node.args[1])
    fold, int_op = _INDEX_BINARY[node.target]
    if _is_floatish(v, a) or _is_floatish(v, b):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return fold(a, b)
        float_op = {operator.add: "arith.addf", operator.sub: "arith.subf", operator.mul: "arith.mulf"}.get(node.target)
        if float_op is None:
            raise HelionMLIRError(f"{node.target.__name__} on float scalars is not supported")
        return v.ops.binary(float_op, v.ops.convert(a, "f64"), v.ops.convert(b, "f64"))
    return _int_result(v, a, b, fold, int_op)


@register_lowering(operator.truediv)
def lower_truediv(v: "IRVisitor", node: fx.Node) -> Any:
    a, b = v.value(node.args[0]), v.value(node.args[1])
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a / b
    return v.ops.binary("arith.divf", v.ops.convert(a, "f64"), v.ops.convert(b, "f64"))


@register_lowering(*_COMPARISONS)
def lower_comparison(v: "IRVisitor", node: fx.Node) -> Any:
    a, b = v.value(node.args[0]), v.value(node.args[1])
    fold, int_pred, float_pred = _COMPARISONS[node.target]
    if not isinstance(a, Scalar) and not isinstance(b, Scalar):
        return fold(a, b)
    if _is_floatish(v, a) or _is_floatish(v, b):
        return v.ops.binary(f"arith.cmpf {float_pred}", v.ops.convert(a, "f64"), v.ops.convert(b, "f64"))
    return v.ops.binary(f"arith.cmpi {int_pred}", v.ops.index(a), v.ops.index(b))


def _as_bool(v: "IRVisitor", x: Any) -> Any:
    return bool(x) if not isinstance(x, Scalar) else v.ops.convert(x, "i1")


@register_lowering(_tracing_ops._and, _tracing_ops._or)
def lower_bool_binary(v: "IRVisitor", node: fx.Node) -> Any:
    a, b = _as_bool(v, v.value(node.args[0])), _as_bool(v, v.value(node.args[1]))
    is_and = node.target is _tracing_ops._and
    if isinstance(a, bool) and isinstance(b, bool):
        return (a and b) if is_and else (a or b)
    return v.ops.binary("arith.andi" if is_and else "arith.ori", v.ops.convert(a, "i1"), v.ops.convert(b, "i1"))


@register_lowering(_tracing_ops._not)
def lower_bool_not(v: "IRVisitor", node: fx.Node) -> Any:
    a = _as_bool(v, v.value(node.args[0]))
    if isinstance(a, bool):
        return not a
    return v.ops.binary("arith.xori", a, v.ops.const(True, "i1"))


_BITWISE = {
    operator.and_: (operator.and_, "arith.andi"),
    operator.or_: (operator.or_, "arith.ori"),
    operator.xor: (operator.xor, "arith.xori"),
    operator.lshift: (operator.lshift, "arith.shli"),
    operator.rshift: (operator.rshift, "arith.shrsi"),
}


@register_lowering(*_BITWISE)
def lower_symint_bitwise(v: "IRVisitor", node: fx.Node) -> Any:
    fold, op = _BITWISE[node.target]
    return scalar_arith(v, v.value(node.args[0]), v.value(node.args[1]), fold, op, None)


@register_lowering(operator.neg)
def lower_neg(v: "IRVisitor", node: fx.Node) -> Any:
    a = v.value(node.args[0])
    if not isinstance(a, Scalar):
        return -a
    if is_float_value(a):
        out = v.ops.fresh("neg")
        v.ops.op(f"{out} = arith.negf {a.ssa} : {a.type}")
        return Scalar(out, a.type)
    return v.ops.binary("arith.subi", v.ops.index(0), v.ops.index(a))


@register_lowering(torch.sym_float)
def lower_sym_float(v: "IRVisitor", node: fx.Node) -> Any:
    a = v.value(node.args[0])
    return float(a) if not isinstance(a, Scalar) else v.ops.convert(a, "f64")


@register_lowering(torch.sym_int)
def lower_sym_int(v: "IRVisitor", node: fx.Node) -> Any:
    a = v.value(node.args[0])
    return int(a) if not isinstance(a, Scalar) else v.ops.convert(a, "index")


@register_lowering(torch.sym_max, torch.sym_min)
def lower_sym_max_min(v: "IRVisitor", node: fx.Node) -> Any:
    is_max = node.target is torch.sym_max
    a, b = v.value(node.args[0]), v.value(node.args[1])
    return scalar_arith(v, a, b, max if is_max else min, "arith.maxsi" if is_max else "arith.minsi",
                  "arith.maximumf" if is_max else "arith.minimumf")
