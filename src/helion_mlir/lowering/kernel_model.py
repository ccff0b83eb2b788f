"""What the lowering needs to know about a bound Helion kernel, gathered in one place.

A :class:`KernelModel` answers: which graphs to lower (reduction rolling applied for the
chosen config), what the emitted function's arguments and results are (the ABI in
``docs/abi.md``), the static size of every block (tile) dimension, the range of every
top-level tile loop, what each symbol of the device IR stands for, and which host
tensors each graph writes (the values a loop or branch must carry).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import weakref
from collections.abc import Iterator
from typing import Any

import helion
import sympy
import torch
from helion._compiler import variable_origin as vo
from helion._compiler.compile_environment import FixedBlockSizeSource, ReductionLoopBlockSizeSource
from helion.language import _tracing_ops, random_ops
from torch import fx
from torch.utils._sympy.symbol import SymT, symbol_is_type

from ..errors import HelionMLIRError
from ..caches import LRUCache
from ..mlir_types import scalar_type_of_python, tensor_type
from .host_values import (
    describe_origin,
    evaluate_origin,
    imported_modules,
    is_module_level,
    is_per_call,
    origin_arg_name,
)
from .effects import called_graph_ids, effects_of
from .kernel_parts import ArgKind, FunctionArg, LaunchCheck, LoopDim, RootLoop, TensorBound, static_shape
from .rolled_analysis import rolled_block_ids, unsupported_rolled_reduction
from .tensor_reads import refuse_lost_reads

__all__ = ["RNG_SEED_BUFFER", "RNG_SEED_HOST_NAME", "KernelModel", "host_tensor_name"]

log = logging.getLogger(__name__)

#: The argument holding a launch's RNG seeds (see :meth:`KernelModel.rng_seed_count`), named
#: as Helion's device function names it, and the host code's variable for it.
RNG_SEED_BUFFER = "rng_seed_buffer"
RNG_SEED_HOST_NAME = "_rng_seed_buffer"

# Per kernel (its device IR), the graphs built for its most recently used configs: emissions
# of one config share them (compile_kernel's model and generate_mlir's), while an autotuner
# that visits hundreds of configs does not keep a copy of the graphs for each.
CODEGEN_GRAPH_CONFIGS = 4
_CODEGEN_GRAPHS: "weakref.WeakKeyDictionary[Any, LRUCache[tuple[list[Any], set[int]]]]" = weakref.WeakKeyDictionary()


class KernelModel:
    """Facts about one bound kernel under one config.

    ``config`` is what :func:`~.kernel_config.resolve_config` returns: an entry point
    resolves its config once, builds one model and hands it down (argument checks, host
    code and emission share it)."""

    def __init__(self, bound: Any, config: helion.Config) -> None:
        self.bound = bound
        self.config = config
        self.host_function = bound.host_function
        if self.host_function is None:
            raise HelionMLIRError(
                "this bound kernel has no device IR (was it created with ref_mode=EAGER?); "
                "bind a kernel created without ref_mode"
            )
        self.device_ir = self.host_function.device_ir
        self.name: str = self.host_function.name
        # A symbol names the first block that owns it: Helion also creates reduction blocks
        # over an existing tile dim, which reuse that tile's symbol.
        self.block_vars: dict[sympy.Symbol, int] = {}
        for info in bound.env.block_sizes:
            if isinstance(info.var, torch.SymInt):
                _refuse_specialized_tile(info)
                self.block_vars.setdefault(info.var._sympy_(), info.block_id)
        self.block_numel: dict[int, Any] = {info.block_id: info.size for info in bound.env.block_sizes}
        with self.helion_env():
            self.graphs, self.rolled_blocks = self._codegen_graphs()
            self.module_values: dict[sympy.Expr, Any] = {}
            self.block_sizes: dict[int, int] = {}
            self.runtime_block_sizes: dict[int, sympy.Expr] = {}
            for info in bound.env.block_sizes:
                self._add_block_size(info.block_id, info.from_config(self.config))
            self.root_loops = self._root_loops()
        with self.helion_env():
            self.persistent_reductions = self._persistent_reductions()
        self.reachable_graph_ids = self._reachable_graphs()
        used = self._used_host_tensors()
        writes = self._writes_per_graph()
        #: Host tensor names that stand for another one: views of it with its very layout.
        self.same_tensor = self._identical_views(used, {name for names in writes.values() for name in names})
        self.writes = {gid: list(dict.fromkeys(self.host_name(n) for n in names)) for gid, names in writes.items()}
        self.per_call_args: dict[sympy.Symbol, FunctionArg] = {}
        #: Relations between host values the emitted code assumes (filled while it is emitted).
        self.launch_checks: list[LaunchCheck] = []
        #: Dynamic dims of tensor arguments that were 1 when a tile indexing them was emitted
        #: (it broadcasts their one element), keyed by (argument, dim), with the extent of the
        #: tile's loop (None if unknown): a call needs them to be 1 unless that is at most 1.
        self.unit_dims: dict[tuple[str, int], sympy.Expr | None] = {}
        self.args, self.results = self._function_signature(
            {name: fake for name, fake in used.items() if name not in self.same_tensor})
        refuse_lost_reads(bound.env, {a.name: a.fake for a in self.args if a.kind is ArgKind.TENSOR}, bound.kernel.fn)

    def _add_block_size(self, block_id: int, size: Any) -> None:
        """A config's block size is an int, or a host value: a module-level one is read now
        (the kernel is specialized on it), a per-call one is a runtime tile size."""
        if isinstance(size, int):
            self.block_sizes[block_id] = int(size)  # Helion's normalization lets True stand for 1
            return
        expr = size._sympy_() if isinstance(size, torch.SymInt) else sympy.sympify(size)
        if isinstance(expr, sympy.Integer):
            self.block_sizes[block_id] = int(expr)
        elif isinstance(expr, sympy.Symbol) and is_module_level(self.symbol_origin(expr)):
            self.block_sizes[block_id] = int(self.module_value(expr))
        else:
            self.runtime_block_sizes[block_id] = expr

    def module_value(self, symbol: sympy.Expr) -> Any:
        """The value of a module-level host value, read once per kernel model."""
        if symbol not in self.module_values:
            origin = self.symbol_origin(symbol)
            value = evaluate_origin(origin, {}, self.bound.kernel.fn, imported_modules(self.bound))
            if not isinstance(value, (bool, int, float)):
                raise HelionMLIRError(f"{describe_origin(origin)} is a {type(value).__name__}, not a number")
            self.module_values[symbol] = value
        return self.module_values[symbol]

    # -- Helion environment -------------------------------------------------------------
    @contextlib.contextmanager
    def helion_env(self) -> Iterator[None]:
        """Helion's compile environment, which symbol and config queries need."""
        with self.bound.env, self.host_function:
            yield

    # -- graphs -------------------------------------------------------------------------
    def graph(self, graph_id: int) -> Any:
        return self.graphs[graph_id]

    def _codegen_graphs(self) -> tuple[list[Any], set[int]]:
        """The graphs to lower and the rolled reduction block ids, shared by the emissions
        of this kernel under this config while it is among the most recent
        (:data:`CODEGEN_GRAPH_CONFIGS`; Helion copies all graphs to build them, and the
        lowering only reads them)."""
        per_config = _CODEGEN_GRAPHS.get(self.device_ir)
        if per_config is None:
            per_config = _CODEGEN_GRAPHS.setdefault(self.device_ir, LRUCache(CODEGEN_GRAPH_CONFIGS))
        found = per_config.get(self.config)
        if found is None:
            found = self._build_codegen_graphs()
            per_config.put(self.config, found)
        return found

    def _build_codegen_graphs(self) -> tuple[list[Any], set[int]]:
        """The graphs to lower and the rolled reduction block ids.

        ``config.reduction_loops`` rolls reductions into loops over chunks; a kernel whose
        rolled graphs hold a reduction kind the lowering cannot combine across chunks is
        lowered in persistent form instead (same numbers, whole reduction dimensions).
        """
        graphs = self.device_ir.build_codegen_graphs(self.config, roll_reductions=True)
        blocks = rolled_block_ids(graphs)
        if not blocks:
            return graphs, blocks
        reason = unsupported_rolled_reduction(graphs, self.block_id_of, self.block_numel)
        if reason is None:
            return graphs, blocks
        log.warning("kernel %s: reduction_loops lowered in persistent form: %s", self.name, reason)
        return self.device_ir.build_codegen_graphs(self.config, roll_reductions=False), set()

    def _reachable_graphs(self) -> list[int]:
        """Graph ids in program order: roots by phase, each graph before the graphs it calls
        (so "first use" orders in the ABI follow the kernel's source)."""
        seen: list[int] = []
        for root in self.root_loops:
            self._visit_graph(root.graph_id, seen)
        return seen

    def _visit_graph(self, gid: int, seen: list[int]) -> None:
        # A method, not a recursive closure: those are reference cycles left to the collector.
        if gid in seen:
            return
        seen.append(gid)
        for node in self.graphs[gid].graph.nodes:
            for callee in called_graph_ids(node):
                self._visit_graph(callee, seen)

    def _writes_per_graph(self) -> dict[int, list[str]]:
        """Host tensor names written by each graph, including graphs it calls (first-write order)."""
        memo: dict[int, list[str]] = {}
        return {gid: self._writes_of(gid, memo) for gid in self.reachable_graph_ids}

    def _writes_of(self, gid: int, memo: dict[int, list[str]]) -> list[str]:
        if gid in memo:
            return memo[gid]
        memo[gid] = []
        found: list[str] = []
        for node in self.graphs[gid].graph.nodes:
            if node.op != "call_function":
                continue
            writes = effects_of(node.target).writes
            if writes is not None and len(node.args) > writes:
                name = host_tensor_name(node.args[writes])
                if name is not None and name not in found:
                    found.append(name)
            for sub in called_graph_ids(node):
                found.extend(n for n in self._writes_of(sub, memo) if n not in found)
        memo[gid] = found
        return found

    # -- host tensors --------------------------------------------------------------------
    def _used_host_tensors(self) -> dict[str, Any]:
        """The host tensors the device code names, in order of first use, with their fakes."""
        used: dict[str, Any] = {}
        for gid in self.reachable_graph_ids:
            for node in self.graphs[gid].graph.nodes:
                name = host_tensor_name(node)
                if name is not None and name not in used:
                    used[name] = node.meta["val"]
        for bound in (v for root in self.root_loops for d in root.dims for v in (d.begin, d.end)):
            if isinstance(bound, TensorBound) and bound.name not in used:
                used[bound.name] = bound.fake
        return used

    def _identical_views(self, used: dict[str, Any], written: set[str]) -> dict[str, str]:
        """Host tensors the device code names that share memory with one it writes
        (``alias = x.view(m, n)``): each is the written tensor's value under another name
        when its layout is the same, so a read through it sees the stores; another layout
        is refused, since the function's tensors are values, not memory."""
        params = self.host_function.params.arguments
        groups: dict[int, list[str]] = {}
        for name, fake in used.items():
            if isinstance(fake, torch.Tensor):
                groups.setdefault(fake.untyped_storage()._cdata, []).append(name)
        same: dict[str, str] = {}
        for names in groups.values():
            if len(names) < 2 or not written & set(names):
                continue
            first = next((n for n in names if n in params), names[0])
            for name in names:
                if name == first:
                    continue
                if _layout(used[name]) != _layout(used[first]):
                    raise HelionMLIRError(
                        f"kernel '{self.name}': host tensors '{first}' and '{name}' share memory with different "
                        f"layouts ({_describe_layout(used[first])} and {_describe_layout(used[name])}) and the "
                        f"device code writes {' and '.join(repr(n) for n in names if n in written)}; the emitted "
                        "function holds tensors as values, so a store through one would not be seen through the "
                        "other: index one of them in the device code"
                    )
                same[name] = first
        return same

    def host_name(self, name: str) -> str:
        """The argument a host tensor name stands for (itself, or the tensor it is an
        identical view of)."""
        return self.same_tensor.get(name, name)

    # -- the function signature ----------------------------------------------------------
    def _function_signature(self, used: dict[str, Any]) -> tuple[list[FunctionArg], list[str]]:
        params = self.host_function.params.arguments
        written = {name for names in self.writes.values() for name in names}
        args: list[FunctionArg] = []
        for pname, value in params.items():
            if isinstance(value, torch.Tensor):
                # The host code may rebind a parameter to a view of it (``x = x[:, :-1]``) before
                # the loops: the device code reads the view, and the host code passes it.
                value = used.get(pname, value)
                args.append(FunctionArg(pname, ArgKind.TENSOR, tensor_type(static_shape(value), value.dtype),
                                        value, written=pname in written))
        for pname, value in params.items():
            if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)):
                args.append(FunctionArg(pname, ArgKind.SCALAR, _scalar_mlir_type(value), value))
        tensors = [v for v in params.values() if isinstance(v, torch.Tensor)] + list(used.values())
        args += self._per_call_scalars({a.name for a in args}, tensors)
        param_names = set(params)
        tensor_origins = self.host_function.tensor_to_origin
        for hname, fake in used.items():
            if hname not in param_names:
                origin = tensor_origins.get(fake)
                # A host tensor from a closure or an attribute is named by its host expression.
                ssa_name = "" if hname.isidentifier() or origin is None else origin_arg_name(origin)
                args.append(FunctionArg(hname, ArgKind.TENSOR, tensor_type(static_shape(fake), fake.dtype), fake,
                                        written=hname in written, is_kernel_param=False, origin=origin,
                                        ssa_name=ssa_name))
        if self.rng_seed_count:
            args.append(self._rng_seed_arg({a.name for a in args}))
        results = [a.name for a in args if a.kind is ArgKind.TENSOR and a.written]
        return args, results

    @functools.cached_property
    def rng_seed_count(self) -> int:
        """How many seeds the device code reads (``_rng_seed(i)`` of ``torch.rand_like``,
        ``torch.randn`` and the like inside the loops): Helion's host code draws that many
        from torch's generator at each call (``inductor_prims.seeds``), as its reference mode
        does, and passes them in one int64 tensor."""
        slots = [int(node.args[0]) for gid in self.reachable_graph_ids for node in self.graphs[gid].graph.nodes
                 if node.op == "call_function" and node.target is random_ops._rng_seed]
        return max(slots) + 1 if slots else 0

    def _rng_seed_arg(self, taken: set[str]) -> FunctionArg:
        fake = torch.empty(self.rng_seed_count, dtype=torch.int64, device="meta")
        name = RNG_SEED_BUFFER
        while name in taken:  # Helion's device function renames it likewise
            name += "_"
        return FunctionArg(name, ArgKind.TENSOR, tensor_type(static_shape(fake), fake.dtype), fake,
                           is_kernel_param=False, aliases=(RNG_SEED_HOST_NAME,))

    @property
    def rng_seed_buffer(self) -> str | None:
        """The name of the seed buffer argument, if the device code reads seeds."""
        return next((a.name for a in self.args if RNG_SEED_HOST_NAME in a.aliases), None)

    def _per_call_scalars(self, taken: set[str], tensors: list[torch.Tensor]) -> list[FunctionArg]:
        """Scalar arguments for the per-call host values the device code reads (host locals,
        items, attributes and closure cells of parameters, values read from tensor data; see
        :mod:`.host_values`), in order of first use, runtime block sizes included. A value that
        is a size of a tensor argument is read from it instead (``tensor.dim``). Module-level
        values are read here."""
        params = self.host_function.params.arguments
        sizes = {d.node.expr for t in tensors for d in t.shape if isinstance(d, torch.SymInt)}
        found: list[FunctionArg] = []
        for expr, kind in self._used_host_exprs().items():
            origin = self.symbol_origin(expr)
            if is_module_level(origin):
                self.module_value(expr)  # a compiled kernel checks at each call that it is unchanged
            if expr in sizes or not is_per_call(origin, params) or self.config_value(expr) is not None:
                continue  # a size read from its tensor, or a constant: module-level, or the config's
            name = origin_arg_name(origin)
            while name in taken:
                name += "_"
            taken.add(name)
            aliases = tuple(f"_BLOCK_SIZE_{bid}" for bid, size in self.runtime_block_sizes.items() if size == expr)
            arg = FunctionArg(name, ArgKind.SCALAR, scalar_type_of_python(kind()), expr, is_kernel_param=False,
                              origin=origin, aliases=aliases)
            self.per_call_args[expr] = arg
            found.append(arg)
        return found

    def _used_host_exprs(self) -> dict[sympy.Expr, type]:
        """Every host value the device code reads, in order of first use, with the Python type
        of its value: the symbols (or whole expressions, see :meth:`_use_expr`; a bool is
        ``Eq(u0, 1)``) in the values of the reachable graphs, in the ranges of their top-level
        loops and in their runtime block sizes."""
        found: dict[sympy.Expr, type] = {}
        loop_blocks = [d.block_id for root in self.root_loops for d in root.dims]
        for gid in self.reachable_graph_ids:
            loop_blocks += list(getattr(self.graphs[gid], "block_ids", None) or [])
        for bid in loop_blocks:
            self._use_expr(found, self.runtime_block_sizes.get(bid, sympy.S.Zero), int)
        for root in self.root_loops:
            for dim in root.dims:
                self._use_expr(found, dim.begin, int)
                self._use_expr(found, dim.end, int)
                self._use_expr(found, dim.step, int)
        for gid in self.reachable_graph_ids:
            for node in self.graphs[gid].graph.nodes:
                for value, kind in _scalars_in(node.meta.get("val")):
                    self._use_expr(found, value, kind)
        return {expr: kind for expr, kind in found.items() if self.symbol_origin(expr) is not None}

    def _use_expr(self, found: dict[sympy.Expr, type], value: Any, kind: type) -> None:
        """Add ``value``'s expression when it has a host origin of its own (the host code's
        ``bin_width = (hi - lo) / num_bins``, ``n = max(int(t.item()), 1)``, a size of a host
        tensor): the host computed it, as Helion's own code generator takes it; else its symbols."""
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            value = value.node.expr
        if not isinstance(value, sympy.Basic) or not value.free_symbols:
            return
        if self.symbol_origin(value) is not None:
            found.setdefault(value, kind)
            return
        for sym in sorted(value.free_symbols, key=str):
            found.setdefault(sym, float if symbol_is_type(sym, (SymT.FLOAT, SymT.UNBACKED_FLOAT)) else int)

    def per_call_arg(self, expr: sympy.Expr) -> FunctionArg | None:
        """The scalar argument that carries a per-call host value, if ``expr`` is one."""
        return self.per_call_args.get(expr)

    def arg(self, name: str) -> FunctionArg:
        for a in self.args:
            if a.name == name:
                return a
        raise HelionMLIRError(f"host tensor '{name}' is not an argument of kernel '{self.name}'")

    # -- loops ----------------------------------------------------------------------------
    def _root_loops(self) -> list[RootLoop]:
        loops: list[RootLoop] = []
        for phase_index, phase in enumerate(self.device_ir.phases):
            for root_index, for_node in zip(phase.roots, phase.root_nodes):
                block_ids = list(self.device_ir.grid_block_ids[root_index])
                begins, ends, steps = _tile_loop_range(for_node, len(block_ids))
                dims = []
                for bid, begin, end, step in zip(block_ids, begins, ends, steps):
                    begin, end = (self._tensor_bound(v, bid, for_node) for v in (begin, end))
                    if isinstance(step, int) and step <= 0:
                        raise HelionMLIRError(
                            f"top-level loop over block {bid} of kernel '{self.name}' has step {step}; "
                            "hl.grid's step must be positive"
                        )
                    size = self.block_sizes.get(bid, self.runtime_block_sizes.get(bid))
                    if size is None:
                        raise HelionMLIRError(
                            f"top-level loop over block {bid} of kernel '{self.name}' has no block size; "
                            "give the kernel a helion.Config with block_sizes"
                        )
                    dims.append(LoopDim(bid, begin, end, size, None if isinstance(step, int) and step == 1 else step))
                loops.append(RootLoop(self.device_ir.root_ids[root_index], phase_index, tuple(dims),
                                      getattr(for_node, "_location", None)))
        return loops

    def _tensor_bound(self, value: Any, block_id: int, for_node: Any) -> Any:
        """``value``, or the :class:`TensorBound` it is when a tensor bounds the loop."""
        if not isinstance(value, torch.Tensor):
            return value
        origin = self.host_function.tensor_to_origin.get(value)
        if value.dim() == 0 and not value.dtype.is_floating_point and value.dtype != torch.bool \
                and isinstance(origin, vo.NameOrigin) and not isinstance(origin, (vo.GlobalOrigin, vo.BuiltinOrigin)):
            return TensorBound(origin.name, value)
        location = getattr(for_node, "_location", None)
        where = f" at {location.filename}:{location.lineno}" if location else ""
        raise HelionMLIRError(
            f"top-level loop over block {block_id} of kernel '{self.name}'{where} is bounded by a tensor's value "
            f"that is not a 0-d integer tensor of a host variable ({value.dtype}, shape {tuple(value.shape)}); "
            "bound it by int(t.item()) in the host code")

    def _persistent_reductions(self) -> dict[int, Any]:
        """Reduction dims kept whole: block id -> number of elements (int or SymInt).

        They are lowered unpadded at their exact size; rolled ones (``rolled_blocks``) are
        loops over chunks instead.
        """
        found: dict[int, Any] = {}
        for info in self.bound.env.block_sizes:
            if not isinstance(info.block_size_source, ReductionLoopBlockSizeSource):
                continue
            if info.block_id in self.rolled_blocks:
                continue
            owner = self.block_vars.get(info.var._sympy_()) if isinstance(info.var, torch.SymInt) else None
            if owner == info.block_id:
                found[info.block_id] = info.size
        return found

    def block_id_of(self, size: Any) -> int | None:
        """The block id whose tile-size symbol ``size`` is (a dimension of a tile-shaped value)."""
        if isinstance(size, torch.SymInt):
            size = size._sympy_()
        if isinstance(size, sympy.Symbol):
            return self.block_vars.get(size)
        return None

    def symbol_origin(self, symbol: sympy.Expr) -> Any:
        entry = self.host_function.expr_to_origin.get(symbol)
        return None if entry is None else entry.origin

    def config_value(self, symbol: sympy.Expr) -> int | None:
        """The value of a symbol Helion computes from the config (``hl.register_tunable``, or
        an expression of tunables), or None: a constant of the module, as in Helion's code."""
        expression = self.bound.env.config_value_expressions.get(symbol)
        if expression is None:
            return None
        tunables = self.bound.config_spec.user_defined_tunables
        values = {name: fragment.default() for name, fragment in tunables.items()}
        values.update(self.config.config)
        return expression.evaluate(helion.Config(**values))


