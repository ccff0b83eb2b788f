"""Device loops, branches and the ``_phi`` merges of their results.

In value semantics every loop and branch carries, besides its own loop-carried values,
the current value of each host tensor its body writes (see
:attr:`helion_mlir.lowering.kernel_model.KernelModel.writes`).

* ``_for_loop(graph, begin, end, args)`` becomes a nest of ``scf.for`` over tiles. The
  body's outputs are the values of names the loop writes; their initial values are the
  first operands of the ``_phi(init, getitem(loop, i))`` merges that follow the loop,
  and a body placeholder whose outer value is such an init reads the loop-carried value.
  Loop bodies of a special kind (rolled reductions) have their own rule, registered
  with :func:`register_loop_body`.
* ``_if(test, then_graph, else_graph, then_args, else_args)`` becomes ``scf.if`` with
  one result per ``_phi`` that merges its outputs.
* ``_while_loop(cond_graph, body_graph, args, _)`` becomes ``scf.while``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from helion.language import _tracing_ops
from torch import fx

from ...errors import HelionMLIRError
from ...importer.normalize import getitems
from ...mlir_types import element_type
from ..emitter import Value
from ..loops import emit_tile_loops
from ..registry import LoweringRule, register_lowering
from ..values import HostRef, Scalar, Tensor

if TYPE_CHECKING:
    from ..visitor import IRVisitor


# Rules for ``_for_loop`` nodes whose body graph is of a given GraphInfo class.
_LOOP_BODY_RULES: dict[type, LoweringRule] = {}


def register_loop_body(kind: type) -> Callable[[LoweringRule], LoweringRule]:
    """Lower ``_for_loop`` nodes whose body is a ``kind`` graph with the decorated rule."""

    def decorate(rule: LoweringRule) -> LoweringRule:
        _LOOP_BODY_RULES[kind] = rule
        return rule

    return decorate


def _users(node: fx.Node, target: Any) -> list[fx.Node]:
    return [u for u in node.users if u.target is target]


def _phi_init(getitem: fx.Node | None) -> fx.Node | None:
    """The value a loop output had before the loop: the other operand of its ``_phi``."""
    if getitem is None:
        return None
    for phi in _users(getitem, _tracing_ops._phi):
        if phi.args[1] is getitem and isinstance(phi.args[0], fx.Node):
            return phi.args[0]
    return None


def placeholder_for_outer(v: "IRVisitor", outer: Any) -> Any:
    value = v.value(outer)
    return v.state[value.name] if isinstance(value, HostRef) else value


def zero_like_meta(v: "IRVisitor", meta: Any) -> Value:
    """A zero value of the type a node's meta describes (for values with no initial value)."""
    if isinstance(meta, torch.Tensor):
        return v.ops.fill(v.static_shape(meta), meta.dtype, 0)
    if isinstance(meta, torch.SymFloat):
        return v.ops.const(0.0, "f64")
    if isinstance(meta, torch.SymBool):
        return v.ops.const(False, "i1")
    return v.ops.const(0, "index")


def _as_carried(v: "IRVisitor", value: Any) -> Value:
    if isinstance(value, (Tensor, Scalar)):
        return value
    if isinstance(value, HostRef):
        return v.state[value.name]
    if isinstance(value, bool):
        return v.ops.const(value, "i1")
    if isinstance(value, int):
        return v.ops.const(value, "index")
    if isinstance(value, float):
        return v.ops.const(value, "f64")
    raise HelionMLIRError(f"cannot carry {value!r} through a loop")


def _match_type(v: "IRVisitor", value: Any, like: Value) -> Value:
    """Convert a loop body's result to the type of the value it replaces."""
    value = _as_carried(v, value)
    if value.type == like.type:
        return value
    if isinstance(value, Tensor) and isinstance(like, Tensor):
        cast = v.ops.cast(value, like.dtype)
        if cast.shape != like.shape:
            ssa = v.ops.fresh("cast")
            v.ops.op(f"{ssa} = tensor.cast {cast.ssa} : {cast.type} to {like.type}")
            return Tensor(ssa, like.shape, like.dtype)
        return cast
    if isinstance(value, Scalar) and isinstance(like, Scalar):
        return v.ops.convert(value, like.type)
    raise HelionMLIRError(f"loop-carried value changes type from {like.type} to {value.type}")


