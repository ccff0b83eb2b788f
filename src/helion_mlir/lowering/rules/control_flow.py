"""Device loops, branches and the ``_phi`` merges of their results.

In value semantics every loop and branch carries, besides its own loop-carried values,
the current value of each host tensor its body writes (see
:attr:`helion_mlir.lowering.kernel_model.KernelModel.writes`; :meth:`RuleContext.carried`
threads them).

* ``_for_loop(graph, begin, end, args)`` becomes a nest of ``scf.for`` over tiles. The
  body's outputs are the values of names the loop writes; their initial values are the
  first operands of the ``_phi(init, getitem(loop, i))`` merges that follow the loop,
  and a body placeholder whose outer value is such an init reads the loop-carried value.
  Loop bodies of a special kind (rolled reductions) have a rule of their own, registered
  for the body's graph kind.
* ``_if(test, then_graph, else_graph, then_args, else_args)`` becomes ``scf.if`` with
  one result per variable the branches merge (``IfGraphInfo.branches_outputs``).
* ``_while_loop(cond_graph, body_graph, args, _)`` becomes ``scf.while``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from helion.language import _tracing_ops
from torch import fx

from ...errors import HelionMLIRError
from ...importer.normalize import getitems, graph_outputs
from ...mlir_types import element_type
from ..context import RuleContext
from ..emitter import Emitter
from ..jagged import jagged_ends
from ..registry import register_lowering
from ..values import Scalar, Tensor, Value, results_named

_LOOPS = (_tracing_ops._for_loop, _tracing_ops._for_loop_step, _tracing_ops._while_loop)


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


def zero_like_meta(ctx: RuleContext, meta: Any) -> Value:
    """A zero value of the type a node's meta describes (for values with no initial value)."""
    if isinstance(meta, torch.Tensor):
        return ctx.emit.fill(ctx.static_shape(meta), meta.dtype, 0)
    if isinstance(meta, torch.SymFloat):
        return ctx.emit.const(0.0, "f64")
    if isinstance(meta, torch.SymBool):
        return ctx.emit.const(False, "i1")
    return ctx.emit.const(0, "index")


def _as_carried(emit: Emitter, value: Any) -> Value:
    if isinstance(value, (Tensor, Scalar)):
        return value
    if isinstance(value, bool):
        return emit.const(value, "i1")
    if isinstance(value, int):
        return emit.const(value, "index")
    if isinstance(value, float):
        return emit.const(value, "f64")
    raise HelionMLIRError(f"cannot carry {value!r} through a loop")


def _match_type(emit: Emitter, value: Any, like: Value) -> Value:
    """Convert a loop body's result to the type of the value it replaces."""
    value = _as_carried(emit, value)
    if value.type == like.type:
        return value
    if isinstance(value, Tensor) and isinstance(like, Tensor):
        cast = emit.cast(value, like.dtype)
        if cast.shape != like.shape:
            ssa = emit.assign("cast", f"tensor.cast {cast.ssa} : {cast.type} to {like.type}")
            return Tensor(ssa, like.shape, like.dtype)
        return cast
    if isinstance(value, Scalar) and isinstance(like, Scalar):
        return emit.convert(value, like.type)
    raise HelionMLIRError(f"loop-carried value changes type from {like.type} to {value.type}")


def _initial_values(ctx: RuleContext, outputs: list[Any], inits: list[Any]) -> list[Value]:
    """Each loop output's value before the loop (its ``_phi`` init), or a zero of its type
    when it has none."""
    return [_as_carried(ctx.emit, ctx.value(init)) if init is not None
            else zero_like_meta(ctx, out.meta.get("val") if isinstance(out, fx.Node) else out)
            for out, init in zip(outputs, inits)]


def _loop_bound(ctx: RuleContext, value: Any) -> Any:
    value = ctx.value(value)
    if isinstance(value, (int, Scalar)):
        return value
    if isinstance(value, Tensor):
        return ctx.scalar(value, "index")
    raise HelionMLIRError(f"loop bound {value!r} is not an integer")