def _refuse_specialized_tile(info: Any) -> None:
    """Refuse a fixed-size block whose tile-size symbol has become a number.

    Helion keeps the symbol of ``hl.tile(n, block_size=16)`` apart from the number (a
    singleton range, not a replacement) so that code generators can still tell the tile's
    axis; something that takes ``int()`` of it afterwards (code generation guarding on it in
    the bound kernel's shared shape environment) replaces it everywhere. The tile's indices
    would then read as the constant 16, and its values as whole dimensions of that size.
    """
    if not isinstance(info.block_size_source, FixedBlockSizeSource):
        return
    created, now = info.var.node._expr, info.var._sympy_()
    if isinstance(created, sympy.Symbol) and not isinstance(now, sympy.Symbol):
        raise HelionMLIRError(
            f"the tile-size symbol of block {info.block_id} ({created}, a fixed block size) was specialized to {now} "
            "in the bound kernel's shape environment after binding, so its tiles can no longer be told from "
            "constants; bind the kernel again (kernel.reset())")


_PYTHON_TYPES: dict[type, type] = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def host_tensor_name(node: Any) -> str | None:
    """The host variable behind a ``_host_tensor(name)`` node, else None."""
    if isinstance(node, fx.Node) and node.op == "call_function" and node.target is _tracing_ops._host_tensor:
        return str(node.args[0])
    return None


