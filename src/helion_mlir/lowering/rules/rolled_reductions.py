"""Rolled reductions: a reduction dimension lowered as a loop over chunks.

With ``config.reduction_loops`` Helion's ``build_codegen_graphs`` moves the work over a
reduction dimension into ``ReductionLoopGraphInfo`` bodies called by
``_for_loop(body, [0], [rdim size], args)``. Inside a body a reduction node stands for the
reduction of one chunk; the accumulation across chunks is left to Helion's code
generators. Here it is explicit:

* the loop is an ``scf.for`` over chunk offsets with the reduction block active as a tile
  of the chunk size (``reduction_loops[i]``), its extent clipped on a ragged last chunk;
* each reduction output of the body is carried as accumulators (``iter_args``) that start
  at the reduction's identity;
* a reduction node's per-element value is its Inductor inner function evaluated on whole
  chunk tensors (:class:`ChunkOps`), folded into the accumulators by one ``linalg.generic``
  with a reduction iterator; lanes past the end of the dimension select the identity
  (arg-reductions: never win);
* after the loop the accumulators are finalised: cast to the result dtype, the index of
  an arg-reduction, the values and indices of ``max.dim``.

Multi-buffer lowerings (``mean``, ``var``, ``var_mean``, ...) keep their pointwise tail
(``sum / n``, ``sum_sq / (n - correction)``) outside the loops, in nodes whose traced
inputs live in the loop bodies; a later loop over the same dimension that uses the tail
(layer norm's ``x - mean`` in the loop that writes the output) recomputes it in its body
from the finished reduction, beside a traced input that is now one chunk. The traced
form would reduce that chunk alone, so every such tail is evaluated from its Inductor
inner function, with the reduction dimension's symbol standing for its full size.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from helion._compiler.device_ir import ReductionLoopGraphInfo
from helion._compiler.inductor_lowering import (
    ReductionLowering,
)
from helion.language import _tracing_ops
from torch import fx
from torch._inductor.virtualized import OpsValue

from ...errors import HelionMLIRError
from ...importer.normalize import graph_outputs
from ...mlir_types import UNSIGNED_DTYPES, element_type
from ..context import RuleContext
from ..emitter import Emitter, broadcast_shapes
from ..registry import register_lowering
from ..rolled_analysis import (
    Fold,
    BINARY_OPS,
    HALF_DTYPES,
    UNARY_OPS,
    index_symbols,
    inductor_handlers,
    inductor_input_nodes,
    needs_inductor_tail,
    rolled_reduction,
)
from ..values import Scalar, Tensor, Tile

__all__ = ["ChunkOps", "lower_reduction_loop"]

log = logging.getLogger(__name__)

class ChunkOps:
    """Inductor's ops handler on whole tensors: every op is one elementwise ``linalg.generic``.

    Helion's code generators read an Inductor input by name whatever its index (the value
    a node input holds at the output's position); loads here do the same, and tensors
    broadcast as in numpy. ``index_expr`` evaluates its expression with each rolled
    reduction dimension's symbol replaced by the dimension's full size.
    """

    def __init__(self, ctx: RuleContext, inputs: dict[str, Tensor]) -> None:
        self.ctx = ctx
        self.emit = ctx.emit
        self.inputs = inputs

    def load(self, name: str, _index: Any) -> Tensor:
        if name not in self.inputs:
            raise HelionMLIRError(f"Inductor load of '{name}', which is not an input of the node")
        return self.inputs[name]

    def constant(self, value: Any, dtype: torch.dtype) -> Tensor:
        return self.emit.fill((), dtype, value)

    def index_expr(self, expr: Any, dtype: torch.dtype) -> Tensor:
        value = self.ctx.eval_symbolic(sympy.sympify(expr).subs(_full_sizes(self.ctx)))
        return self.emit.fill((), dtype, value)

    def to_dtype(self, x: Tensor, dtype: torch.dtype, src_dtype: Any = None, use_compute_types: bool = True) -> Tensor:
        return self.emit.cast(x, dtype)

    def square(self, x: Tensor) -> Tensor:
        return self._binary("mul", x, x)

    def reciprocal(self, x: Tensor) -> Tensor:
        return self._binary("truediv", self.constant(1, x.dtype), x)

    def __getattr__(self, name: str) -> Callable[..., Tensor]:
        if name in BINARY_OPS:
            return lambda a, b: self._binary(name, a, b)
        if name in UNARY_OPS:
            return lambda a: self._unary(name, a)
        raise AttributeError(f"Inductor op '{name}' is not evaluated on chunks")

    def _binary(self, name: str, a: Tensor, b: Tensor) -> Tensor:
        dtype = torch.promote_types(a.dtype, b.dtype)
        a, b = self.emit.cast(a, dtype), self.emit.cast(b, dtype)
        float_op, int_op = BINARY_OPS[name]
        op = float_op if dtype.is_floating_point else int_op
        if op is None:
            raise HelionMLIRError(f"Inductor op '{name}' on {dtype} is not evaluated on chunks")
        shape = broadcast_shapes(a.shape, b.shape)
        elt = element_type(dtype)

        def body(args: list[str], _index: Callable[[int], str]) -> str:
            out = self.emit.assign("x", f"{op} {args[0]}, {args[1]} : {elt}")
            return out

        return self.emit.elementwise([a, b], shape, dtype, body, hint=name)

    def _unary(self, name: str, a: Tensor) -> Tensor:
        float_op, int_op = UNARY_OPS[name]
        op = float_op if a.dtype.is_floating_point else int_op
        if op is None:
            raise HelionMLIRError(f"Inductor op '{name}' on {a.dtype} is not evaluated on chunks")
        elt = element_type(a.dtype)

        def body(args: list[str], _index: Callable[[int], str]) -> str:
            out = self.emit.assign("x", f"{op} {args[0]} : {elt}")
            return out

        return self.emit.elementwise([a], a.shape, a.dtype, body, hint=name)


def _full_sizes(ctx: RuleContext) -> dict[sympy.Symbol, Any]:
    """Each rolled reduction dimension's symbol -> its number of elements."""
    sizes: dict[sympy.Symbol, Any] = {}
    for bid in ctx.model.rolled_blocks:
        var = ctx.model.bound.env.block_sizes[bid].var
        numel = ctx.model.block_numel[bid]
        if isinstance(var, torch.SymInt):
            sizes[var._sympy_()] = numel._sympy_() if isinstance(numel, torch.SymInt) else sympy.Integer(numel)
    return sizes