def _initial_carried(v: "IRVisitor", written: list[str], outputs: list[Any], inits: list[Any]) -> list[Value]:
    """What a loop carries in: the written host tensors, then each loop output's value
    before the loop (its ``_phi`` init), or a zero of its type when it has none."""
    carried: list[Value] = [v.state[name] for name in written]
    for out, init in zip(outputs, inits):
        if init is not None:
            carried.append(_as_carried(v, v.value(init)))
        else:
            carried.append(zero_like_meta(v, out.meta.get("val") if isinstance(out, fx.Node) else out))
    return carried


def _loop_bound(v: "IRVisitor", value: Any) -> Any:
    value = v.value(value)
    if isinstance(value, (int, Scalar)):
        return value
    if isinstance(value, Tensor):
        return v.scalar(value, "index")
    raise HelionMLIRError(f"loop bound {value!r} is not an integer")


@register_lowering(_tracing_ops._for_loop, _tracing_ops._for_loop_step)
def lower_for_loop(v: "IRVisitor", node: fx.Node) -> list[Any]:
    graph_id, begins, ends, args = node.args[:4]
    info = v.model.graph(int(graph_id))
    special = _LOOP_BODY_RULES.get(type(info))
    if special is not None:
        return special(v, node)
    block_ids = list(info.block_ids)
    steps = list(node.args[4]) if len(node.args) > 4 else [None] * len(block_ids)
    steps = [None if s in (None, 1) and node.target is _tracing_ops._for_loop else s for s in steps]
    begins = [_loop_bound(v, b) for b in begins]
    ends = [_loop_bound(v, e) for e in ends]
    out_node = next(n for n in info.graph.nodes if n.op == "output")
    outputs = list(out_node.args[0] or [])
    items = getitems(node)
    inits = [_phi_init(items.get(i)) for i in range(len(outputs))]
    written = v.model.writes.get(int(graph_id), [])
    carried = _initial_carried(v, written, outputs, inits)
    outer_args = list(args)

    def body(current: list[Value]) -> list[Value]:
        for name, value in zip(written, current):
            v.state[name] = value  # type: ignore[assignment]
        loop_values = current[len(written):]
        inputs = []
        for outer in outer_args:
            if outer in inits:
                inputs.append(loop_values[inits.index(outer)])
            else:
                inputs.append(placeholder_for_outer(v, outer))
        results = v.run_graph(int(graph_id), inputs)
        nexts = [v.state[name] for name in written]
        nexts += [_match_type(v, r, c) for r, c in zip(results, loop_values)]
        return nexts

    finals = emit_tile_loops(v, block_ids, begins, ends, steps, carried, body)
    for name, value in zip(written, finals):
        v.state[name] = value  # type: ignore[assignment]
    return list(finals[len(written):])


@register_lowering(operator.getitem)
def lower_getitem(v: "IRVisitor", node: fx.Node) -> Any:
    container = v.value(node.args[0])
    if not isinstance(container, (list, tuple)):
        raise HelionMLIRError(f"getitem on {container!r}")
    return container[int(node.args[1])]


@register_lowering(_tracing_ops._phi)
def lower_phi(v: "IRVisitor", node: fx.Node) -> Any:
    """A merge not owned by an ``_if``: after a loop, the loop's result is the merged value."""
    rhs = node.args[1]
    if isinstance(rhs, fx.Node) and rhs.target is operator.getitem:
        source = rhs.args[0]
        if isinstance(source, fx.Node) and source.target in (_tracing_ops._for_loop, _tracing_ops._for_loop_step, _tracing_ops._while_loop):
            return v.value(rhs)
    raise HelionMLIRError("unsupported _phi: expected the merge of a loop result with its initial value")


def _condition(v: "IRVisitor", arg: Any) -> Scalar | bool:
    value = v.value(arg)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, Tensor):
        scalar = v.scalar(arg, element_type(value.dtype))
        return v.ops.convert(scalar, "i1")
    if isinstance(value, Scalar):
        return v.ops.convert(value, "i1")
    raise HelionMLIRError(f"cannot branch on {value!r}")


