"""``hl.reduce`` and ``hl.associative_scan`` with user combine functions.

A combine function is an arbitrary device-IR graph, so there is no identity to start a
``linalg.reduce`` from. Both ops become an ``scf.for`` along the reduced dimension that
starts from the first slice and folds in one slice per step, running the combine graph
on whole slices (its ATen ops are re-imported for the slice shape). Scans insert every
running value into the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from helion.language import reduce_ops, scan_ops
from torch import fx

from ...errors import HelionMLIRError
from ..registry import register_lowering
from ..values import Tensor
from .views import expand_dims

if TYPE_CHECKING:
    from ..visitor import IRVisitor


def _slice_at(v: "IRVisitor", value: Tensor, dim: int, position: Any) -> Tensor:
    """``value`` at ``position`` along ``dim``, that dimension dropped."""
    offsets = ", ".join(v.ops.index(position).ssa if d == dim else "0" for d in range(value.rank))
    sizes = ", ".join("1" if d == dim else _size(v, value, d) for d in range(value.rank))
    strides = ", ".join("1" for _ in value.shape)
    shape = tuple(s for d, s in enumerate(value.shape) if d != dim)
    result = Tensor(v.ops.fresh("part"), shape, value.dtype)
    v.ops.op(f"{result.ssa} = tensor.extract_slice {value.ssa}[{offsets}] [{sizes}] [{strides}] : {value.type} to {result.type}")
    return result


def _insert_at(v: "IRVisitor", dest: Tensor, part: Tensor, dim: int, position: Any) -> Tensor:
    offsets = ", ".join(v.ops.index(position).ssa if d == dim else "0" for d in range(dest.rank))
    sizes = ", ".join("1" if d == dim else _size(v, dest, d) for d in range(dest.rank))
    strides = ", ".join("1" for _ in dest.shape)
    result = Tensor(v.ops.fresh("scan"), dest.shape, dest.dtype)
    v.ops.op(f"{result.ssa} = tensor.insert_slice {part.ssa} into {dest.ssa}[{offsets}] [{sizes}] [{strides}] : {part.type} into {dest.type}")
    return result


def _size(v: "IRVisitor", value: Tensor, axis: int) -> str:
    size = v.ops.dim(value, axis)
    return str(size) if isinstance(size, int) else size.ssa


def _empty_like(v: "IRVisitor", value: Tensor) -> Tensor:
    dynamic = [v.ops.dim(value, d) for d, s in enumerate(value.shape) if s is None]
    return v.ops.empty(value.shape, value.dtype, dynamic)  # type: ignore[arg-type]


def _inputs(v: "IRVisitor", arg: Any) -> list[Tensor]:
    if isinstance(arg, (list, tuple)):
        return [v.tensor(a) for a in arg]
    return [v.tensor(arg)]


def _combine(v: "IRVisitor", graph_id: int, lhs: list[Tensor], rhs: list[Tensor]) -> list[Tensor]:
    outs = v.run_graph(graph_id, lhs + rhs)
    return [v.ops.cast(o, l.dtype) if isinstance(o, Tensor) else o for o, l in zip(outs, lhs)]


@register_lowering(reduce_ops._reduce)
def lower_reduce(v: "IRVisitor", node: fx.Node) -> Any:
    graph_id, inputs_arg = int(node.args[0]), node.args[1]
    dim = node.args[2] if len(node.args) > 2 else None
    keep_dims = bool(node.args[3]) if len(node.args) > 3 else False
    inputs = _inputs(v, inputs_arg)
    if dim is None:
        raise HelionMLIRError("hl.reduce over all dimensions is not supported; give dim=")
    dim = int(dim) % inputs[0].rank
    n = v.ops.dim(inputs[0], dim)
    first = [_slice_at(v, x, dim, 0) for x in inputs]

    def step(iv: Any, acc: list[Any]) -> list[Any]:
        return _combine(v, graph_id, acc, [_slice_at(v, x, dim, iv) for x in inputs])

    result = first if n == 1 else v.ops.for_loop(1, n, 1, first, step, hint="reduce")
    if keep_dims:
        result = [expand_dims(v, r, [dim]) for r in result]  # type: ignore[arg-type]
    return tuple(result) if isinstance(inputs_arg, (list, tuple)) else result[0]


@register_lowering(scan_ops._associative_scan)
def lower_associative_scan(v: "IRVisitor", node: fx.Node) -> Any:
    graph_id, inputs_arg, dim = int(node.args[0]), node.args[1], int(node.args[2])
    reverse = bool(node.args[3]) if len(node.args) > 3 else False
    inputs = _inputs(v, inputs_arg)
    dim = dim % inputs[0].rank
    n = v.ops.dim(inputs[0], dim)
    last = n - 1 if isinstance(n, int) else v.ops.binary("arith.subi", n, v.ops.index(1))
    start = last if reverse else 0
    first = [_slice_at(v, x, dim, start) for x in inputs]
    outs = [_insert_at(v, _empty_like(v, x), f, dim, start) for x, f in zip(inputs, first)]

    def step(iv: Any, carried: list[Any]) -> list[Any]:
        position = iv
        if reverse:
            position = v.ops.binary("arith.subi", v.ops.index(last), iv)
        acc, results = carried[: len(inputs)], carried[len(inputs):]
        acc = _combine(v, graph_id, acc, [_slice_at(v, x, dim, position) for x in inputs])
        results = [_insert_at(v, r, a, dim, position) for r, a in zip(results, acc)]
        return acc + results

    if n != 1:
        outs = v.ops.for_loop(1, n, 1, first + outs, step, hint="scan")[len(inputs):]
    return tuple(outs) if isinstance(inputs_arg, (list, tuple)) else outs[0]