def _inductor_inputs(ctx: RuleContext, node: fx.Node, lowering: Any) -> dict[str, Tensor]:
    """The node's inputs by Inductor buffer name."""
    nodes = inductor_input_nodes(node)
    if len(nodes) != len(lowering.input_names):
        raise HelionMLIRError(f"'{node.name}' has {len(nodes)} inputs but its Inductor lowering reads {len(lowering.input_names)}")
    return {name: _tensor_input(ctx, n) for name, n in zip(lowering.input_names, nodes)}


def _tensor_input(ctx: RuleContext, node: fx.Node) -> Tensor:
    """An input's tensor, lowered now if only the Inductor form reads it (not live as traced)."""
    value = ctx.lowered(node)
    if not isinstance(value, Tensor):
        raise HelionMLIRError(f"expected a tensor, got {value!r}")
    return value


def _evaluate(ctx: RuleContext, node: fx.Node, lowering: Any, *args: Any) -> Tensor:
    handler = ChunkOps(ctx, _inductor_inputs(ctx, node, lowering))
    with inductor_handlers(handler):
        result = lowering.buffer.data.inner_fn(*args)
    while isinstance(result, OpsValue):
        result = result.value
    if not isinstance(result, Tensor):
        raise HelionMLIRError(f"the Inductor form of '{node.name}' gave {result!r}, not a tensor")
    return result


