"""Walk the FX graphs of a Helion kernel's device IR and lower them node by node.

The :class:`IRVisitor` walks a graph's live nodes in program order and keeps the value
each node lowered to. For every node it picks the rule (:class:`~.registry.RuleScopes`),
makes the node's :class:`~.context.RuleContext` (the emitter at the node's source line,
its operands, the kernel state it may read) and records what the rule returns. The
lowering state of the kernel besides node values (host tensors, tiles, symbols) is the
:class:`~.kernel_state.KernelState` the walker shares with its rules.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import sympy
import torch
from torch import fx

from ..errors import HelionMLIRError, UnsupportedNodeError
from ..importer.node_importer import TorchMLIRNodeImporter
from ..importer.normalize import graph_outputs, nodes_in
from ..inliner.builder import MLIRBuilder
from ..mlir_context import source_location_body
from ..output_type import OutputType
from .context import LoweringRule, RuleContext
from .deferred_inline import DeferredInliner
from .effects import effects_of
from .emitter import Emitter
from .helion_compat import original_args
from .kernel_model import KernelModel
from .kernel_state import KernelState
from .registry import RuleScopes

__all__ = ["IRVisitor"]

log = logging.getLogger(__name__)


def node_location(node: fx.Node) -> str | None:
    """The MLIR location body (``"file.py":12:8``) of a node's kernel source line."""
    return source_location_body(node.meta.get("location"))


def _lowered_when_unused(node: fx.Node) -> bool:
    return node.op == "call_function" and effects_of(node.target).lowered_when_unused


class IRVisitor:
    """Walks device-IR graphs of one kernel and lowers each live node with its rule."""

    def __init__(self, model: KernelModel, builder: MLIRBuilder, output_type: OutputType, *,
                 checked: bool = False, launch_checks: bool = False) -> None:
        self.model = model
        self.builder = builder
        self.emit = Emitter(builder, checked=checked, launch_checks=launch_checks)
        self.deferred = DeferredInliner(TorchMLIRNodeImporter(output_type), self.emit)
        self.state = KernelState(model, self.emit, output_type)
        self.rules = RuleScopes(lambda graph_id: type(self.model.graph(graph_id)))
        self.values: dict[fx.Node, Any] = {}
        self._live_cache: dict[int, set[fx.Node]] = {}
        self._read_cache: dict[fx.Graph, set[fx.Node]] = {}

    # -- walking -----------------------------------------------------------------------------
    def run_graph(self, graph_id: int, inputs: Sequence[Any] = (),
                  overrides: Mapping[fx.Node, LoweringRule] | None = None) -> list[Any]:
        """Lower one graph with its placeholders bound to ``inputs``; return its outputs.

        ``overrides`` replace the rules of some of its nodes while it is walked; symbols
        its nodes bind are forgotten after it.
        """
        graph = self.model.graph(graph_id).graph
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise HelionMLIRError(
                f"graph {graph_id} takes {len(placeholders)} inputs but was given {len(inputs)}"
            )
        for node in graph.nodes:  # a graph may be lowered more than once (e.g. combine functions)
            self.values.pop(node, None)
        for ph, value in zip(placeholders, inputs):
            self.values[ph] = value
        live = self._live_nodes(graph_id)
        with self.state.symbol_scope(), self.rules.scope(overrides):
            for node in graph.nodes:
                if node.op == "call_function" and node in live:
                    self.visit(node)
            return [self.value(out) for out in graph_outputs(graph)]

    def _live_nodes(self, graph_id: int) -> set[fx.Node]:
        """Nodes whose values matter: side effects, graph outputs, and what they use
        (through the arguments as traced, so Helion's internal helper nodes drop out)."""
        if graph_id in self._live_cache:
            return self._live_cache[graph_id]
        graph = self.model.graph(graph_id).graph
        todo = [graph.output_node()] + [n for n in graph.nodes if _lowered_when_unused(n)]
        live: set[fx.Node] = set()
        read: set[fx.Node] = set()
        while todo:
            node = todo.pop()
            if node in live:
                continue
            live.add(node)
            _target, args, kwargs = original_args(node) or (node.target, node.args, node.kwargs)
            inputs = nodes_in((args, kwargs))
            read.update(inputs)
            todo.extend(inputs)
        self._live_cache[graph_id] = live
        self._read_cache[graph] = read
        return live

    def is_read(self, node: fx.Node) -> bool:
        """Whether a node that matters reads ``node``'s value (a write's result may be unused)."""
        read = self._read_cache.get(node.graph)
        return read is None or node in read  # unknown graph: assume it is read

    def visit(self, node: fx.Node) -> Any:
        """Lower ``node`` (once) with its rule, at its kernel source line; its value.

        The rule gets the node's :class:`RuleContext`; what it returns becomes the node's
        value, and a host tensor it wrote gets its new value. A ``HelionMLIRError`` it
        raises without naming a node is reported for this node.
        """
        if node in self.values:
            return self.values[node]
        rule = self.rules.rule_for(node)
        if rule is None:
            raise UnsupportedNodeError(
                node,
                "helion_mlir has no lowering for this node target",
                hint="see `helion-mlir ops` for the supported targets; rewrite the kernel "
                "with supported operations or report the missing lowering",
            )
        with self._at(node):
            ctx = RuleContext(self, self.state, node, effects_of(node.target))
            try:
                result = rule(ctx, node)
            except HelionMLIRError as err:
                if isinstance(err, UnsupportedNodeError) or getattr(err, "node_name", None):
                    raise
                raise UnsupportedNodeError(node, str(err)) from err
            ctx.commit()
        self.values[node] = result
        self._record_symbol(node, result)
        return result

    @contextlib.contextmanager
    def _at(self, node: fx.Node) -> Iterator[None]:
        """Attribute emitted ops to ``node``'s kernel source line."""
        previous = self.emit.location
        self.emit.location = node_location(node) or previous
        try:
            yield
        finally:
            self.emit.location = previous

    def _record_symbol(self, node: fx.Node, result: Any) -> None:
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            expr = val.node.expr
            if isinstance(expr, sympy.Symbol) and expr not in self.state.symbols:
                self.state.symbols[expr] = result

    def value(self, arg: Any) -> Any:
        """The lowered value of a node argument (nodes looked up, containers mapped, literals kept)."""
        if isinstance(arg, fx.Node):
            if arg not in self.values:
                raise HelionMLIRError(f"node '{arg.name}' is used before it was lowered")
            return self.values[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        return arg