@register_lowering(_tracing_ops._if)
def lower_if(v: "IRVisitor", node: fx.Node) -> list[Any]:
    test, then_gid, else_gid, then_args, else_args = node.args
    then_out = next(n for n in v.model.graph(int(then_gid)).graph.nodes if n.op == "output").args[0] or []
    n_then = len(then_out)
    items = getitems(node)
    # One result per merge: (source in then branch, source in else branch, phi node)
    merges: list[tuple[Any, Any, fx.Node | None]] = []
    claimed: set[int] = set()
    for idx, item in sorted(items.items()):
        for phi in _users(item, _tracing_ops._phi):
            lhs, rhs = phi.args
            then_src = else_src = None
            for operand in (lhs, rhs):
                if isinstance(operand, fx.Node) and operand.target is operator.getitem and operand.args[0] is node:
                    pos = int(operand.args[1])
                    claimed.add(pos)
                    if pos < n_then:
                        then_src = ("then", pos)
                    else:
                        else_src = ("else", pos - n_then)
                else:
                    then_src = then_src or ("outer", operand)
                    else_src = else_src or ("outer", operand)
            if phi not in [m[2] for m in merges]:
                merges.append((then_src or ("outer", lhs), else_src or ("outer", lhs), phi))
    for idx in sorted(items):
        if idx not in claimed:  # a value produced by one branch only
            src = ("then", idx) if idx < n_then else ("else", idx - n_then)
            merges.append((src if src[0] == "then" else ("zero", idx), src if src[0] == "else" else ("zero", idx), items[idx]))
    written = [name for gid in (int(then_gid), int(else_gid)) for name in v.model.writes.get(gid, [])]
    written = list(dict.fromkeys(written))

    cond = _condition(v, test)
    if isinstance(cond, bool):  # statically known: emit the taken branch only
        gid, args, side = (then_gid, then_args, "then") if cond else (else_gid, else_args, "else")
        outs = v.run_graph(int(gid), [placeholder_for_outer(v, a) for a in args])
        for src_then, src_else, target in merges:
            src = src_then if side == "then" else src_else
            v.values[target] = _source_value(v, src, outs, None)
        return [v.values.get(items[i]) for i in sorted(items)]

    templates: list[Value] = [v.state[name] for name in written]
    templates += [template_of_meta(v, target.meta.get("val")) for _s, _e, target in merges]
    types = [t.type for t in templates]
    result = v.ops.fresh("if")
    finals = [_rebind(t, result, i, len(templates)) for i, t in enumerate(templates)]
    lhs = f"{result}:{len(templates)} = " if len(templates) > 1 else (f"{result} = " if templates else "")
    header = f"{lhs}scf.if {cond.ssa}" + (f" -> ({', '.join(types)})" if templates else "") + " {"
    before = dict(v.state)

    def branch(gid: Any, args: Any, side: str) -> None:
        v.state.update(before)
        outs = v.run_graph(int(gid), [placeholder_for_outer(v, a) for a in args])
        vals: list[Value] = [v.state[name] for name in written]
        for k, (src_then, src_else, _target) in enumerate(merges):
            like = templates[len(written) + k]
            vals.append(_match_type(v, _source_value(v, src_then if side == "then" else src_else, outs, like), like))
        vals = [_match_type(v, x, t) for x, t in zip(vals, templates)]
        if vals:
            v.ops.op(f"scf.yield {', '.join(x.ssa for x in vals)} : {', '.join(types)}")

    with v.ops.region(header, "} else {", locate_footer=False):
        branch(then_gid, then_args, "then")
    with v.ops.region("", "}"):
        branch(else_gid, else_args, "else")
    v.state.update(before)
    for name, value in zip(written, finals):
        v.state[name] = value  # type: ignore[assignment]
    for (_s, _e, target), value in zip(merges, finals[len(written):]):
        v.values[target] = value
    return [v.values.get(items[i]) for i in sorted(items)]


def template_of_meta(v: "IRVisitor", meta: Any) -> Value:
    """A placeholder value with the MLIR type a node's meta describes."""
    if isinstance(meta, torch.Tensor):
        return Tensor("", tuple(v.static_shape(meta)), meta.dtype)
    if isinstance(meta, (torch.SymFloat, float)):
        return Scalar("", "f64")
    if isinstance(meta, (torch.SymBool, bool)):
        return Scalar("", "i1")
    return Scalar("", "index")