def lower_inductor_tail(ctx: RuleContext, node: fx.Node) -> Any:
    """The pointwise tail of a multi-buffer lowering (``mean = sum / n`` ...), from its Inductor form."""
    lowering = node.meta["lowering"]
    data = lowering.buffer.data
    value = _evaluate(ctx, node, lowering, index_symbols(0, len(data.ranges)))
    meta = _own_meta(node)
    value = ctx.emit.broadcast_to(ctx.emit.cast(value, meta.dtype), ctx.static_shape(meta))
    return _outputs_of(ctx, node, value)


def _own_meta(node: fx.Node) -> torch.Tensor:
    """The tensor a node's own buffer produces (its entry of a multi-output result)."""
    val = node.meta["val"]
    if isinstance(val, (tuple, list)):
        own = [i for i, name in node.meta.get("output_nodes", {}).items() if name == _original(node).name]
        return val[own[0] if own else 0]
    return val


def _original(node: fx.Node) -> fx.Node:
    return node.meta.get("orig_node", node)


def _outputs_of(ctx: RuleContext, node: fx.Node, own: Tensor) -> Any:
    """``own`` for a single-output node; for a multi-output one the tuple of outputs, the
    others read from the sibling nodes Helion made for them (``_extra_args``/``_extra_deps``)."""
    val = node.meta["val"]
    if not isinstance(val, (tuple, list)):
        return own
    original = _original(node)
    siblings: dict[str, fx.Node] = {}
    for key in ("_extra_args", "_extra_deps"):
        for before, now in zip(original.kwargs.get(key, []) or [], node.kwargs.get(key, []) or []):
            if isinstance(before, fx.Node) and isinstance(now, fx.Node):
                siblings[before.name] = now
    outputs = []
    for index in range(len(val)):
        name = node.meta.get("output_nodes", {}).get(index, original.name)
        if name == original.name:
            outputs.append(own)
        elif name in siblings:
            outputs.append(_tensor_input(ctx, siblings[name]))
        else:
            raise HelionMLIRError(f"output {index} of '{node.name}' comes from '{name}', which is not an input of it")
    return tuple(outputs)


# -- accumulators ---------------------------------------------------------------------------
def _accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in HALF_DTYPES else dtype


def _identity(kind: Fold, dtype: torch.dtype) -> float | int | bool:
    """The value that leaves an accumulator unchanged (the start of a ``kind`` reduction)."""
    if kind in (Fold.SUM, Fold.ANY):
        return 0
    if kind is Fold.PROD:
        return 1
    largest = kind in (Fold.MAX, Fold.ARGMAX)
    if dtype == torch.bool:
        return not largest
    if dtype.is_floating_point:
        return -math.inf if largest else math.inf
    info = torch.iinfo(dtype)
    return info.min if largest else info.max


_INDEX_DTYPE = torch.int64
_NO_INDEX = torch.iinfo(torch.int64).max


@dataclasses.dataclass
class _Fold:
    """One rolled reduction node: its kind, reduced axis and accumulators."""

    node: fx.Node
    lowering: ReductionLowering
    kind: Fold
    shape: tuple[int | None, ...]  # the accumulators' shape (the node's output)
    value_dtype: torch.dtype  # what the accumulators hold (indices aside)

    @property
    def is_arg(self) -> bool:
        return self.kind.is_arg

    @property
    def count(self) -> int:
        """How many accumulators it carries."""
        return 2 if self.is_arg else 1

    def initial(self, emit: Emitter) -> list[Tensor]:
        values = emit.fill(self.shape, self.value_dtype, _identity(self.kind, self.value_dtype))
        if not self.is_arg:
            return [values]
        return [values, emit.fill(self.shape, _INDEX_DTYPE, _NO_INDEX)]

    def final(self, ctx: RuleContext, accs: Sequence[Tensor]) -> Any:
        meta = _own_meta(self.node)
        own = ctx.emit.cast(accs[1] if self.is_arg else accs[0], meta.dtype)
        return _outputs_of(ctx, self.node, own)


