"""The lowering state of one kernel, besides the values of its nodes.

While the walker emits a kernel's function, :class:`KernelState` holds what the emitted
code has established so far: the current SSA value of every host tensor (a store
replaces it: the emitted code has value semantics), the active tile of every block id,
what each symbol of the device IR evaluates to, and the values of the function's
arguments. Rules read it through their :class:`~helion_mlir.lowering.context.RuleContext`;
what they change in it goes through the few methods here that say how
(:meth:`KernelState.carried`, :meth:`KernelState.tile_loops`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import sympy
import torch
from helion._compiler import variable_origin as vo

from ..errors import HelionMLIRError
from ..output_type import OutputType
from .emitter import Emitter
from .host_values import is_module_level
from .kernel_model import KernelModel
from .kernel_parts import ArgKind
from .loops import emit_tile_loops
from .symbolic import TileProperty, emit_sympy, tile_scalar
from .values import JaggedEnds, Scalar, Tensor, Tile, Value

__all__ = ["CarriedTensors", "KernelState"]

# Symbols Helion creates for properties of the active tile (a grid index is its begin).
_TILE_ORIGINS: dict[type, TileProperty] = {
    vo.GridOrigin: TileProperty.BEGIN,
    vo.TileBeginOrigin: TileProperty.BEGIN,
    vo.TileEndOrigin: TileProperty.END,
    vo.TileExtentOrigin: TileProperty.EXTENT,
    vo.TileIdOrigin: TileProperty.ID,
    vo.TileCountOrigin: TileProperty.COUNT,
}


class CarriedTensors:
    """The host tensors a loop or branch carries: collected before it, bound inside it and
    after it. Loops and branches carry them first, then their own values."""

    def __init__(self, host_tensors: dict[str, Tensor], names: Sequence[str]) -> None:
        self._host_tensors = host_tensors
        self.names = tuple(names)

    def current(self) -> list[Value]:
        """The tensors' current values, in order."""
        return [self._host_tensors[name] for name in self.names]

    def bind(self, values: Sequence[Any]) -> list[Any]:
        """Make the leading ``values`` the tensors' current values; return the rest."""
        for name, value in zip(self.names, values):
            self._host_tensors[name] = value
        return list(values[len(self.names):])