@register_lowering(_tracing_ops._for_loop, _tracing_ops._for_loop_step, graphs=(0,), side_effects=True)
def lower_for_loop(ctx: RuleContext, node: fx.Node) -> list[Any]:
    """``_for_loop(graph, begins, ends, args[, steps])``: a nest of ``scf.for`` over the tiles
    of the body's block ids, the body graph lowered once inside.

    The loop carries the host tensors the body writes, then one value per body output:
    the output's value before the loop (the first operand of the ``_phi`` that merges it
    after the loop), or a zero when it has none. A body placeholder bound to such an
    initial value reads the loop-carried value instead. The node's value is the list of
    the outputs' final values. A jagged tile's loop (``hl.jagged_tile(ends)``: its first
    input is the tensor of ends) masks each lane past its row's end (see :mod:`..jagged`).
    """
    graph_id, begins, ends, args = node.args[:4]
    info = ctx.model.graph(int(graph_id))
    block_ids = list(info.block_ids)
    steps = list(node.args[4]) if len(node.args) > 4 else [None] * len(block_ids)
    steps = [None if s in (None, 1) and node.target is _tracing_ops._for_loop else s for s in steps]
    begins = [_loop_bound(ctx, b) for b in begins]
    ends = [_loop_bound(ctx, e) for e in ends]
    outputs = graph_outputs(info.graph)
    items = getitems(node)
    inits = [_phi_init(items.get(i)) for i in range(len(outputs))]
    written = ctx.carried(int(graph_id))
    carried = written.current() + _initial_values(ctx, outputs, inits)
    outer_args = list(args)
    jagged = jagged_ends(ctx, block_ids, outer_args)

    def body(current: list[Value]) -> list[Value]:
        loop_values = written.bind(current)
        inputs = [loop_values[inits.index(outer)] if outer in inits else ctx.value(outer) for outer in outer_args]
        results = ctx.run_graph(int(graph_id), inputs)
        return written.current() + [_match_type(ctx.emit, r, c) for r, c in zip(results, loop_values)]

    return written.bind(ctx.tile_loops(block_ids, begins, ends, steps, carried, body, jagged))


@register_lowering(operator.getitem)
def lower_getitem(ctx: RuleContext, node: fx.Node) -> Any:
    container = ctx.recorded(node.args[0])
    if not isinstance(container, (list, tuple)):
        raise HelionMLIRError(f"getitem on {container!r}")
    return container[int(node.args[1])]


@register_lowering(_tracing_ops._phi)
def lower_phi(ctx: RuleContext, node: fx.Node) -> Any:
    """A merge after a loop is the loop's result; after an ``_if``, the merged value of
    its variable (see :class:`BranchResults`)."""
    for item in node.args[:2]:
        source = item.args[0] if isinstance(item, fx.Node) and item.target is operator.getitem else None
        if isinstance(source, fx.Node) and source.target is _tracing_ops._if:
            return ctx.recorded(source).merged_value(int(item.args[1]))
    rhs = node.args[1]
    if isinstance(rhs, fx.Node) and rhs.target is operator.getitem:
        source = rhs.args[0]
        if isinstance(source, fx.Node) and source.target in _LOOPS:
            return ctx.recorded(rhs)
    raise HelionMLIRError("unsupported _phi: expected the merge of a loop result with its initial value")


