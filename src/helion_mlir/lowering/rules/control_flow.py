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
  one result per variable the branches merge (``IfGraphInfo.branches_outputs``).
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
    """``scf.if`` with one result per variable the branches merge, plus the written tensors.

    Helion records the merged variables in ``IfGraphInfo.branches_outputs``: entry ``k`` says
    where each branch leaves the variable's value, an output index of the branch graph or,
    for a branch that does not assign it, the variable's name (its value before the ``if``,
    passed to one of the branches as an argument). The ``_if`` node's results are the
    ``N`` values of the then side followed by the ``N`` of the else side, and each ``_phi``
    after it merges results ``k`` and ``N + k``. A variable that both branches only copy
    from values defined before the ``if`` (``hi = mid`` / ``lo = mid``) is a select of the
    two after it, not an ``scf.if`` result.
    """
    test, then_gid, else_gid, then_args, else_args = node.args
    info = v.model.graph(int(then_gid))
    entries = list(info.branches_outputs or [])
    outer_nodes = dict(zip(info.if_arg_names or [], then_args))
    outer_nodes.update(zip(info.else_arg_names or [], else_args))
    for entry in entries:
        for src in entry:
            if not isinstance(src, int) and src not in outer_nodes:
                raise HelionMLIRError(f"a branch leaves {src!r} unchanged, but its value before the if is unknown")
    written = [name for gid in (int(then_gid), int(else_gid)) for name in v.model.writes.get(gid, [])]
    written = list(dict.fromkeys(written))
    metas = node.meta.get("val") or []
    sides = ((then_gid, then_args), (else_gid, else_args))

    def side_values(side: int, outs: list[Any], keys: list[int]) -> list[Any]:
        return [outs[src] if isinstance(src, int) else placeholder_for_outer(v, outer_nodes[src])
                for src in (entries[k][side] for k in keys)]

    cond = _condition(v, test)
    if isinstance(cond, bool):  # statically known: emit the taken branch only
        side = 0 if cond else 1
        gid, args = sides[side]
        outs = v.run_graph(int(gid), [placeholder_for_outer(v, a) for a in args])
        return _if_results(v, node, entries, outer_nodes, side_values(side, outs, list(range(len(entries)))))

    copied = {k: pair for k in range(len(entries))
              if None not in (pair := tuple(_copied_outer(v, entries[k][s], *sides[s], outer_nodes) for s in (0, 1)))}
    kept = [k for k in range(len(entries)) if k not in copied]
    merged: list[Any] = [None] * len(entries)
    templates: list[Value] = [v.state[name] for name in written]
    templates += [template_of_meta(v, metas[k] if k < len(metas) else None) for k in kept]
    if templates:
        types = [t.type for t in templates]
        result = v.ops.fresh("if")
        lhs = f"{result}:{len(templates)} = " if len(templates) > 1 else f"{result} = "
        header = f"{lhs}scf.if {cond.ssa} -> ({', '.join(types)}) {{"
        before = dict(v.state)

        def branch(side: int) -> None:
            v.state.update(before)
            gid, args = sides[side]
            outs = v.run_graph(int(gid), [placeholder_for_outer(v, a) for a in args])
            vals = [v.state[name] for name in written] + side_values(side, outs, kept)
            vals = [_match_type(v, x, t) for x, t in zip(vals, templates)]
            v.ops.op(f"scf.yield {', '.join(x.ssa for x in vals)} : {', '.join(types)}")

        with v.ops.region(header, "} else {", locate_footer=False):
            branch(0)
        with v.ops.region("", "}"):
            branch(1)
        v.state.update(before)
        finals = [_rebind(t, result, i, len(templates)) for i, t in enumerate(templates)]
        for name, value in zip(written, finals):
            v.state[name] = value  # type: ignore[assignment]
        for k, value in zip(kept, finals[len(written):]):
            merged[k] = value
    for k, (then_value, else_value) in copied.items():
        like = template_of_meta(v, metas[k] if k < len(metas) else None)
        merged[k] = _select(v, cond, _match_type(v, then_value, like), _match_type(v, else_value, like))
    return _if_results(v, node, entries, outer_nodes, merged)


def _copied_outer(v: "IRVisitor", src: int | str, gid: Any, args: list[Any], outer_nodes: dict[str, Any]) -> Any:
    """The value from before the ``if`` that a branch leaves in a variable without computing
    anything (it keeps the variable, or assigns another one to it); None if it computes it."""
    if not isinstance(src, int):
        return placeholder_for_outer(v, outer_nodes[src])
    graph = v.model.graph(int(gid)).graph
    out = next(n for n in graph.nodes if n.op == "output").args[0][src]
    while isinstance(out, fx.Node) and out.target is _tracing_ops._new_var:
        out = out.args[0]
    if not isinstance(out, fx.Node) or out.op != "placeholder":
        return None
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    return placeholder_for_outer(v, args[placeholders.index(out)])


def _select(v: "IRVisitor", cond: Scalar, a: Value, b: Value) -> Value:
    """``cond ? a : b``; a linalg.generic for tensors (torch-mlir's backend contract has no
    tensor-typed arith.select)."""
    if isinstance(a, Scalar):
        out = v.ops.fresh("sel")
        v.ops.op(f"{out} = arith.select {cond.ssa}, {a.ssa}, {b.ssa} : {a.type}")
        return Scalar(out, a.type)
    assert isinstance(a, Tensor) and isinstance(b, Tensor)

    def body(args: list[str], _index_of: Callable[[int], str]) -> str:
        out = v.ops.fresh("sel")
        v.ops.op(f"{out} = arith.select {cond.ssa}, {args[0]}, {args[1]} : {element_type(a.dtype)}")
        return out

    return v.ops.elementwise([a, b], a.shape, a.dtype, body, hint="select")


def _if_results(v: "IRVisitor", node: fx.Node, entries: list[tuple[Any, ...]], outer_nodes: dict[str, Any],
                merged: list[Any]) -> list[Any]:
    """The ``_if`` node's ``2 * N`` results, and the value of each ``_phi`` that merges them.

    A result of a branch that leaves the variable unchanged is the value before the ``if``
    (Helion re-binds later uses of that value to it); any other result is the merged value.
    """
    n = len(entries)
    results: list[Any] = []
    for side in (0, 1):
        for k, entry in enumerate(entries):
            src = entry[side]
            results.append(merged[k] if isinstance(src, int) else placeholder_for_outer(v, outer_nodes[src]))
    for pos, item in getitems(node).items():
        for phi in _users(item, _tracing_ops._phi):
            v.values[phi] = merged[pos % n]
    return results


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