class KernelState:
    """Host tensors, tiles, symbols and arguments of one kernel's emission, and the output
    type its ATen ops are lowered to."""

    def __init__(self, model: KernelModel, emit: Emitter, output_type: OutputType) -> None:
        self.model = model
        self.emit = emit
        self.output_type = output_type
        self.host_tensors: dict[str, Tensor] = {}
        self.tiles: dict[int, Tile] = {}
        self.symbols: dict[sympy.Symbol, Any] = {}
        self.arguments: dict[str, Value] = {}  # the function's arguments by host name
        self.runtime_block_sizes: dict[int, Scalar | int] = {}

    # -- host tensors --------------------------------------------------------------------
    def host_tensor(self, name: str) -> Tensor:
        if name not in self.host_tensors:
            raise HelionMLIRError(f"host tensor '{name}' is not an argument of the emitted function")
        return self.host_tensors[name]

    def write(self, name: str, value: Tensor) -> None:
        """``value`` is the host tensor's value from now on."""
        self.host_tensors[name] = value

    def carried(self, *graph_ids: int) -> CarriedTensors:
        """The host tensors the graphs write (first-write order, each once)."""
        names = dict.fromkeys(name for gid in graph_ids for name in self.model.writes.get(gid, []))
        return CarriedTensors(self.host_tensors, list(names))

    # -- tiles ---------------------------------------------------------------------------
    def tile_of(self, size: Any) -> Tile | None:
        """The active tile of the block whose tile-size symbol ``size`` is, if any."""
        block_id = self.model.block_id_of(size)
        return self.tiles.get(block_id) if block_id is not None else None

    def tile_loops(self, block_ids: Sequence[int], begins: Sequence[Any], ends: Sequence[Any],
                   steps: Sequence[int | None], carried: list[Value],
                   body: Callable[[list[Value]], Sequence[Value]],
                   ranges: Sequence[tuple[Any, Any] | None] | None = None,
                   jagged: Mapping[int, JaggedEnds] | None = None) -> list[Value]:
        """A nest of ``scf.for`` over the tiles of ``block_ids`` (see :func:`emit_tile_loops`)."""
        return emit_tile_loops(self, block_ids, begins, ends, steps, carried, body, ranges, jagged)

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

    # -- the function's entry ---------------------------------------------------------------
    def bind_arguments(self, values: dict[str, Value]) -> None:
        """The function's arguments (tensor arguments are the host tensors' first values);
        every dynamic size of a tensor argument is read here, once, and every later version
        of the tensor carries it, so nothing reads the size of a loop-carried value (which
        compilers such as IREE cannot resolve). Size and scalar symbols of the signature get
        their values here too, so that uses inside loops refer to values that dominate them."""
        for arg in self.model.args:
            value = values[arg.name]
            if arg.kind is ArgKind.TENSOR:
                assert isinstance(value, Tensor)
                sizes = tuple(s if s is not None else self.emit.dim(value, axis) for axis, s in enumerate(value.shape))
                value = dataclasses.replace(value, sizes=sizes)
                self.host_tensors[arg.name] = value
            self.arguments[arg.name] = value
        for arg in self.model.args:
            value = self.arguments[arg.name]
            if arg.kind is ArgKind.SCALAR:
                if isinstance(arg.fake, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                    self.symbols.setdefault(arg.fake.node.expr, value)  # also ``Eq(u0, 1)`` of a bool
                elif isinstance(arg.fake, sympy.Basic):  # a per-call host value (its symbol or bool expression)
                    self.symbols.setdefault(arg.fake, value)
                continue
            assert isinstance(value, Tensor) and value.sizes is not None
            for axis, size in enumerate(arg.fake.shape):  # a size symbol, or an expression (``n // 2 + 1``)
                if isinstance(size, torch.SymInt) and size.node.expr.free_symbols and size.node.expr not in self.symbols:
                    self.symbols[size.node.expr] = value.sizes[axis]
        self._bind_runtime_block_sizes()
        for block_id, numel in self.model.persistent_reductions.items():
            extent = self.eval_symbolic(numel)
            extent = extent if isinstance(extent, int) else self.emit.index(extent)
            self.tiles[block_id] = Tile(block_id, 0, extent if isinstance(extent, int) else None, extent, 0, extent,
                                        range_exprs=(0, numel))

    def _bind_runtime_block_sizes(self) -> None:
        """Evaluate every runtime block size from the function's arguments, where the
        values dominate every loop that steps by them."""
        for block_id, size in self.model.runtime_block_sizes.items():
            value = self.eval_symbolic(size)
            self.runtime_block_sizes[block_id] = value if isinstance(value, int) else self.emit.index(value)

    # -- symbols -------------------------------------------------------------------------
    @contextlib.contextmanager
    def symbol_scope(self) -> Iterator[None]:
        """Symbols bound inside (by the nodes of a graph) are forgotten on leaving."""
        saved = dict(self.symbols)
        try:
            yield
        finally:
            self.symbols = saved

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
        return emit_sympy(self.emit, self.resolve_symbol, expr)

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
        tuned = self.model.config_value(symbol)
        if tuned is not None:
            return tuned
        origin = self.model.symbol_origin(symbol)
        value = self._value_of_origin(origin, symbol)
        if type(origin) not in _TILE_ORIGINS:
            self.symbols[symbol] = value
        return value

    def _value_of_origin(self, origin: Any, symbol: sympy.Symbol) -> Any:
        if isinstance(origin, vo.TensorSizeOrigin):
            host = origin.value.name
            axis = int(origin.key)
            tensor = self.arguments[host]
            assert isinstance(tensor, Tensor)
            return self.emit.dim(tensor, axis) if self.model.arg(host).shape[axis] is None else self.model.arg(host).shape[axis]
        per_call = self.model.per_call_arg(symbol)
        if per_call is not None:
            return self.arguments[per_call.name]
        if is_module_level(origin):
            return self.model.module_value(symbol)
        if isinstance(origin, (vo.NameOrigin, vo.ArgumentOrigin)) and origin.name in self.arguments:
            return self.arguments[origin.name]
        if isinstance(origin, vo.BlockSizeOrigin):
            return self.block_size(origin.block_id)
        if type(origin) in _TILE_ORIGINS:
            tile = self.tiles.get(origin.block_id)
            if tile is None:
                raise HelionMLIRError(f"symbol {symbol} refers to a tile that is not active here")
            return tile_scalar(self.emit, tile, _TILE_ORIGINS[type(origin)])
        if origin is None:
            raise HelionMLIRError(
                f"cannot resolve symbol {symbol}: Helion recorded no origin for it, so the device code "
                "cannot tell which host value it stands for. Compute the value into a host variable "
                "before the tile loops and use that variable (one known cause: Helion 1.5.1 loses the "
                "origin of an item of a module-level dict, tuple or list read inside an inner device loop)"
            )
        raise HelionMLIRError(f"cannot resolve symbol {symbol} (origin {origin!r})")

    def block_size(self, block_id: int) -> "Scalar | int":
        """A block's size: the config's int, or a runtime tile size (an ``index`` value,
        computed once at function entry)."""
        if block_id in self.model.block_sizes:
            return self.model.block_sizes[block_id]
        if block_id not in self.runtime_block_sizes:
            raise HelionMLIRError(f"block {block_id} has no block size in this config")
        return self.runtime_block_sizes[block_id]