def branch_condition(ctx: RuleContext, value: Any) -> Scalar | bool:
    """A lowered value as a branch or loop condition: an ``i1``, or a Python bool when it is
    known now."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, Tensor):
        value = ctx.scalar(value, element_type(value.dtype))
    if isinstance(value, Scalar):
        return ctx.emit.convert(value, "i1")
    raise HelionMLIRError(f"cannot branch on {value!r}")


class BranchResults(list):
    """An ``_if`` node's ``2 * N`` results (the then-side values, then the else-side ones),
    and the merged value of each of its ``N`` variables, which its ``_phi`` merges read."""

    def __init__(self, results: list[Any], merged: list[Any]) -> None:
        super().__init__(results)
        self.merged = merged

    def merged_value(self, position: int) -> Any:
        return self.merged[position % len(self.merged)]


@register_lowering(_tracing_ops._if, graphs=(1, 2), side_effects=True)
def lower_if(ctx: RuleContext, node: fx.Node) -> BranchResults:
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
    info = ctx.model.graph(int(then_gid))
    entries = list(info.branches_outputs or [])
    outer_nodes = dict(zip(info.if_arg_names or [], then_args))
    outer_nodes.update(zip(info.else_arg_names or [], else_args))
    for entry in entries:
        for src in entry:
            if not isinstance(src, int) and src not in outer_nodes:
                raise HelionMLIRError(f"a branch leaves {src!r} unchanged, but its value before the if is unknown")
    written = ctx.carried(int(then_gid), int(else_gid))
    metas = node.meta.get("val") or []
    sides = ((then_gid, then_args), (else_gid, else_args))

    def side_values(side: int, outs: list[Any], keys: list[int]) -> list[Any]:
        return [outs[src] if isinstance(src, int) else ctx.value(outer_nodes[src])
                for src in (entries[k][side] for k in keys)]

    def run_side(side: int) -> list[Any]:
        gid, args = sides[side]
        return ctx.run_graph(int(gid), [ctx.value(a) for a in args])

    cond = branch_condition(ctx, ctx.value(test))
    if isinstance(cond, bool):  # statically known: emit the taken branch only
        side = 0 if cond else 1
        return _if_results(ctx, entries, outer_nodes, side_values(side, run_side(side), list(range(len(entries)))))

    copied = {k: pair for k in range(len(entries))
              if None not in (pair := tuple(_copied_outer(ctx, entries[k][s], *sides[s], outer_nodes) for s in (0, 1)))}
    kept = [k for k in range(len(entries)) if k not in copied]
    merged: list[Any] = [None] * len(entries)
    before = written.current()
    templates: list[Value] = before + [template_of_meta(ctx, metas[k] if k < len(metas) else None) for k in kept]
    if templates:
        emit = ctx.emit
        types = [t.type for t in templates]
        result = emit.fresh("if")
        lhs = f"{result}:{len(templates)} = " if len(templates) > 1 else f"{result} = "
        header = f"{lhs}scf.if {cond.ssa} -> ({', '.join(types)}) {{"

        def branch(side: int) -> None:
            written.bind(before)
            outs = run_side(side)
            vals = written.current() + side_values(side, outs, kept)
            vals = [_match_type(emit, x, t) for x, t in zip(vals, templates)]
            emit.op(f"scf.yield {', '.join(x.ssa for x in vals)} : {', '.join(types)}")

        with emit.region(header, "} else {", locate_footer=False):
            branch(0)
        with emit.region("", "}"):
            branch(1)
        for k, value in zip(kept, written.bind(results_named(result, templates))):
            merged[k] = value
    for k, (then_value, else_value) in copied.items():
        like = template_of_meta(ctx, metas[k] if k < len(metas) else None)
        merged[k] = _select(ctx.emit, cond, _match_type(ctx.emit, then_value, like), _match_type(ctx.emit, else_value, like))
    return _if_results(ctx, entries, outer_nodes, merged)


def _copied_outer(ctx: RuleContext, src: int | str, gid: Any, args: list[Any], outer_nodes: dict[str, Any]) -> Any:
    """The value from before the ``if`` that a branch leaves in a variable without computing
    anything (it keeps the variable, or assigns another one to it); None if it computes it."""
    if not isinstance(src, int):
        return ctx.value(outer_nodes[src])
    graph = ctx.model.graph(int(gid)).graph
    out = graph_outputs(graph)[src]
    while isinstance(out, fx.Node) and out.target is _tracing_ops._new_var:
        out = out.args[0]
    if not isinstance(out, fx.Node) or out.op != "placeholder":
        return None
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    return ctx.value(args[placeholders.index(out)])


def _select(emit: Emitter, cond: Scalar, a: Value, b: Value) -> Value:
    """``cond ? a : b``; a linalg.generic for tensors (torch-mlir's backend contract has no
    tensor-typed arith.select)."""
    if isinstance(a, Scalar):
        out = emit.assign("sel", f"arith.select {cond.ssa}, {a.ssa}, {b.ssa} : {a.type}")
        return Scalar(out, a.type)
    assert isinstance(a, Tensor) and isinstance(b, Tensor)

    def body(args: list[str], _index_of: Callable[[int], str]) -> str:
        out = emit.assign("sel", f"arith.select {cond.ssa}, {args[0]}, {args[1]} : {element_type(a.dtype)}")
        return out

    return emit.elementwise([a, b], a.shape, a.dtype, body, hint="select")


def _if_results(ctx: RuleContext, entries: list[tuple[Any, ...]], outer_nodes: dict[str, Any],
                merged: list[Any]) -> BranchResults:
    """The ``_if`` node's ``2 * N`` results, with the merged values its ``_phi`` nodes read.

    A result of a branch that leaves the variable unchanged is the value before the ``if``
    (Helion re-binds later uses of that value to it); any other result is the merged value.
    """
    results: list[Any] = []
    for side in (0, 1):
        for k, entry in enumerate(entries):
            src = entry[side]
            results.append(merged[k] if isinstance(src, int) else ctx.value(outer_nodes[src]))
    return BranchResults(results, merged)


def template_of_meta(ctx: RuleContext, meta: Any) -> Value:
    """A placeholder value with the MLIR type a node's meta describes."""
    if isinstance(meta, torch.Tensor):
        return Tensor("", tuple(ctx.static_shape(meta)), meta.dtype)
    if isinstance(meta, (torch.SymFloat, float)):
        return Scalar("", "f64")
    if isinstance(meta, (torch.SymBool, bool)):
        return Scalar("", "i1")
    return Scalar("", "index")