def _fold_of(ctx: RuleContext, node: fx.Node, lowering: ReductionLowering) -> _Fold:
    data = lowering.buffer.data
    kind = Fold(lowering.reduction_type)
    dtype = data.src_dtype if kind.is_arg else data.dtype
    if kind is Fold.ANY:
        dtype = torch.bool
    return _Fold(node, lowering, kind, tuple(ctx.static_shape(_own_meta(node))), _accumulator_dtype(dtype))


def _reduced_axis(ctx: RuleContext, node: fx.Node, block_id: int) -> tuple[int, tuple[int | None, ...]]:
    """The axis of the chunk value a reduction folds, and the chunk value's shape."""
    for source in inductor_input_nodes(node):
        meta = source.meta.get("val")
        if isinstance(meta, torch.Tensor):
            for axis, size in enumerate(meta.shape):
                if ctx.model.block_id_of(size) == block_id:
                    return axis, tuple(ctx.static_shape(meta))
    raise HelionMLIRError(f"'{node.name}' has no input over the rolled reduction dimension")


def _fold_chunk(emit: Emitter, fold: _Fold, chunk: Tensor, axis: int, tile: Tile, accs: list[Tensor]) -> list[Tensor]:
    """Fold one chunk into the accumulators: a ``linalg.generic`` reducing ``axis`` with the
    accumulators as its outputs. Lanes at or past the chunk's extent do not contribute."""
    rank = chunk.rank
    dims = [f"d{i}" for i in range(rank)]
    keep = len(fold.shape) == rank
    out_exprs = [("0" if keep else None) if d == axis else dims[d] for d in range(rank)]
    in_map = f"affine_map<({', '.join(dims)}) -> ({', '.join(dims)})>"
    out_map = f"affine_map<({', '.join(dims)}) -> ({', '.join(e for e in out_exprs if e is not None)})>"
    iterators = ", ".join('"reduction"' if d == axis else '"parallel"' for d in range(rank))
    types = [a.type for a in accs]
    result = emit.fresh("fold")
    lhs = f"{result}:{len(accs)}" if len(accs) > 1 else result
    header = (
        f"{lhs} = linalg.generic {{indexing_maps = [{in_map}, {', '.join([out_map] * len(accs))}], "
        f"iterator_types = [{iterators}]}} ins({chunk.ssa} : {chunk.type}) "
        f"outs({', '.join(a.ssa for a in accs)} : {', '.join(types)}) {{"
    )
    x, acc_args = emit.fresh("x"), [emit.fresh("acc") for _ in accs]
    decls = [f"{x}: {element_type(chunk.dtype)}"] + [f"{a}: {element_type(t.dtype)}" for a, t in zip(acc_args, accs)]
    with emit.region(header, f"}} -> ({', '.join(types)})" if len(accs) > 1 else f"}} -> {types[0]}"):
        emit.block_header(", ".join(decls))
        lane = emit.assign("lane", f"linalg.index {axis} : index")
        inside = emit.lanes_in_bounds([(lane, tile.extent)]) if tile.ragged else None
        value = emit.convert(Scalar(x, element_type(chunk.dtype)), element_type(fold.value_dtype)).ssa
        if fold.is_arg:
            yields = _arg_step(emit, fold, value, tile, lane, inside, acc_args)
        else:
            yields = [_plain_step(emit, fold, value, inside, acc_args[0])]
        emit.op(f"linalg.yield {', '.join(yields)} : {', '.join(element_type(a.dtype) for a in accs)}")
    if len(accs) == 1:
        return [Tensor(result, accs[0].shape, accs[0].dtype)]
    return [Tensor(f"{result}#{i}", a.shape, a.dtype) for i, a in enumerate(accs)]