def _scalars_in(val: Any) -> Iterator[tuple[Any, type]]:
    """The symbolic scalars of a node value (itself, the sizes of a tensor, the items of a
    list) with the Python type of each."""
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        yield val, _PYTHON_TYPES[type(val)]
    elif isinstance(val, torch.Tensor):
        yield from ((size, int) for size in val.shape)
    elif isinstance(val, (list, tuple)):
        for item in val:
            yield from _scalars_in(item)


def _layout(fake: torch.Tensor) -> tuple[Any, ...]:
    return fake.dtype, tuple(fake.shape), tuple(fake.stride()), fake.storage_offset()


def _describe_layout(fake: torch.Tensor) -> str:
    return f"shape {tuple(fake.shape)}, strides {tuple(fake.stride())}, offset {fake.storage_offset()}"


def _scalar_mlir_type(value: Any) -> str:
    if isinstance(value, torch.SymBool):
        return "i1"
    if isinstance(value, torch.SymInt):
        return "i64"
    if isinstance(value, torch.SymFloat):
        return "f64"
    return scalar_type_of_python(value)


def _tile_loop_range(for_node: Any, ndims: int) -> tuple[list[Any], list[Any], list[Any]]:
    """Begin, end and step (None: the block size) per dimension of a top-level
    ``hl.tile``/``hl.grid`` loop, from its AST."""
    call = for_node.iter
    fn = call.func._type_info.proxy()
    args = [a._type_info.proxy() for a in call.args]
    kwargs = {k.arg: k.value._type_info.proxy() for k in call.keywords}
    bound_args = fn._signature.bind(*args, **kwargs)
    bound_args.apply_defaults()
    a = bound_args.arguments
    first, second = a.get("begin_or_end"), a.get("end_or_none")
    step = a.get("step")
    if second is None:
        begins: Any = [0] * ndims
        ends: Any = first
    else:
        begins, ends = first, second
    if not isinstance(begins, (list, tuple)):
        begins = [begins]
    if not isinstance(ends, (list, tuple)):
        ends = [ends]
    steps = step if isinstance(step, (list, tuple)) else [step] * ndims
    if len(begins) != ndims or len(ends) != ndims or len(steps) != ndims:
        raise HelionMLIRError(f"cannot match the loop range of {fn.__qualname__} to {ndims} grid dimensions")
    return list(begins), list(ends), list(steps)

