"""Helion's padded whole dims: which lanes of a value lie past a specialized size.

A whole host dim of a fixed size that is not a power of two (``hl.specialize`` of 500
columns) is, in Helion's device IR, a reduction block whose tile-size symbol is the next
power of two (512) when the kernel builds values of that width
(``hl.zeros([tile, helion.next_power_of_2(n)])``): ``x[tile, :]`` is then a 512-lane value
whose last 12 lanes a load reads as 0 and a store skips (:mod:`.indexing`).

A whole-dim subscript of a device value of the real size (``hl.arange(n)[None, :]``) is
padded the same way (:func:`widened`). Lanes of a value built from such a load or subscript
past the real size are padding, which Helion's ``_mask_to`` (inserted before reductions and
dots) sets to the reduction's identity, as reference mode computes on the 500 lanes alone.
Lanes of values built only by factories (``hl.full([tile, 512], v)``) are all real: a dot
over them runs over all 512.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from helion._compiler.compile_environment import CompileEnvironment
from helion.language import _tracing_ops, memory_ops, view_ops
from torch import fx

from .emitter import Emitter
from .values import Tensor

# control-flow targets -> positions of their subgraph ids among the node's args
_SUBGRAPH_ARGS: dict[Any, tuple[int, ...]] = {
    _tracing_ops._for_loop: (0,),
    _tracing_ops._for_loop_step: (0,),
    _tracing_ops._while_loop: (0, 1),
    _tracing_ops._if: (1, 2),
}


def padded_extent(size: Any) -> int | None:
    """The real size of a value dim of ``size`` lanes that is Helion's padded whole dim, else None."""
    if not isinstance(size, int) or isinstance(size, bool):
        return None
    for info in CompileEnvironment.current().block_sizes:
        var, real = _number(info.var), _number(info.size)
        if info.reduction and var is not None and real is not None and var == size != real:
            return real
    return None


def _number(value: Any) -> int | None:
    """An int, or a SymInt whose expression is a number; never compares a symbol (comparing a
    tile's SymInt with a number guards on it: Helion then specializes the tile to it)."""
    if type(value) is int:
        return value
    expr = getattr(getattr(value, "node", None), "expr", None) if isinstance(value, torch.SymInt) else None
    return int(expr) if getattr(expr, "is_Integer", False) else None


def is_padded_whole_dim(size: Any, dim_size: int) -> bool:
    """Whether the value dim ``size`` of a whole host dim of ``dim_size`` elements is padded."""
    return padded_extent(size) == dim_size


def padded_dims(graphs: Sequence[Any], node: fx.Node) -> list[tuple[int, int]]:
    """(dim, real size) for each padded dim of ``node``'s value whose lanes past the real
    size are padding: the value derives from a load of a padded whole dim."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return []
    dims = [(dim, extent) for dim, size in enumerate(val.shape) if (extent := padded_extent(size)) is not None]
    if not dims or not _reads_padded_load(graphs, node):
        return []
    return dims


def _reads_padded_load(graphs: Sequence[Any], start: fx.Node) -> bool:
    """Whether ``start``'s value is computed from a load of a padded whole dim (through
    loop and branch bodies, and from a subgraph's placeholders to the values passed in)."""
    seen: set[fx.Node] = set()
    pending = [start]
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op == "call_function" and node.target in (memory_ops.load, view_ops.subscript) and _pads(node):
            return True
        pending.extend(_sources(graphs, node))
    return False


def _pads(node: fx.Node) -> bool:
    """Whether a load or subscript takes a whole dim of a padded dim's real size (``:``) into
    a value with that padded dim."""
    val, source = node.meta.get("val"), node.args[0]
    source_val = source.meta.get("val") if isinstance(source, fx.Node) else None
    if not isinstance(val, torch.Tensor) or not isinstance(source_val, torch.Tensor):
        return False
    real = {padded_extent(size) for size in val.shape} - {None}
    axes = [entry for entry in node.args[1] if entry is not None]  # one per dim of the source
    axes += [slice(None)] * (source_val.dim() - len(axes))  # dims left out are whole
    return any(entry == slice(None) and _number(size) in real for entry, size in zip(axes, source_val.shape))


def widened(emit: Emitter, value: Tensor, meta: Any) -> Tensor:
    """``value`` with each dim of the real size of a padded dim of ``meta`` widened to the
    padded size, the new lanes 0 (as a load reads them)."""
    if not isinstance(meta, torch.Tensor) or meta.dim() != value.rank:
        return value
    shape = tuple(want if isinstance(have, int) and is_padded_whole_dim(want, have) else have
                  for have, want in zip(value.shape, meta.shape))
    if shape == value.shape:
        return value
    dynamic = [emit.index(emit.dim(value, axis)) for axis, size in enumerate(shape) if size is None]
    base = emit.fill(shape, value.dtype, 0, dynamic)
    sizes = ", ".join(str(size) if size is not None else emit.index(emit.dim(value, axis)).ssa
                      for axis, size in enumerate(value.shape))
    zeros, ones = ", ".join("0" for _ in shape), ", ".join("1" for _ in shape)
    result = Tensor(emit.fresh("widened"), shape, value.dtype)
    emit.op(f"{result.ssa} = tensor.insert_slice {value.ssa} into {base.ssa}[{zeros}] [{sizes}] [{ones}]"
            f" : {value.type} into {base.type}")
    return result


def _sources(graphs: Sequence[Any], node: fx.Node) -> list[fx.Node]:
    """The nodes ``node``'s value is computed from."""
    if node.op == "placeholder":
        info = next((g for g in graphs if g.graph is node.graph), None)
        if info is None or not hasattr(info, "placeholder_to_outer_arg"):
            return []
        try:
            return [info.placeholder_to_outer_arg(node)]
        except (KeyError, ValueError):
            return []
    found = list(node.all_input_nodes)
    for position in _SUBGRAPH_ARGS.get(node.target, ()):
        graph_id = node.args[position]
        if isinstance(graph_id, int) and 0 <= graph_id < len(graphs):
            found += [n for out in graphs[graph_id].graph.find_nodes(op="output") for n in out.all_input_nodes]
    return found