_PLAIN_COMBINE = {
    Fold.SUM: ("arith.addf", "arith.addi"),
    Fold.PROD: ("arith.mulf", "arith.muli"),
    Fold.MAX: ("arith.maximumf", "arith.maxsi"),
    Fold.MIN: ("arith.minimumf", "arith.minsi"),
    Fold.ANY: (None, "arith.ori"),
}
# Booleans combine with logic: max and sum are "or", min and prod are "and".
_BOOL_COMBINE = {Fold.MAX: "arith.ori", Fold.SUM: "arith.ori", Fold.MIN: "arith.andi", Fold.PROD: "arith.andi"}


def _plain_step(emit: Emitter, fold: _Fold, value: str, inside: str | None, acc: str) -> str:
    elt = element_type(fold.value_dtype)
    if inside is not None:
        identity = emit.const(_identity(fold.kind, fold.value_dtype), elt)
        masked = emit.assign("masked", f"arith.select {inside}, {value}, {identity.ssa} : {elt}")
        value = masked
    float_op, int_op = _PLAIN_COMBINE[fold.kind]
    if fold.value_dtype == torch.bool:
        int_op = _BOOL_COMBINE.get(fold.kind, int_op)
    op = float_op if fold.value_dtype.is_floating_point else int_op
    out = emit.assign("comb", f"{op} {acc}, {value} : {elt}")
    return out


def _arg_step(emit: Emitter, fold: _Fold, value: str, tile: Tile, lane: str, inside: str | None,
              accs: list[str]) -> list[str]:
    """Keep the better of (accumulated value, index) and (lane value, lane position): a
    strictly better value, or an equal one at a smaller position (the first occurrence, as
    torch); NaN counts as the largest and the smallest value, as in torch."""
    best, best_index = accs
    elt = element_type(fold.value_dtype)
    position = emit.assign("pos", f"arith.addi {emit.index(tile.offset).ssa}, {lane} : index")
    index = emit.convert(Scalar(position, "index"), "i64").ssa
    order = "gt" if fold.kind is Fold.ARGMAX else "lt"

    def arg(op: str) -> str:
        return emit.assign("arg", op)

    if fold.value_dtype.is_floating_point:
        better = arg(f"arith.cmpf o{order}, {value}, {best} : {elt}")
        is_nan = arg(f"arith.cmpf uno, {value}, {value} : {elt}")
        best_not_nan = arg(f"arith.cmpf ord, {best}, {best} : {elt}")
        better = arg(f"arith.ori {better}, {arg(f'arith.andi {is_nan}, {best_not_nan} : i1')} : i1")
        same = arg(f"arith.cmpf ueq, {value}, {best} : {elt}")
        both_nan = arg(f"arith.andi {is_nan}, {arg(f'arith.cmpf uno, {best}, {best} : {elt}')} : i1")
        same = arg(f"arith.ori {arg(f'arith.andi {same}, {best_not_nan} : i1')}, {both_nan} : i1")
    else:
        signed = "u" if fold.value_dtype is torch.bool or fold.value_dtype in UNSIGNED_DTYPES else "s"
        better = arg(f"arith.cmpi {signed}{order}, {value}, {best} : {elt}")
        same = arg(f"arith.cmpi eq, {value}, {best} : {elt}")
    earlier = arg(f"arith.cmpi slt, {index}, {best_index} : i64")
    take = arg(f"arith.ori {better}, {arg(f'arith.andi {same}, {earlier} : i1')} : i1")
    if inside is not None:
        take = arg(f"arith.andi {take}, {inside} : i1")
    return [arg(f"arith.select {take}, {value}, {best} : {elt}"), arg(f"arith.select {take}, {index}, {best_index} : i64")]


# -- the loop --------------------------------------------------------------------------------
@dataclasses.dataclass
class _Folded:
    """What a rolled reduction node yields inside the loop body: its next accumulators."""

    accs: list[Tensor]


