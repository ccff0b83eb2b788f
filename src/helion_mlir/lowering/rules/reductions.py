"""``hl.reduce`` and ``hl.associative_scan`` with user combine functions.

A combine function is an arbitrary device-IR graph, so there is no identity to start a
``linalg.reduce`` from. Both ops become an ``scf.for`` along the reduced dimension that
starts from the first slice and folds in one slice per step, running the combine graph
on whole slices (its ATen ops are re-imported for the slice shape). Scans insert every
running value into the result, which starts as the input: the scan's first value is the
input's first slice, and the loop overwrites every other one, so no element of the
result is left unwritten (a ``tensor.empty`` there would be read at the first position).
"""

from __future__ import annotations

from typing import Any

from helion.language import reduce_ops, scan_ops
from torch import fx

from ...errors import HelionMLIRError
from ..context import RuleContext
from ..emitter import Emitter
from ..ragged import ragged_dims
from ..registry import register_lowering
from ..unit_dims import expand_dims
from ..values import Tensor


def _slice_at(emit: Emitter, value: Tensor, dim: int, position: Any) -> Tensor:
    """``value`` at ``position`` along ``dim``, that dimension dropped."""
    offsets = ", ".join(emit.index(position).ssa if d == dim else "0" for d in range(value.rank))
    sizes = ", ".join("1" if d == dim else _size(emit, value, d) for d in range(value.rank))
    strides = ", ".join("1" for _ in value.shape)
    shape = tuple(s for d, s in enumerate(value.shape) if d != dim)
    result = Tensor(emit.fresh("part"), shape, value.dtype)
    emit.op(f"{result.ssa} = tensor.extract_slice {value.ssa}[{offsets}] [{sizes}] [{strides}] : {value.type} to {result.type}")
    return result


def _insert_at(emit: Emitter, dest: Tensor, part: Tensor, dim: int, position: Any) -> Tensor:
    offsets = ", ".join(emit.index(position).ssa if d == dim else "0" for d in range(dest.rank))
    sizes = ", ".join("1" if d == dim else _size(emit, dest, d) for d in range(dest.rank))
    strides = ", ".join("1" for _ in dest.shape)
    result = Tensor(emit.fresh("scan"), dest.shape, dest.dtype)
    emit.op(f"{result.ssa} = tensor.insert_slice {part.ssa} into {dest.ssa}[{offsets}] [{sizes}] [{strides}] : {part.type} into {dest.type}")
    return result


def _size(emit: Emitter, value: Tensor, axis: int) -> str:
    size = emit.dim(value, axis)
    return str(size) if isinstance(size, int) else size.ssa


def _inputs(ctx: RuleContext, arg: Any) -> list[Tensor]:
    if isinstance(arg, (list, tuple)):
        return [ctx.tensor(a) for a in arg]
    return [ctx.tensor(arg)]


def _combine(ctx: RuleContext, graph_id: int, lhs: list[Tensor], rhs: list[Tensor]) -> list[Tensor]:
    outs = ctx.run_graph(graph_id, lhs + rhs)
    return [ctx.emit.cast(o, l.dtype) if isinstance(o, Tensor) else o for o, l in zip(outs, lhs)]


@register_lowering(reduce_ops._reduce, graphs=(0,))
def lower_reduce(ctx: RuleContext, node: fx.Node) -> Any:
    """``hl.reduce(combine_fn, inputs, dim, keep_dims)``: an ``scf.for`` along ``dim`` from
    the first slice, folding in one slice per step with the combine graph; the reduced
    dimension kept as a unit dimension with ``keep_dims``."""
    graph_id, inputs_arg = int(node.args[0]), node.args[1]
    dim = node.args[2] if len(node.args) > 2 else None
    keep_dims = bool(node.args[3]) if len(node.args) > 3 else False
    inputs = _inputs(ctx, inputs_arg)
    emit = ctx.emit
    if dim is None:
        raise HelionMLIRError("hl.reduce over all dimensions is not supported; give dim=")
    dim = int(dim) % inputs[0].rank
    n = emit.dim(inputs[0], dim)
    first = [_slice_at(emit, x, dim, 0) for x in inputs]

    def step(iv: Any, acc: list[Any]) -> list[Any]:
        return _combine(ctx, graph_id, acc, [_slice_at(emit, x, dim, iv) for x in inputs])

    result = first if n == 1 else emit.for_loop(1, n, 1, first, step, hint="reduce")
    if keep_dims:
        result = [expand_dims(emit, r, [dim]) for r in result]  # type: ignore[arg-type]
    return tuple(result) if isinstance(inputs_arg, (list, tuple)) else result[0]


@register_lowering(scan_ops._associative_scan, graphs=(0,))
def lower_associative_scan(ctx: RuleContext, node: fx.Node) -> Any:
    """``hl.associative_scan(combine_fn, inputs, dim, reverse)``: an ``scf.for`` along ``dim``
    carrying the running value and inserting it into each result at every position (from
    the last in-bounds position backwards with ``reverse``)."""
    graph_id, inputs_arg, dim = int(node.args[0]), node.args[1], int(node.args[2])
    reverse = bool(node.args[3]) if len(node.args) > 3 else False
    inputs = _inputs(ctx, inputs_arg)
    emit = ctx.emit
    dim = dim % inputs[0].rank
    n = emit.dim(inputs[0], dim)
    if reverse:
        n = _in_bounds_length(ctx, inputs_arg, dim, n)
    last = n - 1 if isinstance(n, int) else emit.binary("arith.subi", emit.index(n), emit.index(1))
    start = last if reverse else 0
    first = [_slice_at(emit, x, dim, start) for x in inputs]
    outs = list(inputs)  # already holds the first value at ``start``

    def step(iv: Any, carried: list[Any]) -> list[Any]:
        position = iv
        if reverse:
            position = emit.binary("arith.subi", emit.index(last), iv)
        acc, results = carried[: len(inputs)], carried[len(inputs):]
        acc = _combine(ctx, graph_id, acc, [_slice_at(emit, x, dim, position) for x in inputs])
        results = [_insert_at(emit, r, a, dim, position) for r, a in zip(results, acc)]
        return acc + results

    if n != 1:
        outs = emit.for_loop(1, n, 1, first + outs, step, hint="scan")[len(inputs):]
    return tuple(outs) if isinstance(inputs_arg, (list, tuple)) else outs[0]


def _in_bounds_length(ctx: RuleContext, inputs_arg: Any, dim: int, size: Any) -> Any:
    """How many lanes along ``dim`` a reverse scan runs over. Along a ragged tile it
    starts from the last in-bounds lane: the padding lanes after it would otherwise be
    folded into every real one (a product over zero padding gives zeros). A forward scan
    needs no such care, since padding comes after every real lane."""
    first = inputs_arg[0] if isinstance(inputs_arg, (list, tuple)) else inputs_arg
    tile = dict(ragged_dims(ctx, first, ctx.tensor(first).rank)).get(dim)
    return tile.extent if tile is not None and size == tile.size else size