@register_lowering(_tracing_ops._while_loop, graphs=(0, 1), side_effects=True)
def lower_while_loop(ctx: RuleContext, node: fx.Node) -> list[Any]:
    """``_while_loop(cond_graph, body_graph, args)``: ``scf.while``.

    It carries the host tensors either graph writes, then one value per body output,
    initialised as for a ``_for_loop`` (the ``_phi`` init, else a zero). The before region
    runs the condition graph and forwards the carried values to ``scf.condition``; the
    after region runs the body graph and yields its results. The node's value is the list
    of the outputs' final values.
    """
    cond_gid, body_gid, args = int(node.args[0]), int(node.args[1]), list(node.args[2])
    if len(node.args) > 3 and node.args[3] is not None:
        raise HelionMLIRError("while loops with an else clause are not supported")
    outputs = graph_outputs(ctx.model.graph(body_gid).graph)
    items = getitems(node)
    inits = [_phi_init(items.get(i)) for i in range(len(outputs))]
    written = ctx.carried(body_gid, cond_gid)
    carried = written.current() + _initial_values(ctx, outputs, inits)

    def graph_inputs(loop_values: list[Value]) -> list[Any]:
        return [loop_values[inits.index(a)] if a in inits else ctx.value(a) for a in args]

    emit = ctx.emit
    names = [emit.fresh("w") for _ in carried]
    body_names = [emit.fresh("wb") for _ in carried]
    types = [c.type for c in carried]
    result = emit.fresh("while")
    inits_text = ", ".join(f"{n} = {c.ssa}" for n, c in zip(names, carried))
    results = f"{result}:{len(carried)} = " if len(carried) > 1 else (f"{result} = " if carried else "")
    header = f"{results}scf.while ({inits_text}) : ({', '.join(types)}) -> ({', '.join(types)}) {{"
    current = [c.renamed(n) for c, n in zip(carried, names)]
    with emit.region(header, "} do {", locate_footer=False):
        (test,) = ctx.run_graph(cond_gid, graph_inputs(written.bind(current)))
        flag = branch_condition(ctx, test)
        flag = flag if isinstance(flag, Scalar) else emit.const(flag, "i1")
        emit.op(f"scf.condition({flag.ssa}) {', '.join(c.ssa for c in current)} : {', '.join(types)}")
    body_current = [c.renamed(n) for c, n in zip(carried, body_names)]
    with emit.region(f"^bb0({', '.join(f'{n}: {t}' for n, t in zip(body_names, types))}):", "}"):
        loop_values = written.bind(body_current)
        results_ = ctx.run_graph(body_gid, graph_inputs(loop_values))
        nexts = written.current() + [_match_type(emit, r, c) for r, c in zip(results_, loop_values)]
        emit.op(f"scf.yield {', '.join(x.ssa for x in nexts)} : {', '.join(types)}")
    return written.bind(results_named(result, carried))
