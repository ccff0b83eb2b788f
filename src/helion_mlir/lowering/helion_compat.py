"""Keep the arguments of device-IR nodes that Helion's lowering pass discards.

When Helion binds a kernel, its inductor-lowering pass rewrites ATen nodes in place for
its own code generators: it masks reduction inputs (``_mask_to``), which we keep, but it
also replaces duplicate or unread inputs with ``None`` (``x * x`` turns into
``mul(x, None)``) and moves inputs of multi-buffer lowerings into ``_extra_args`` /
``_extra_deps`` kwargs that refer to its internal buffers. The node then no longer says
what it computes. Importing ``helion_mlir`` wraps that pass so every node records its
arguments as traced; :func:`original_args` gives the arguments after the pass with the
discarded inputs put back and the internal kwargs dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from helion._compiler import inductor_lowering
from torch import fx

from . import helion_warnings, tensor_reads

__all__ = ["install", "original_args", "ORIGINAL_ARGS_KEY"]

ORIGINAL_ARGS_KEY = "helion_mlir_original_args"
_INSTALLED = False


def install() -> None:
    """Wrap Helion's per-node lowering preparation once per process, record the values
    host code reads from tensor data (:mod:`.tensor_reads`), and report Helion's warnings
    once per kernel (:mod:`.helion_warnings`)."""
    global _INSTALLED
    if _INSTALLED:
        return
    tensor_reads.install()
    helion_warnings.install()
    prepare = inductor_lowering.prepare_node_lowering

    @functools.wraps(prepare)
    def recording_prepare(graph_lowering: Any, node: fx.Node) -> Any:
        node.meta.setdefault(ORIGINAL_ARGS_KEY, (node.target, node.args, dict(node.kwargs)))
        return prepare(graph_lowering, node)

    inductor_lowering.prepare_node_lowering = recording_prepare
    _INSTALLED = True


def original_args(node: fx.Node) -> tuple[Any, tuple[Any, ...], dict[str, Any]] | None:
    """(target, args, kwargs) of ``node`` as traced, or None if Helion bound it before install.

    Helion hands out copies of its graphs (``build_codegen_graphs``) whose nodes share
    the recorded metadata, so argument nodes are looked up by name in ``node``'s graph.
    """
    recorded = node.meta.get(ORIGINAL_ARGS_KEY)
    if recorded is None:
        return None
    _target, traced_args, traced_kwargs = recorded
    graph = node.graph
    by_name: dict[str, fx.Node] = {}

    def local(a: Any) -> Any:
        if not isinstance(a, fx.Node) or a.graph is graph:
            return a
        if not by_name:
            by_name.update((n.name, n) for n in graph.nodes)
        return by_name.get(a.name)

    args = tuple(_fill(now, then, local) for now, then in zip(node.args, traced_args))
    args += tuple(fx.node.map_aggregate(tuple(traced_args[len(args):]), local))
    kwargs = {k: _fill(v, traced_kwargs.get(k), local) for k, v in node.kwargs.items() if k not in _INTERNAL_KWARGS}
    return node.target, args, kwargs


def _fill(now: Any, then: Any, local: Callable[[Any], Any]) -> Any:
    """``now`` with every ``None`` the pass put in place of a traced node restored.

    A module-level function rather than a recursive closure: a closure that calls itself
    is a reference cycle, garbage only a full collection frees.
    """
    if now is None:
        return fx.node.map_aggregate(then, local)
    if isinstance(now, (list, tuple)) and isinstance(then, (list, tuple)) and len(now) == len(then):
        return type(now)(_fill(a, b, local) for a, b in zip(now, then))
    return now


_INTERNAL_KWARGS = ("_extra_args", "_extra_deps")