@register_lowering(_tracing_ops._for_loop, _tracing_ops._for_loop_step, graph_kind=ReductionLoopGraphInfo)
def lower_reduction_loop(ctx: RuleContext, node: fx.Node) -> list[Any]:
    """``_for_loop`` over a reduction loop body: ``scf.for`` over chunks carrying the
    written host tensors and the accumulators of every reduction the body outputs.

    Inside the body each of those reduction nodes folds its chunk into its accumulators
    (a rule override for the body's walk); the multi-buffer tails the traced form cannot
    compute are evaluated from their Inductor form (overrides for the rest of the emission).
    """
    graph_id, begins, ends, args = node.args[:4]
    info = ctx.model.graph(int(graph_id))
    block_ids = list(info.block_ids)
    outputs = graph_outputs(info.graph)
    folds: dict[int, _Fold] = {}
    for i, out in enumerate(outputs):
        lowering = rolled_reduction(out, block_ids) if isinstance(out, fx.Node) else None
        if lowering is not None:
            folds[i] = _fold_of(ctx, out, lowering)
    _claim_inductor_tails(ctx)
    written = ctx.carried(int(graph_id))
    initial = written.current()
    for fold in folds.values():
        initial += fold.initial(ctx.emit)
    bounds = [_bound(ctx, b) for b in begins], [_bound(ctx, e) for e in ends]
    outer_args = list(args)

    def body(current: list[Any]) -> list[Any]:
        accumulators = written.bind(current)
        tile = ctx.tile(block_ids[0])
        assert tile is not None
        chunk_rules = {}
        for fold in folds.values():
            chunk_rules[fold.node] = _chunk_rule(fold, tile, accumulators[:fold.count])
            accumulators = accumulators[fold.count:]
        results = ctx.run_graph(int(graph_id), [ctx.value(a) for a in outer_args], overrides=chunk_rules)
        nexts = written.current()
        for i in folds:
            nexts += results[i].accs
        return nexts

    finals = written.bind(ctx.tile_loops(block_ids, bounds[0], bounds[1], [None] * len(block_ids), initial, body))
    values: list[Any] = [None] * len(outputs)
    for i, fold in folds.items():
        values[i] = fold.final(ctx, finals[:fold.count])
        finals = finals[fold.count:]
    log.debug("rolled %d reduction(s) of graph %s over block %s", len(folds), graph_id, block_ids)
    return values


def _chunk_rule(fold: _Fold, tile: Tile, accs: list[Tensor]) -> Callable[[RuleContext, fx.Node], _Folded]:
    def rule(ctx: RuleContext, node: fx.Node) -> _Folded:
        data = fold.lowering.buffer.data
        chunk = _evaluate(ctx, node, fold.lowering, index_symbols(0, len(data.ranges)),
                          index_symbols(len(data.ranges), len(data.reduction_ranges)))
        axis, shape = _reduced_axis(ctx, node, fold.lowering.block_index)
        chunk = ctx.emit.broadcast_to(chunk, shape)
        return _Folded(_fold_chunk(ctx.emit, fold, chunk, axis, tile, accs))

    return rule


def _claim_inductor_tails(ctx: RuleContext) -> None:
    """Lower the multi-buffer tails the traced form cannot compute from their Inductor form
    (see the module doc): after a rolled loop, and inside a later loop over the same
    dimension, whatever graph they sit in."""
    blocks = set(ctx.model.rolled_blocks)
    for graph_id in ctx.model.reachable_graph_ids:
        for other in ctx.model.graph(graph_id).graph.nodes:
            if needs_inductor_tail(other, blocks, ctx.model.block_id_of):
                ctx.override(other, lower_inductor_tail)


def _bound(ctx: RuleContext, value: Any) -> Any:
    value = ctx.value(value)
    if isinstance(value, (int, Scalar)):
        return value
    raise HelionMLIRError(f"reduction loop bound {value!r} is not an integer")
