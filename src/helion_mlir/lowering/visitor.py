"""Walk the FX graphs of a Helion kernel's device IR and emit MLIR node by node.

The :class:`IRVisitor` owns the state of one emission: the value of every visited node,
the current SSA value of every host tensor (stores replace it: the emitted code has
value semantics), the active tile of every block id, and what each symbol of the device
IR evaluates to. Each node is lowered by the rule registered for its target (see
:mod:`helion_mlir.lowering.registry`); ATen ops without a rule of their own go through
torch-mlir.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import sympy
import torch
from torch import fx

from ..errors import HelionMLIRError, UnsupportedNodeError
from ..importer.node_importer import TorchMLIRNodeImporter
from ..importer.normalize import nodes_in
from ..inliner.builder import MLIRBuilder
from ..mlir_types import element_type
from .deferred_inline import DeferredInliner
from .emitter import Emitter
from .helion_compat import original_args
from .host_values import is_module_level
from .kernel_model import WRITING_TARGET_NAMES, KernelModel, target_name
from .registry import LoweringRule, lookup_lowering
from .symbolic import emit_sympy, tile_scalar
from .values import HostRef, Scalar, Tensor, Tile

__all__ = ["IRVisitor"]

log = logging.getLogger(__name__)


def node_location(node: fx.Node) -> str | None:
    """The MLIR location body (``"file.py":12:8``) of a node's kernel source line."""
    return source_location_body(node.meta.get("location"))


def source_location_body(loc: Any) -> str | None:
    """``"file.py":line:col`` of a Helion SourceLocation (None when it has none)."""
    filename = getattr(loc, "filename", None)
    lineno = getattr(loc, "lineno", None)
    if not filename or not lineno:
        return None
    col = (getattr(loc, "colno", None) or 0) + 1
    escaped = str(filename).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}":{int(lineno)}:{int(col)}'


# Nodes lowered even when nothing uses their value: writes, control flow, and targets the
# tool rejects (an unused impure inline_asm must still be reported, not dropped).
_SIDE_EFFECT_TARGETS = WRITING_TARGET_NAMES | {
    "_for_loop", "_for_loop_step", "_while_loop", "_if", "device_print", "inline_asm_elementwise", "inline_triton",
}


def _has_side_effects(node: fx.Node) -> bool:
    return node.op == "call_function" and target_name(node) in _SIDE_EFFECT_TARGETS


# Symbols Helion creates for properties of the active tile (a grid index is its begin).
_GRID_ORIGINS = {
    "GridOrigin": "begin",
    "TileBeginOrigin": "begin",
    "TileEndOrigin": "end",
    "TileExtentOrigin": "extent",
    "TileIdOrigin": "id",
    "TileCountOrigin": "count",
}


