"""Scalars and symbols: host tensors, symbolic sizes, scalar arguments and SymInt arithmetic.

Integer sizes and offsets are ``index`` values; compile-time-known ones stay Python ints
so that shapes stay static and arithmetic on them folds away.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from helion.language import _tracing_ops
from torch import fx

from ...errors import HelionMLIRError
from ..context import RuleContext
from ..emitter import Emitter
from ..registry import register_lowering
from ..symbolic import FLOOR_MOD, index_arith, is_float_value, scalar_arith
from ..values import HostRef, Scalar, Tensor

aten = torch.ops.aten


@register_lowering(_tracing_ops._host_tensor)
def lower_host_tensor(ctx: RuleContext, node: fx.Node) -> HostRef:
    """A host tensor named in device code: a reference, since stores replace its value."""
    ref = HostRef(ctx.model.host_name(str(node.args[0])))
    ctx.value(ref)  # resolving it raises unless it is an argument of the emitted function
    return ref


@register_lowering(_tracing_ops._get_symnode)
def lower_get_symnode(ctx: RuleContext, node: fx.Node) -> Any:
    val = node.meta.get("val")
    if isinstance(val, (int, float, bool)):
        return val
    if not isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise HelionMLIRError(f"_get_symnode without a symbolic value (val={val!r})")
    return ctx.eval_symbolic(val)


@register_lowering(aten.sym_size.int)
def lower_sym_size(ctx: RuleContext, node: fx.Node) -> Any:
    tensor, axis = ctx.value(node.args[0]), int(node.args[1])
    if not isinstance(tensor, Tensor):
        raise HelionMLIRError("sym_size of a non-tensor")
    return ctx.emit.dim(tensor, axis % tensor.rank)


@register_lowering(_tracing_ops._new_var)
def lower_new_var(ctx: RuleContext, node: fx.Node) -> Any:
    return ctx.recorded(node.args[0])


def _int_result(emit: Emitter, a: Any, b: Any, fold: Any, mlir_op: str) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return fold(a, b)
    return index_arith(emit, mlir_op, a, b)


_INDEX_BINARY = {
    operator.add: (operator.add, "arith.addi"),
    operator.sub: (operator.sub, "arith.subi"),
    operator.mul: (operator.mul, "arith.muli"),
    operator.floordiv: (operator.floordiv, "arith.floordivsi"),
    operator.mod: (operator.mod, FLOOR_MOD),
}

_COMPARISONS = {
    operator.lt: (operator.lt, "slt", "olt"),
    operator.le: (operator.le, "sle", "ole"),
    operator.gt: (operator.gt, "sgt", "ogt"),
    operator.ge: (operator.ge, "sge", "oge"),
    operator.eq: (operator.eq, "eq", "oeq"),
    operator.ne: (operator.ne, "ne", "une"),
}


@register_lowering(*_INDEX_BINARY)
def lower_symintscalar_arith(ctx: RuleContext, node: fx.Node) -> Any:
    """``+ - * // %`` of host scalars (SymInts, block sizes, numbers): folded when both are
    known, else ``index`` arithmetic (``arith.floordivsi`` for ``//``, Python's ``%`` from
    ``arith.remsi``), or f64 arithmetic for ``+ - *`` of floats."""
    a, b = ctx.value(node.args[0]), ctx.value(node.args[1])
    fold, int_op = _INDEX_BINARY[node.target]
    if is_float_value(a) or is_float_value(b):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return fold(a, b)
        float_op = {operator.add: "arith.addf", operator.sub: "arith.subf", operator.mul: "arith.mulf"}.get(node.target)
        if float_op is None:
            raise HelionMLIRError(f"{node.target.__name__} on float scalars is not supported")
        return ctx.emit.binary(float_op, ctx.emit.convert(a, "f64"), ctx.emit.convert(b, "f64"))
    return _int_result(ctx.emit, a, b, fold, int_op)


@register_lowering(operator.truediv)
def lower_truediv(ctx: RuleContext, node: fx.Node) -> Any:
    a, b = ctx.value(node.args[0]), ctx.value(node.args[1])
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a / b
    return ctx.emit.binary("arith.divf", ctx.emit.convert(a, "f64"), ctx.emit.convert(b, "f64"))


@register_lowering(*_COMPARISONS)
def lower_comparison(ctx: RuleContext, node: fx.Node) -> Any:
    a, b = ctx.value(node.args[0]), ctx.value(node.args[1])
    fold, int_pred, float_pred = _COMPARISONS[node.target]
    if not isinstance(a, Scalar) and not isinstance(b, Scalar):
        return fold(a, b)
    if is_float_value(a) or is_float_value(b):
        return ctx.emit.binary(f"arith.cmpf {float_pred}", ctx.emit.convert(a, "f64"), ctx.emit.convert(b, "f64"))
    return ctx.emit.binary(f"arith.cmpi {int_pred}", ctx.emit.index(a), ctx.emit.index(b))


def _as_bool(emit: Emitter, x: Any) -> Any:
    return bool(x) if not isinstance(x, Scalar) else emit.convert(x, "i1")


@register_lowering(_tracing_ops._and, _tracing_ops._or)
def lower_bool_binary(ctx: RuleContext, node: fx.Node) -> Any:
    a, b = _as_bool(ctx.emit, ctx.value(node.args[0])), _as_bool(ctx.emit, ctx.value(node.args[1]))
    is_and = node.target is _tracing_ops._and
    if isinstance(a, bool) and isinstance(b, bool):
        return (a and b) if is_and else (a or b)
    return ctx.emit.binary("arith.andi" if is_and else "arith.ori", ctx.emit.convert(a, "i1"), ctx.emit.convert(b, "i1"))


@register_lowering(_tracing_ops._not)
def lower_bool_not(ctx: RuleContext, node: fx.Node) -> Any:
    a = _as_bool(ctx.emit, ctx.value(node.args[0]))
    if isinstance(a, bool):
        return not a
    return ctx.emit.binary("arith.xori", a, ctx.emit.const(True, "i1"))


_BITWISE = {
    operator.and_: (operator.and_, "arith.andi"),
    operator.or_: (operator.or_, "arith.ori"),
    operator.xor: (operator.xor, "arith.xori"),
    operator.lshift: (operator.lshift, "arith.shli"),
    operator.rshift: (operator.rshift, "arith.shrsi"),
}


@register_lowering(*_BITWISE)
def lower_symint_bitwise(ctx: RuleContext, node: fx.Node) -> Any:
    fold, op = _BITWISE[node.target]
    return scalar_arith(ctx.emit, ctx.value(node.args[0]), ctx.value(node.args[1]), fold, op, None)


@register_lowering(operator.neg)
def lower_neg(ctx: RuleContext, node: fx.Node) -> Any:
    a = ctx.value(node.args[0])
    if not isinstance(a, Scalar):
        return -a
    if is_float_value(a):
        out = ctx.emit.assign("neg", f"arith.negf {a.ssa} : {a.type}")
        return Scalar(out, a.type)
    return ctx.emit.binary("arith.subi", ctx.emit.index(0), ctx.emit.index(a))


@register_lowering(torch.sym_float)
def lower_sym_float(ctx: RuleContext, node: fx.Node) -> Any:
    a = ctx.value(node.args[0])
    return float(a) if not isinstance(a, Scalar) else ctx.emit.convert(a, "f64")


@register_lowering(torch.sym_int)
def lower_sym_int(ctx: RuleContext, node: fx.Node) -> Any:
    a = ctx.value(node.args[0])
    return int(a) if not isinstance(a, Scalar) else ctx.emit.convert(a, "index")


@register_lowering(torch.sym_max, torch.sym_min)
def lower_sym_max_min(ctx: RuleContext, node: fx.Node) -> Any:
    is_max = node.target is torch.sym_max
    a, b = ctx.value(node.args[0]), ctx.value(node.args[1])
    return scalar_arith(ctx.emit, a, b, max if is_max else min, "arith.maxsi" if is_max else "arith.minsi",
                  "arith.maximumf" if is_max else "arith.minimumf")