def _rebind(template: Value, result: str, i: int, n: int) -> Value:
    ssa = result if n == 1 else f"{result}#{i}"
    return template.renamed(ssa) if isinstance(template, Tensor) else Scalar(ssa, template.type)


def _source_value(v: "IRVisitor", src: tuple[str, Any], outs: list[Any], like: Value | None) -> Any:
    kind, what = src
    if kind in ("then", "else"):
        return outs[what]
    if kind == "outer":
        return placeholder_for_outer(v, what)
    if like is None:
        raise HelionMLIRError("a value produced by one branch only is used after a branch that is never taken")
    return _zero_of(v, like)  # the other branch produces it; any value of its type will do


def _zero_of(v: "IRVisitor", like: Value) -> Value:
    if isinstance(like, Tensor):
        return v.ops.fill(like.shape, like.dtype, 0)
    return v.ops.const(0, like.type)


@register_lowering(_tracing_ops._while_loop)
def lower_while_loop(v: "IRVisitor", node: fx.Node) -> list[Any]:
    cond_gid, body_gid, args = int(node.args[0]), int(node.args[1]), list(node.args[2])
    if len(node.args) > 3 and node.args[3] is not None:
        raise HelionMLIRError("while loops with an else clause are not supported")
    body_info = v.model.graph(body_gid)
    outputs = list(next(n for n in body_info.graph.nodes if n.op == "output").args[0] or [])
    items = getitems(node)
    inits = [_phi_init(items.get(i)) for i in range(len(outputs))]
    written = list(dict.fromkeys(v.model.writes.get(body_gid, []) + v.model.writes.get(cond_gid, [])))
    carried = _initial_carried(v, written, outputs, inits)

    def graph_inputs(loop_values: list[Value]) -> list[Any]:
        return [loop_values[inits.index(a)] if a in inits else placeholder_for_outer(v, a) for a in args]

    names = [v.ops.fresh("w") for _ in carried]
    body_names = [v.ops.fresh("wb") for _ in carried]
    types = [c.type for c in carried]
    result = v.ops.fresh("while")
    inits_text = ", ".join(f"{n} = {c.ssa}" for n, c in zip(names, carried))
    results = f"{result}:{len(carried)} = " if len(carried) > 1 else (f"{result} = " if carried else "")
    header = f"{results}scf.while ({inits_text}) : ({', '.join(types)}) -> ({', '.join(types)}) {{"
    current = [_rebind_named(c, n) for c, n in zip(carried, names)]
    with v.ops.region(header, "} do {", locate_footer=False):
        for name, value in zip(written, current):
            v.state[name] = value  # type: ignore[assignment]
        (test,) = v.run_graph(cond_gid, graph_inputs(current[len(written):]))
        flag = _condition_value(v, test)
        v.ops.op(f"scf.condition({flag.ssa}) {', '.join(c.ssa for c in current)} : {', '.join(types)}")
    body_current = [_rebind_named(c, n) for c, n in zip(carried, body_names)]
    with v.ops.region(f"^bb0({', '.join(f'{n}: {t}' for n, t in zip(body_names, types))}):", "}"):
        for name, value in zip(written, body_current):
            v.state[name] = value  # type: ignore[assignment]
        results_ = v.run_graph(body_gid, graph_inputs(body_current[len(written):]))
        nexts = [v.state[name] for name in written]
        nexts += [_match_type(v, r, c) for r, c in zip(results_, body_current[len(written):])]
        v.ops.op(f"scf.yield {', '.join(x.ssa for x in nexts)} : {', '.join(types)}")
    finals = [_rebind(c, result, i, len(carried)) for i, c in enumerate(carried)]
    for name, value in zip(written, finals):
        v.state[name] = value  # type: ignore[assignment]
    return list(finals[len(written):])


def _rebind_named(template: Value, ssa: str) -> Value:
    return template.renamed(ssa) if isinstance(template, Tensor) else Scalar(ssa, template.type)


def _condition_value(v: "IRVisitor", value: Any) -> Scalar:
    if isinstance(value, bool):
        return v.ops.const(value, "i1")
    if isinstance(value, Tensor):
        scalar = v.scalar(value, element_type(value.dtype))
        return v.ops.convert(scalar, "i1")
    if isinstance(value, Scalar):
        return v.ops.convert(value, "i1")
    raise HelionMLIRError(f"while condition {value!r} is not a boolean")