class IRVisitor:
    """Lowers device-IR graphs of one kernel into an :class:`MLIRBuilder`."""

    def __init__(self, model: KernelModel, builder: MLIRBuilder, importer: TorchMLIRNodeImporter) -> None:
        self.model = model
        self.builder = builder
        self.ops = Emitter(builder)
        self.importer = importer
        self.deferred = DeferredInliner(importer, self.ops)
        self.values: dict[fx.Node, Any] = {}
        self.state: dict[str, Tensor] = {}
        self.tiles: dict[int, Tile] = {}
        self.symbols: dict[sympy.Symbol, Any] = {}
        self.runtime_block_sizes: dict[int, Scalar | int] = {}
        self.current_node: fx.Node | None = None
        # Rules for single nodes, set by a rule that owns them (rolled reductions); they
        # take precedence over the rule registered for the node's target.
        self.node_rules: dict[fx.Node, LoweringRule] = {}
        self._live_cache: dict[int, set[fx.Node]] = {}
        self._read_cache: dict[fx.Graph, set[fx.Node]] = {}

    # -- walking -----------------------------------------------------------------------------
    def run_graph(self, graph_id: int, inputs: Sequence[Any] = ()) -> list[Any]:
        """Emit one graph with its placeholders bound to ``inputs``; return its outputs."""
        graph = self.model.graph(graph_id).graph
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise HelionMLIRError(
                f"graph {graph_id} takes {len(placeholders)} inputs but was given {len(inputs)}"
            )
        for node in graph.nodes:  # a graph may be emitted more than once (e.g. combine functions)
            self.values.pop(node, None)
        for ph, value in zip(placeholders, inputs):
            self.values[ph] = value
        live = self._live_nodes(graph_id)
        saved_symbols = dict(self.symbols)
        try:
            for node in graph.nodes:
                if node.op == "call_function" and node in live:
                    self.visit(node)
                elif node.op == "output":
                    return self._outputs(node)
        finally:
            self.symbols = saved_symbols
        return []

    def _outputs(self, node: fx.Node) -> list[Any]:
        out = node.args[0]
        if out is None:
            return []
        if isinstance(out, (list, tuple)):
            return [self.value(a) for a in out]
        return [self.value(out)]

    def _live_nodes(self, graph_id: int) -> set[fx.Node]:
        """Nodes whose values matter: side effects, graph outputs, and what they use
        (through the arguments as traced, so Helion's internal helper nodes drop out)."""
        if graph_id in self._live_cache:
            return self._live_cache[graph_id]
        graph = self.model.graph(graph_id).graph
        todo = [n for n in graph.nodes if n.op == "output" or _has_side_effects(n)]
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
        if node in self.values:  # set by the control-flow rule that owns it (e.g. a _phi)
            return self.values[node]
        rule = self.node_rules.get(node) or lookup_lowering(node.target)
        if rule is None:
            raise UnsupportedNodeError(
                node,
                "helion_mlir has no lowering for this node target",
                hint="see `helion-mlir ops` for the supported targets; rewrite the kernel "
                "with supported operations or report the missing lowering",
            )
        with self.at(node):
            try:
                result = rule(self, node)
            except HelionMLIRError as err:
                if isinstance(err, UnsupportedNodeError) or getattr(err, "node_name", None):
                    raise
                raise UnsupportedNodeError(node, str(err)) from err
        self.values[node] = result
        self._record_symbol(node, result)
        return result

    @contextlib.contextmanager
    def at(self, node: fx.Node) -> Iterator[None]:
        """Attribute emitted ops to ``node``'s kernel source line."""
        previous_node, previous_loc = self.current_node, self.ops.location
        self.current_node = node
        self.ops.location = node_location(node) or previous_loc
        try:
            yield
        finally:
            self.current_node, self.ops.location = previous_node, previous_loc

    def _record_symbol(self, node: fx.Node, result: Any) -> None:
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            expr = val.node.expr
            if isinstance(expr, sympy.Symbol) and expr not in self.symbols:
                self.symbols[expr] = result

    # -- values --------------------------------------------------------------------------------
    def value(self, arg: Any) -> Any:
        """The lowered value of a node argument (nodes looked up, containers mapped, literals kept)."""
        if isinstance(arg, fx.Node):
            if arg not in self.values:
                raise HelionMLIRError(f"node '{arg.name}' is used before it was lowered")
            return self.values[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        return arg

    def tensor(self, arg: Any) -> Tensor:
        """The value of ``arg`` as a tensor (host tensors resolve to their current value)."""
        value = self.value(arg)
        if isinstance(value, HostRef):
            return self.state[value.name]
        if not isinstance(value, Tensor):
            raise HelionMLIRError(f"expected a tensor, got {value!r}")
        return value

    def scalar(self, arg: Any, mlir_type: str) -> Scalar:
        """The value of ``arg`` as a scalar SSA value of ``mlir_type``."""
        value = self.value(arg)
        if isinstance(value, Tensor):
            if value.rank and any(d != 1 for d in value.shape):
                raise HelionMLIRError(f"expected a scalar, got a tensor of shape {value.shape}")
            zeros = ", ".join(self.ops.index(0).ssa for _ in value.shape)
            ssa = self.ops.fresh("elt")
            self.ops.op(f"{ssa} = tensor.extract {value.ssa}[{zeros}] : {value.type}")
            value = Scalar(ssa, element_type(value.dtype))
        if isinstance(value, (bool, int, float, Scalar)):
            return self.ops.convert(value, mlir_type)
        raise HelionMLIRError(f"expected a scalar, got {value!r}")

    def static_int(self, arg: Any) -> int | None:
        """``arg`` as a Python int when it is known at compile time."""
        value = self.value(arg)
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return value
        return None

    def static_shape(self, meta: torch.Tensor) -> list[int | None]:
        """The shape a value described by ``meta`` has here: tile dims take their static tile size."""
        shape: list[int | None] = []
        for size in meta.shape:
            if isinstance(size, int):
                shape.append(size)
                continue
            block_id = self.model.block_id_of(size)
            if block_id is not None and block_id in self.tiles:
                shape.append(self.tiles[block_id].size)  # None: a dynamic whole dimension
            elif block_id is not None and block_id in self.model.block_sizes:
                shape.append(self.model.block_sizes[block_id])
            else:
                value = self.eval_symbolic(size)
                shape.append(value if isinstance(value, int) else None)
        return shape

    # -- symbols ---------------------------------------------------------------------------------
    def eval_symbolic(self, expr: Any) -> Any:
        """Evaluate an int, SymInt or sympy expression to an int or an ``index`` Scalar."""
        if isinstance(expr, bool):
            return int(expr)
        if isinstance(expr, int):
            return expr
        if isinstance(expr, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            expr = expr.node.expr
        if isinstance(expr, sympy.Integer):
            return int(expr)
        if isinstance(expr, sympy.Symbol):
            return self.resolve_symbol(expr)
        if expr in self.symbols:  # an expression bound as a whole (a bool argument is ``Eq(u0, 1)``)
            return self.symbols[expr]
        return emit_sympy(self, expr)

    def resolve_symbol(self, symbol: sympy.Symbol) -> Any:
        """What a device-IR symbol stands for: block size, tensor size, scalar argument..."""
        if symbol in self.symbols:
            return self.symbols[symbol]
        block_id = self.model.block_vars.get(symbol)
        if block_id is not None:  # a tile's size; a whole dimension's may be dynamic
            tile = self.tiles.get(block_id)
            if tile is not None:
                return tile.size if tile.size is not None else tile.extent
            return self.block_size(block_id)
        origin = self.model.symbol_origin(symbol)
        value = self._value_of_origin(origin, symbol)
        if type(origin).__name__ not in _GRID_ORIGINS:
            self.symbols[symbol] = value
        return value

    def _value_of_origin(self, origin: Any, symbol: sympy.Symbol) -> Any:
        kind = type(origin).__name__
        if kind == "TensorSizeOrigin":
            host = origin.value.name
            arg = self.model.arg(host)
            tensor = self.function_arg_values[host]
            return self.ops.dim(tensor, int(origin.key)) if arg.shape[int(origin.key)] is None else arg.shape[int(origin.key)]
        per_call = self.model.per_call_arg(symbol)
        if per_call is not None:
            return self.function_arg_values[per_call.name]
        if is_module_level(origin):
            return self.model.module_value(symbol)
        if kind in ("NameOrigin", "ArgumentOrigin") and origin.name in self.function_arg_values:
            return self.function_arg_values[origin.name]
        if kind == "BlockSizeOrigin":
            return self.block_size(origin.block_id)
        if kind in _GRID_ORIGINS:
            tile = self.tiles.get(origin.block_id)
            if tile is None:
                raise HelionMLIRError(f"symbol {symbol} refers to a tile that is not active here")
            return tile_scalar(self, tile, _GRID_ORIGINS[kind])
        if origin is None:
            raise HelionMLIRError(
                f"cannot resolve symbol {symbol}: Helion recorded no origin for it (Helion 1.5.1 loses "
                "the origin of an item of a module-level dict, tuple or list read inside an inner device "
                "loop); read the value into a host variable before the loop"
            )
        raise HelionMLIRError(f"cannot resolve symbol {symbol} (origin {origin!r})")

    def block_size(self, block_id: int) -> "Scalar | int":
        """A block's size: the config's int, or a runtime tile size (an ``index`` value,
        computed once at function entry by :meth:`bind_runtime_block_sizes`)."""
        if block_id in self.model.block_sizes:
            return self.model.block_sizes[block_id]
        if block_id not in self.runtime_block_sizes:
            raise HelionMLIRError(f"block {block_id} has no block size in this config")
        return self.runtime_block_sizes[block_id]

    def bind_runtime_block_sizes(self) -> None:
        """Evaluate every runtime block size from the function's arguments, where the
        values dominate every loop that steps by them."""
        for block_id, size in self.model.runtime_block_sizes.items():
            value = self.eval_symbolic(size)
            self.runtime_block_sizes[block_id] = value if isinstance(value, int) else self.ops.index(value)

    # set by generate.py when the function signature is emitted
    function_arg_values: dict[str, Any]
