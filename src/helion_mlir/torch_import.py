"""Lower single ATen nodes of a Helion kernel to MLIR through torch-mlir.

Each device-IR node that computes with ATen is cut out of its graph into a minimal FX
graph (one placeholder per input, the call, ``getitem`` nodes for tuple results),
imported with torch-mlir's FxImporter into the package's one shared MLIR context, and
lowered with torch-mlir's pipelines to the requested :class:`OutputType`. The result is
the text of a module holding exactly one ``func.func``, printed with debug info so every
op carries a ``loc(...)`` that the inliner later replaces with the kernel's location.

Calling convention (shared with the inliner). ``input_tensors`` has one entry per
:func:`~helion_mlir.normalize.node_inputs` entry, in that order:

* a ``torch.Tensor`` (fake, meta or real; concrete or symbolic sizes) becomes a tensor
  argument; symbolic sizes become dynamic dimensions (``?``);
* a :class:`TensorSpec` (shape and dtype, ``None`` for a dynamic size) is a contiguous
  tensor argument described without a tensor: a cache hit then creates no fake tensor and
  no shape environment, which is what a converter emitting many kernels wants;
* a ``SymInt`` / ``SymFloat`` / ``SymBool`` becomes a scalar argument (``!torch.int`` in
  raw IR, ``i64`` after lowering, and so on);
* a Python ``int`` / ``float`` / ``bool`` is baked into the graph as a literal. This is how
  a caller concretizes tile sizes: ``full([u0, u1], ...)`` with ``input_tensors=[32, 32]``
  lowers as ``full([32, 32], ...)``.

The function's arguments are therefore the non-literal inputs, in node_inputs order
(an input the op does not read, such as Helion's ``_extra_deps``, stays an unused
argument). A symbolic scalar where the op's schema wants a tensor (``x // width``) is
passed on as a 0-d tensor with the same type promotion.

Ops torch-mlir does not define (``aten.bmm.dtype``), and nodes it fails to lower, go
through exact rewrites (``_EXACT_REWRITES``, a Scalar overload's Tensor form) or torch's
reference decompositions, traced with ``make_fx``, before counting as unsupported.

Cost. Importing and lowering one node costs milliseconds, and a kernel has dozens of
nodes with few distinct signatures, so results (failures included) are cached per
process on everything that determines them, and :func:`import_nodes` lowers all cache
misses of a kernel together in one module with one pipeline run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import operator
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.passes.shape_prop import TensorMetadata
from torch_mlir import ir
from torch_mlir.dialects import builtin as builtin_dialect
from torch_mlir.extras.fx_importer import SYMBOLIC_OP_TO_TORCH_OP, FxImporter
from torch_mlir.passmanager import PassManager

from .errors import HelionMLIRError, NodeNormalizationError, UnsupportedNodeError, describe_target
from .lru_cache import LRUCache
from .mlir_context import mlir_session
from .normalize import (
    SCALAR_TYPES,
    node_inputs,
    normalize_helion_node,
    synthesize_tensor_meta,
    to_fake_tensor,
)
from .output_type import TORCH_BACKEND_PIPELINE, OutputType

__all__ = [
    "ImportBatch",
    "ImportStats",
    "ResultSpec",
    "TensorSpec",
    "TorchMLIRLoweringError",
    "TorchMLIRNodeImporter",
    "clear_import_cache",
    "import_aten_node_to_mlir",
    "import_nodes",
    "import_stats",
]

log = logging.getLogger(__name__)

aten = torch.ops.aten

InputValue = Any  # torch.Tensor | TensorSpec | int | float | bool | torch.SymInt | torch.SymFloat | torch.SymBool
_SYMBOLIC_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool)


@dataclass(frozen=True)
class TensorSpec:
    """A contiguous tensor input given by shape and dtype; each ``None`` size is dynamic
    and independent of every other size."""

    shape: tuple[int | None, ...]
    dtype: torch.dtype


# --------------------------------------------------------------------------------------
# Cache and statistics
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportStats:
    """Counters of the process-wide import cache.

    ``lowering_runs`` counts pass-pipeline runs: one per batch of cache misses, plus the
    extra runs spent isolating a node that made a batch fail.
    """

    hits: int
    misses: int
    lowering_runs: int
    entries: int


@dataclass(frozen=True)
class _Failure:
    """A cached negative result: why a signature cannot be lowered.

    ``summary`` is torch-mlir's own one-line complaint, ``reason`` the sentence around it.
    """

    reason: str
    summary: str
    diagnostics: tuple[str, ...]
    hint: str | None


@dataclass(frozen=True)
class ResultSpec:
    """Shape (``None`` for a dynamic size) and dtype of one tensor result of an imported node."""

    shape: tuple[int | None, ...]
    dtype: torch.dtype


Results = Any  # ResultSpec, a tuple of them (tuple results), or None (not a tensor)


@dataclass(frozen=True)
class _Imported:
    """A node's lowered module text and what its results are."""

    text: str
    results: Results


class _ImportCache:
    """Imports (or failures) by signature; shared by all importers, thread-safe."""

    def __init__(self, capacity: int) -> None:
        self._lock = threading.Lock()
        self._entries: LRUCache[_Imported | _Failure] = LRUCache(capacity)
        self.hits = 0
        self.misses = 0
        self.lowering_runs = 0

    def lookup(self, key: tuple) -> _Imported | _Failure | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
            return found

    def count_hit(self) -> None:
        with self._lock:
            self.hits += 1

    def store(self, key: tuple, result: _Imported | _Failure) -> None:
        self._entries.put(key, result)

    def count_lowering_run(self) -> None:
        with self._lock:
            self.lowering_runs += 1

    def stats(self) -> ImportStats:
        with self._lock:
            return ImportStats(self.hits, self.misses, self.lowering_runs, len(self._entries))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = self.lowering_runs = 0


# Distinct node signatures: a few hundred across all the examples; each entry is about a
# kilobyte of text.
IMPORT_CACHE_CAPACITY = 16384
_CACHE = _ImportCache(IMPORT_CACHE_CAPACITY)


def import_stats() -> ImportStats:
    """Hit, miss and pipeline-run counts of the process-wide cache since the last clear."""
    return _CACHE.stats()


def clear_import_cache() -> None:
    """Forget every cached result and reset the counters (tests and benchmarks use it)."""
    _CACHE.clear()


# --------------------------------------------------------------------------------------
# Signatures: what determines an import's result
# --------------------------------------------------------------------------------------


class _SymbolNumbering:
    """Numbers symbolic expressions by first appearance, so ``[u3, u7]`` and ``[u0, u1]``
    give the same key while ``[u0, u0]`` and ``[u0, u1]`` do not."""

    def __init__(self) -> None:
        self._ids: dict[Any, int] = {}

    def fresh(self) -> tuple[str, int]:
        """A symbol unlike every other (a dynamic size of a TensorSpec)."""
        number = len(self._ids)
        self._ids[object()] = number
        return ("sym", number)

    def dim(self, value: Any) -> Any:
        if isinstance(value, _SYMBOLIC_SCALARS):
            expr = value.node.expr
            number = self._ids.setdefault(expr, len(self._ids))
            return ("sym", number)
        return int(value)


def _literal_key(value: Any, node: fx.Node, input_index: dict[fx.Node, int]) -> Any:
    """A hashable, type-exact rendering of a node's literal arguments (inputs by position)."""
    if isinstance(value, fx.Node):
        return ("input", input_index[value])
    if value is None or isinstance(value, (str, torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        # repr keeps -0.0, inf and nan apart and makes nan equal to itself.
        return ("float", repr(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_literal_key(v, node, input_index) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _literal_key(v, node, input_index)) for k, v in value.items()))
    if isinstance(value, slice):
        return ("slice", tuple(_literal_key(v, node, input_index) for v in (value.start, value.stop, value.step)))
    raise NodeNormalizationError(
        node,
        f"it has a literal argument of unsupported kind {type(value).__name__} ({value!r})",
        hint="literal arguments must be None, bool, int, float, str, dtype, device, layout, "
        "memory format, or lists/tuples of those; symbolic values must come from FX nodes",
    )


def _value_key(value: InputValue, symbols: _SymbolNumbering) -> tuple:
    if isinstance(value, TensorSpec):
        return ("contiguous tensor", value.dtype, tuple(symbols.fresh() if d is None else d for d in value.shape))
    if isinstance(value, torch.Tensor):
        return (
            "tensor",
            value.dtype,
            tuple(symbols.dim(d) for d in value.shape),
            tuple(symbols.dim(s) for s in value.stride()) if value.layout == torch.strided else (),
        )
    if isinstance(value, _SYMBOLIC_SCALARS):
        return (type(value).__name__, symbols.dim(value))
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def _signature(node: fx.Node, values: Sequence[InputValue], output_type: OutputType) -> tuple:
    symbols = _SymbolNumbering()
    input_index = {inp: i for i, inp in enumerate(node_inputs(node))}
    return (
        node.target,
        tuple(_value_key(v, symbols) for v in values),
        _literal_key(tuple(node.args), node, input_index),
        _literal_key(dict(node.kwargs), node, input_index),
        output_type,
    )


# --------------------------------------------------------------------------------------
# Inputs and fake values
# --------------------------------------------------------------------------------------


def _default_input_values(node: fx.Node) -> list[InputValue]:
    values = []
    for inp in node_inputs(node):
        if "val" not in inp.meta:
            raise NodeNormalizationError(
                inp,
                f"it has no meta['val'], so the type of this input of node '{node.name}' is unknown",
                hint="import nodes of a bound kernel's device IR, or pass input_tensors explicitly",
            )
        values.append(inp.meta["val"])
    return values


def _check_input_values(node: fx.Node, values: Sequence[InputValue]) -> list[InputValue]:
    inputs = node_inputs(node)
    if len(values) != len(inputs):
        raise NodeNormalizationError(
            node,
            f"input_tensors has {len(values)} entries but the node reads {len(inputs)} FX nodes "
            f"({', '.join(i.name for i in inputs) or 'none'})",
            hint="pass one entry per node_inputs(node) entry, in that order",
        )
    for inp, value in zip(inputs, values):
        if not isinstance(value, (torch.Tensor, TensorSpec, *SCALAR_TYPES)):
            raise NodeNormalizationError(
                node,
                f"input '{inp.name}' is given as a {type(value).__name__}",
                hint="each input must be a torch.Tensor, a TensorSpec, a SymInt/SymFloat/SymBool or a "
                "Python int/float/bool (which is baked in as a literal)",
            )
    return list(values)


def _tensors_for_specs(values: Sequence[InputValue]) -> list[InputValue]:
    """``values`` with each TensorSpec made a tensor: a meta tensor when its sizes are all
    static, else a fake tensor whose dynamic sizes are unbacked symbols of a shape
    environment of this call (so no fact learned about them outlives the import)."""
    specs = [v for v in values if isinstance(v, TensorSpec)]
    if not specs:
        return list(values)
    if all(d is not None for spec in specs for d in spec.shape):
        with unset_fake_temporarily():  # a caller may have a fake mode active (Helion does)
            return [torch.empty(v.shape, dtype=v.dtype, device="meta") if isinstance(v, TensorSpec) else v
                    for v in values]
    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)

    def fake(spec: TensorSpec) -> torch.Tensor:
        with mode:
            sizes = [d if d is not None else shape_env.create_unbacked_symint() for d in spec.shape]
            return torch.empty(sizes, dtype=spec.dtype)

    return [fake(v) if isinstance(v, TensorSpec) else v for v in values]


_STATIC_FAKE_MODE = FakeTensorMode(allow_non_fake_inputs=True)  # for tracing decompositions
_FAKE_MODES_BY_SHAPE_ENV: "weakref.WeakKeyDictionary[ShapeEnv, FakeTensorMode]" = weakref.WeakKeyDictionary()


def _is_static(values: Sequence[InputValue]) -> bool:
    """No symbolic size, stride or scalar among the inputs."""
    for value in values:
        if isinstance(value, _SYMBOLIC_SCALARS):
            return False
        if isinstance(value, torch.Tensor) and any(
            isinstance(d, torch.SymInt) for d in (*value.shape, *value.stride())
        ):
            return False
    return True


def _evaluation_mode(node: fx.Node, values: Sequence[InputValue]) -> FakeTensorMode | None:
    """How to compute with the inputs: None for static inputs, computed on meta tensors
    (several times cheaper than a fake mode meeting an op for the first time); else the
    inputs' own fake mode, whose ShapeEnv their symbols live in."""
    if _is_static(values):
        return None
    modes = {id(v.fake_mode): v.fake_mode for v in values if isinstance(v, FakeTensor)}
    if len(modes) > 1:
        raise NodeNormalizationError(
            node,
            "its input tensors come from different FakeTensorModes",
            hint="pass inputs traced together (one kernel's device IR) or concrete tensors",
        )
    if modes:
        return next(iter(modes.values()))
    for v in values:
        if isinstance(v, _SYMBOLIC_SCALARS):
            env = v.node.shape_env
            mode = _FAKE_MODES_BY_SHAPE_ENV.get(env)
            if mode is None:
                mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
                _FAKE_MODES_BY_SHAPE_ENV[env] = mode
            return mode
    raise AssertionError("symbolic inputs without a shape environment")


@contextlib.contextmanager
def _evaluating(mode: FakeTensorMode | None) -> Iterator[None]:
    """Context in which ops run on the placeholder values (see _evaluation_mode). Static
    values are computed on meta tensors outside any fake mode the caller has active
    (Helion's compile environment keeps one)."""
    if mode is not None:
        with mode:
            yield
        return
    with unset_fake_temporarily(), torch.device("meta"):
        yield


def _placeholder_value(value: torch.Tensor, mode: FakeTensorMode | None) -> torch.Tensor:
    """``value`` as the graph carries it: a meta tensor (static) or a fake tensor of ``mode``."""
    if mode is None:
        if value.is_meta and not isinstance(value, FakeTensor):
            return value
        with unset_fake_temporarily():
            return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, FakeTensor):
        return value
    if value.is_meta:
        with mode:
            return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="cpu")
    return mode.from_tensor(value, static_shapes=True)


# --------------------------------------------------------------------------------------
# Targets: Helion ops with an exact ATen form, and exact rewrites of ops torch-mlir lacks
# --------------------------------------------------------------------------------------


def _is_helion_target(target: Any) -> bool:
    return (getattr(target, "__module__", None) or "").startswith("helion")


def _is_helion_full(target: Any) -> bool:
    return (
        getattr(target, "__module__", None) == "helion.language.creation_ops"
        and getattr(target, "__name__", None) == "full"
    )


def _aten_call(target: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
    """The ATen call a node stands for.

    Helion's ``full(shape, value, dtype, device)`` is exactly ``aten.full`` (the device
    does not show in the emitted IR). Keyword arguments outside the op's schema are
    Helion's bookkeeping (``_extra_deps`` of ``aten.max.dim``) and are dropped; their
    nodes still count as inputs, so they stay (unused) function arguments.
    """
    if _is_helion_full(target):
        bound = dict(zip(("shape", "value", "dtype", "device"), args)) | dict(kwargs)
        return aten.full.default, (bound["shape"], bound["value"]), {"dtype": bound.get("dtype")}
    schema = getattr(target, "_schema", None)
    if schema is not None and kwargs:
        names = {argument.name for argument in schema.arguments}
        kwargs = {name: value for name, value in kwargs.items() if name in names}
    return target, args, kwargs


def _matmul_in_out_dtype(op: Callable[..., torch.Tensor], operand_count: int) -> Callable[..., torch.Tensor]:
    """Rewrite of ``mm/bmm/addmm/baddbmm.dtype``: multiply-accumulate in ``out_dtype``.

    Upcasting the operands first is exact: a product of two bf16/f16 values fits f32
    (and of two int8 values int32), so converting before the matmul yields the same
    products, and the accumulation happens in ``out_dtype`` as the overload specifies.
    """

    def rewrite(*args: Any, **kwargs: Any) -> torch.Tensor:
        operands, out_dtype = args[:operand_count], args[operand_count]
        return op(*(t.to(out_dtype) for t in operands), **kwargs)

    return rewrite


def _remainder_scalar_tensor(scalar: Any, other: torch.Tensor) -> torch.Tensor:
    # The scalar joins as a 0-d tensor of the promoted dtype, which leaves the promotion
    # of the Scalar_Tensor overload unchanged.
    dtype = torch.result_type(scalar, other)
    return aten.remainder.Tensor(aten.scalar_tensor.default(scalar, dtype=dtype), other.to(dtype))


def _integer_power(base: torch.Tensor, exponent: Any) -> Any:
    """``pow`` of an integer tensor by a non-negative int: square-and-multiply.

    Integer multiplication wraps the same way whatever the order, so this is exact.
    Other cases are left to the op itself (``NotImplemented``).
    """
    if base.dtype.is_floating_point or base.dtype == torch.bool or isinstance(exponent, bool):
        return NotImplemented
    if not isinstance(exponent, int) or exponent < 0:
        return NotImplemented
    result = aten.full_like.default(base, 1)
    square = base
    while exponent:
        if exponent & 1:
            result = aten.mul.Tensor(result, square)
        exponent >>= 1
        if exponent:
            square = aten.mul.Tensor(square, square)
    return result


def _iota_as_arange(
    length: Any, *, start: Any, step: Any, dtype: torch.dtype, device: Any, requires_grad: bool
) -> torch.Tensor:
    # prims.iota is integer-only, and arange over integers yields exactly
    # start, start + step, ... (length values); torch-mlir lowers arange with a
    # symbolic end where it fails on iota with a symbolic length.
    return aten.arange.start_step(start, start + length * step, step, dtype=dtype, device=device)


_EXACT_REWRITES: dict[Any, Callable[..., Any]] = {
    torch.ops.prims.iota.default: _iota_as_arange,
    aten.mm.dtype: _matmul_in_out_dtype(aten.mm.default, 2),
    aten.bmm.dtype: _matmul_in_out_dtype(aten.bmm.default, 2),
    aten.addmm.dtype: _matmul_in_out_dtype(aten.addmm.default, 3),
    aten.baddbmm.dtype: _matmul_in_out_dtype(aten.baddbmm.default, 3),
    aten.remainder.Scalar_Tensor: _remainder_scalar_tensor,
    aten.pow.Tensor_Scalar: _integer_power,
}

_REGISTERED: dict[Any, bool] = {}


def _torch_mlir_has_op(target: Any, ctx: ir.Context) -> bool:
    """Whether torch-mlir defines the op the importer would emit for ``target``.

    Unknown ops are imported as an opaque ``torch.operator`` that never lowers, so those
    are decomposed before import.
    """
    known = _REGISTERED.get(target)
    if known is None:
        schema = getattr(SYMBOLIC_OP_TO_TORCH_OP.get(target, target), "_schema", None)
        if schema is None:
            known = True  # Python operators on SymInts: the importer maps them itself.
        else:
            namespace, _, name = schema.name.partition("::")
            overload = f".{schema.overload_name}" if schema.overload_name else ""
            known = ctx.is_registered_operation(f"torch.{namespace}.{name}{overload}")
        _REGISTERED[target] = known
    return known


def _scalar_overload_as_tensor_overload(target: Any) -> Callable[..., Any] | None:
    """For ``op.Scalar`` with a matching ``op.Tensor`` overload: call the latter with the
    scalar operands as 0-d tensors (exact, see scalar_tensor_dtype). torch-mlir often
    lowers only the Tensor form (``fmod.Scalar`` on integers fails, ``fmod.Tensor`` works)."""
    if not isinstance(target, torch._ops.OpOverload) or target._overloadname != "Scalar":
        return None
    tensor_op = getattr(target.overloadpacket, "Tensor", None)
    if tensor_op is None:
        return None
    scalar_arguments, tensor_arguments = target._schema.arguments, tensor_op._schema.arguments
    if [a.name for a in scalar_arguments] != [a.name for a in tensor_arguments]:
        return None
    wrapped_positions = []
    for position, (mine, theirs) in enumerate(zip(scalar_arguments, tensor_arguments)):
        if str(mine.type) == str(theirs.type):
            continue
        if not isinstance(mine.type, torch.NumberType) or not isinstance(theirs.type, torch.TensorType):
            return None
        wrapped_positions.append(position)

    def rewrite(*args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        new_args = list(args)
        for position in wrapped_positions:
            if position < len(new_args) and not isinstance(new_args[position], torch.Tensor):
                scalar = new_args[position]
                dtype = scalar_tensor_dtype(scalar, [t.dtype for t in tensors])
                # new_full on an input rather than scalar_tensor: a tensor made from
                # constants only would be evaluated eagerly while tracing, not traced.
                new_args[position] = aten.new_full.default(tensors[0], [], scalar, dtype=dtype)
        return tensor_op(*new_args, **kwargs)

    return rewrite


def _decomposition_for(target: Any) -> Callable[..., Any] | None:
    """An exact rewrite of ``target`` into ops torch-mlir may lower better: the package's
    own, the Tensor form of a Scalar overload, else torch's reference decomposition."""
    if target in _EXACT_REWRITES:
        return _EXACT_REWRITES[target]
    rewrite = _scalar_overload_as_tensor_overload(target)
    if rewrite is not None:
        return rewrite
    from torch._decomp import decomposition_table

    return decomposition_table.get(target)


# --------------------------------------------------------------------------------------
# The minimal FX graph of one node
# --------------------------------------------------------------------------------------


def _set_value_meta(node: fx.Node, value: Any) -> None:
    node.meta["val"] = value
    if isinstance(value, torch.Tensor):
        node.meta["tensor_meta"] = TensorMetadata(**synthesize_tensor_meta(value))


@dataclass
class _NodeRecipe:
    """Everything needed to (re)build the importable graph of one node."""

    node: fx.Node
    call: tuple[Any, tuple, dict]  # ATen target, args and kwargs over the graph's placeholders
    fake_of: dict[fx.Node, Any]  # placeholder -> its value (meta/fake tensor or SymInt)
    mode: FakeTensorMode | None  # see _evaluation_mode
    graph: fx.Graph
    decomposed: bool


def _placeholders_for(
    node: fx.Node, values: Sequence[InputValue], mode: FakeTensorMode | None
) -> tuple[fx.Graph, dict[fx.Node, Any], dict[fx.Node, Any]]:
    """A graph with one placeholder per non-literal input; returns (graph, replacement, fake_of)."""
    graph = fx.Graph()
    replacement: dict[fx.Node, Any] = {}  # input node -> placeholder or literal
    fake_of: dict[fx.Node, Any] = {}
    for i, (inp, value) in enumerate(zip(node_inputs(node), values)):
        if isinstance(value, torch.Tensor):
            fake = _placeholder_value(value, mode)
        elif isinstance(value, _SYMBOLIC_SCALARS):
            fake = value
        else:
            replacement[inp] = value
            continue
        placeholder = graph.placeholder(f"arg{i}")
        _set_value_meta(placeholder, fake)
        replacement[inp] = placeholder
        fake_of[placeholder] = fake
    return graph, replacement, fake_of


def _computed_result(
    node: fx.Node, recipe_call: tuple[Any, tuple, dict], fake_of: dict, mode: FakeTensorMode | None
) -> Any:
    """The node's result for these inputs, from running the op on meta or fake values."""
    target, args, kwargs = recipe_call
    args = fx.map_arg(args, fake_of.__getitem__)
    kwargs = dict(fx.map_arg(kwargs, fake_of.__getitem__))
    if mode is None and kwargs.get("device") is not None:
        kwargs["device"] = torch.device("meta")  # a factory op must not allocate real memory
    try:
        with _evaluating(mode):
            result = target(*args, **kwargs)
    except Exception as err:  # whatever the op's meta function raises
        raise NodeNormalizationError(
            node,
            f"cannot compute its result for the given inputs ({type(err).__name__}: {err})",
            hint="check that input_tensors match what the op accepts (shapes, dtypes)",
        ) from err
    if isinstance(result, (tuple, list)):
        # The importer types the parts of a multi-result op from fake tensors.
        return type(result)(to_fake_tensor(part) if part.is_meta else part for part in result)
    return result


def _check_required_tensors(node: fx.Node, call: tuple[Any, tuple, dict]) -> None:
    """Refuse a ``None`` where the op's schema requires a tensor.

    Helion's lowering pass replaces inputs its own code generators do not read with
    ``None`` (``x * x`` becomes ``mul(x, None)``); such a node no longer says what it
    computes, and torch-mlir would fail with an obscure message.
    """
    target, args, kwargs = call
    schema = getattr(target, "_schema", None)
    if schema is None:
        return
    for position, argument in enumerate(schema.arguments):
        if position < len(args):
            value = args[position]
        elif argument.name in kwargs:
            value = kwargs[argument.name]
        else:
            continue  # not given: its default applies
        if value is None and isinstance(argument.type, torch.TensorType):
            raise NodeNormalizationError(
                node,
                f"its tensor argument '{argument.name}' is None",
                hint="Helion's lowering pass dropped this input; import a twin node built from "
                "helion_mlir.helion_compat.original_args(node)",
            )


def scalar_tensor_dtype(scalar: Any, tensor_dtypes: Sequence[torch.dtype]) -> torch.dtype:
    """The dtype of a 0-d tensor that stands for a Python or symbolic scalar operand
    (a "wrapped number") and gives the same result dtype and the same values.

    A 0-d tensor never wins type promotion over a tensor of its own kind, and torch reads
    a 0-d operand straight into the operation's compute type (f32 for half-precision
    tensors). So a bool is carried as bool; an int beside integer tensors in their promoted
    integer type (the type torch computes in; tosa also wants shift operands of one
    type), otherwise as int64; a float beside floating tensors as float32 (float64 only
    beside float64 tensors: tosa has no f64), and beside integer tensors in the default
    dtype, which is then the result dtype.
    """
    if isinstance(scalar, (bool, torch.SymBool)):
        return torch.bool
    if isinstance(scalar, (int, torch.SymInt)):
        ints = [d for d in tensor_dtypes if not d.is_floating_point and d != torch.bool]
        if ints and len(ints) == len(tensor_dtypes):
            return functools.reduce(torch.promote_types, ints)
        return torch.int64
    if torch.float64 in tensor_dtypes:
        return torch.float64
    if any(dtype.is_floating_point for dtype in tensor_dtypes):
        return torch.float32
    return torch.get_default_dtype()


def _map_tensor_arguments(call: tuple[Any, tuple, dict], wrap: Callable[[Any], Any]) -> tuple[Any, tuple, dict]:
    """``call`` with ``wrap`` applied to each argument the op's schema types as a Tensor."""
    target, args, kwargs = call
    schema = getattr(target, "_schema", None)
    if schema is None:
        return call
    new_args, new_kwargs = list(args), dict(kwargs)
    for position, argument in enumerate(schema.arguments):
        if not isinstance(argument.type, torch.TensorType):
            continue
        if position < len(new_args):
            new_args[position] = wrap(new_args[position])
        elif argument.name in new_kwargs:
            new_kwargs[argument.name] = wrap(new_kwargs[argument.name])
    return target, tuple(new_args), new_kwargs


def _wrap_symbolic_scalars(
    graph: fx.Graph, call: tuple[Any, tuple, dict], values_of: dict[fx.Node, Any], mode: FakeTensorMode | None
) -> tuple[Any, tuple, dict]:
    """Pass a symbolic scalar that sits where the schema wants a tensor as a 0-d tensor.

    PyTorch accepts ``x // width`` with a SymInt ``width`` for ``div.Tensor_mode`` (as a
    wrapped number); the importer would hand the op a ``!torch.int`` instead of a tensor.
    New nodes and their values are added to ``graph`` and ``values_of``.
    """
    tensor_dtypes = [v.dtype for v in values_of.values() if isinstance(v, torch.Tensor)]

    def wrap(value: Any) -> Any:
        scalar = values_of.get(value) if isinstance(value, fx.Node) else None
        if not isinstance(scalar, _SYMBOLIC_SCALARS):
            return value
        dtype = scalar_tensor_dtype(scalar, tensor_dtypes)
        wrapped = graph.create_node(
            "call_function", aten.scalar_tensor.default, (value,), {"dtype": dtype}, name=f"{value.name}_tensor"
        )
        with _evaluating(mode):
            values_of[wrapped] = torch.empty((), dtype=dtype)
        _set_value_meta(wrapped, values_of[wrapped])
        return wrapped

    return _map_tensor_arguments(call, wrap)


def _build_recipe(node: fx.Node, values: Sequence[InputValue], own_values: bool, ctx: ir.Context) -> _NodeRecipe:
    """The minimal importable graph computing ``node`` on ``values``."""
    mode = _evaluation_mode(node, values)
    graph, replacement, fake_of = _placeholders_for(node, values, mode)
    args = fx.map_arg(node.args, replacement.__getitem__)
    kwargs = fx.map_arg(node.kwargs, replacement.__getitem__)
    call = _aten_call(node.target, tuple(args), dict(kwargs))
    _check_required_tensors(node, call)
    target = call[0]
    if not _torch_mlir_has_op(target, ctx):
        decomposed = _decomposed_graph(node, call, fake_of, mode, ctx)
        return _NodeRecipe(node, call, fake_of, mode, decomposed, True)
    values_of = dict(fake_of)
    wrapped_call = _wrap_symbolic_scalars(graph, call, values_of, mode)
    if own_values and target is node.target:
        result = normalize_helion_node(node).meta["val"]
    else:
        result = _computed_result(node, wrapped_call, values_of, mode)
    # Explicit names: deriving one from the target is a noticeable part of a cold import.
    op = graph.create_node("call_function", target, wrapped_call[1], wrapped_call[2], name="op")
    if isinstance(result, (tuple, list)):
        op.meta["val"] = tuple(result)
        parts = []
        for i, part in enumerate(result):
            getitem = graph.create_node("call_function", operator.getitem, (op, i), name=f"result{i}")
            _set_value_meta(getitem, part)
            parts.append(getitem)
        graph.output(tuple(parts))
    else:
        _set_value_meta(op, result)
        graph.output(op)
    return _NodeRecipe(node, call, fake_of, mode, graph, False)


def _result_specs(graph: fx.Graph) -> Results:
    """What the graph's results are, from the values its output node returns."""

    def spec(value: Any) -> ResultSpec | None:
        if not isinstance(value, torch.Tensor):
            return None
        return ResultSpec(tuple(d if isinstance(d, int) else None for d in value.shape), value.dtype)

    returned = next(n for n in reversed(graph.nodes) if n.op == "output").args[0]
    if isinstance(returned, (tuple, list)):
        return tuple(spec(n.meta.get("val")) for n in returned)
    return spec(returned.meta.get("val"))


def _decomposed_graph(
    node: fx.Node,
    call: tuple[Any, tuple, dict],
    fake_of: dict[fx.Node, Any],
    mode: FakeTensorMode | None,
    ctx: ir.Context,
) -> fx.Graph:
    """Trace the call through exact decompositions until only ops torch-mlir knows remain."""
    from torch.fx.experimental.proxy_tensor import make_fx

    target, args, kwargs = call
    placeholders = list(fake_of)
    inputs = [fake_of[p] for p in placeholders]
    if mode is None:
        # Trace on fake CPU tensors: meta tensors would put a meta device into the
        # graph wherever a decomposition creates a tensor.
        mode = _STATIC_FAKE_MODE
        inputs = [_placeholder_value(v, mode) if isinstance(v, torch.Tensor) else v for v in inputs]

    tensor_dtypes = [v.dtype for v in inputs if isinstance(v, torch.Tensor)]

    def as_tensor(value: Any) -> Any:
        if isinstance(value, _SYMBOLIC_SCALARS):
            return aten.scalar_tensor.default(value, dtype=scalar_tensor_dtype(value, tensor_dtypes))
        return value

    def run(*inputs: Any) -> Any:
        env = dict(zip(placeholders, inputs))
        traced_call = (target, fx.map_arg(args, env.__getitem__), dict(fx.map_arg(kwargs, env.__getitem__)))
        op, op_args, op_kwargs = _map_tensor_arguments(traced_call, as_tensor)
        return op(*op_args, **op_kwargs)

    table: dict[Any, Callable[..., Any]] = {}
    to_decompose = [target]
    for _ in range(_MAX_DECOMPOSITION_ROUNDS):
        for op in to_decompose:
            decomposition = _decomposition_for(op)
            if decomposition is None:
                raise _NoDecomposition(
                    f"torch-mlir has no op {describe_target(op)}, and no decomposition of it is known",
                    hint="an exact rewrite in helion_mlir.torch_import._EXACT_REWRITES would add support",
                )
            table[op] = decomposition
        try:
            with mode, _quiet(_FAKE_TENSOR_LOG):
                traced = make_fx(run, decomposition_table=table, tracing_mode="real")(*inputs)
        except Exception as err:  # whatever a decomposition raises for these inputs
            raise _NoDecomposition(f"decomposing {describe_target(target)} failed ({type(err).__name__}: {err})") from err
        to_decompose = sorted(
            {n.target for n in traced.graph.nodes if n.op == "call_function" and not _torch_mlir_has_op(n.target, ctx)},
            key=str,
        )
        if not to_decompose:
            for n in traced.graph.nodes:
                # make_fx records stack traces; drop them so the emitted locations do not
                # depend on this node and the cached text fits every node of the signature.
                n.meta.pop("stack_trace", None)
                if "val" in n.meta:
                    normalize_helion_node(n)  # meta values become fake ones, as the importer wants
            log.debug("node %s: decomposed %s", node.name, describe_target(target))
            return traced.graph
    raise _NoDecomposition(f"decomposing {describe_target(target)} does not reach ops torch-mlir has")


_MAX_DECOMPOSITION_ROUNDS = 4
# torch logs a traceback at error level whenever an op's meta function raises; a
# decomposition that does not apply is an expected outcome here, reported our own way.
_FAKE_TENSOR_LOG = logging.getLogger("torch._subclasses.fake_tensor")


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)


class _NoDecomposition(Exception):
    """Internal: a node torch-mlir lacks cannot be decomposed; carries the failure to report."""

    def __init__(self, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.failure = _Failure(reason=reason, summary=reason, diagnostics=(), hint=hint)


# --------------------------------------------------------------------------------------
# Importing and lowering batches
# --------------------------------------------------------------------------------------


def _pipeline_body(pipeline: str) -> str:
    prefix = "builtin.module("
    if not (pipeline.startswith(prefix) and pipeline.endswith(")")):
        raise ValueError(f"expected a builtin.module(...) pipeline, got {pipeline!r}")
    return pipeline[len(prefix) : -1]


# stablehlo's shape refinement refuses a module with several functions and no `main`.
# For it the batch runs the torch backend pipeline on the flat module, then moves each
# function into a module of its own and runs the backend pipeline on each of those
# (half the time of running everything per module; the per-function result is the same).
_ONE_FUNCTION_PER_MODULE = frozenset({OutputType.STABLEHLO})


@dataclass(frozen=True)
class _Pipelines:
    """Parsed pass managers of one output type (parsing and pass set-up cost time)."""

    flat: PassManager  # runs on the batch module
    per_function: PassManager | None  # then on each function's own module, if needed


_PIPELINES: dict[OutputType, _Pipelines] = {}


def _pipelines(output_type: OutputType) -> _Pipelines:
    found = _PIPELINES.get(output_type)
    if found is None:
        backend = _pipeline_body(output_type.backend_pipeline)
        if output_type in _ONE_FUNCTION_PER_MODULE:
            found = _Pipelines(
                PassManager.parse(TORCH_BACKEND_PIPELINE),
                PassManager.parse(f"builtin.module(builtin.module({backend}))"),
            )
        else:
            found = _Pipelines(
                PassManager.parse(f"builtin.module({_pipeline_body(TORCH_BACKEND_PIPELINE)},{backend})"), None
            )
        _PIPELINES[output_type] = found
    return found


def _function_name(target: Any) -> str:
    """``aten_add_Tensor``: named after the ATen op, which is part of the cache key."""
    if _is_helion_full(target):
        target = aten.full.default
    return re.sub(r"[^A-Za-z0-9_]", "_", describe_target(target))


def _render(diagnostic: Any) -> str:
    """A diagnostic as it would read for the node alone: without its location (batch
    bookkeeping, not the kernel's) and with batch function names ``f__3`` back to ``f``."""
    severity = str(getattr(diagnostic, "severity", "error")).rsplit(".", 1)[-1].lower()
    text = f"{severity}: {diagnostic.message}"
    for note in getattr(diagnostic, "notes", ()) or ():
        text += f"\n  note: {note.message}"
    return _BATCH_SUFFIX.sub(r"\1", text)


_BATCH_SUFFIX = re.compile(r"\b([A-Za-z_]\w*?)__\d+\b")


def _one_line(message: str) -> str:
    """First line of a message with object addresses masked, so it is stable across runs."""
    first = message.strip().splitlines()[0] if message.strip() else message
    return re.sub(r"0x[0-9a-fA-F]+", "0x...", first)


def _summary(diagnostics: Sequence[str], fallback: str) -> str:
    """The first error's message without the IR it quotes: short and stable."""
    for diagnostic in diagnostics:
        first = diagnostic.splitlines()[0]
        if first.startswith("error: "):
            message = first[len("error: ") :]
            return _one_line(message.split(": %", 1)[0].split(': "', 1)[0])
    return fallback


@dataclass(eq=False)  # compared and hashed by identity
class _Pending:
    """One cache miss on its way through import and lowering."""

    key: tuple
    recipe: _NodeRecipe | None
    func_name: str
    result: str | _Failure | None = None
    results: Results = None
    requesters: list[int] = field(default_factory=list)


# FxImporter locates ops from a node's stack trace; a batch entry's index disguised as a
# line of this file tells which entry an error belongs to.
_BATCH_FILE = "helion-mlir-batch-entry"
_BATCH_LOCATION = re.compile(re.escape(f'"{_BATCH_FILE}"') + r":(\d+):")


class _BatchLowering:
    """Imports node graphs into one module and lowers them with one pipeline run.

    When the run fails, the batch is imported once more with each entry's ops located at
    its index, which the error diagnostics then name; those entries fail and the others
    run again. Failures no diagnostic pins down fall back to testing groups. Entries
    that fail to lower get one more try through an exact decomposition.
    """

    def __init__(self, output_type: OutputType, ctx: ir.Context) -> None:
        self.output_type = output_type
        self.ctx = ctx

    def run(self, entries: list[_Pending], *, retry_decomposed: bool = True) -> None:
        """Set ``result`` of every entry (module text or failure)."""
        pending = [e for e in entries if e.result is None]
        while pending:
            module, imported = self._import(pending, tag=False)
            if not imported:
                break
            errors = self._lower(module)
            if errors is None:
                self._split(module, imported)
                break
            if len(imported) == 1:
                imported[0].result = self._lowering_failure([_render(d) for d in errors])
                break
            culprits = self._locate_failures(imported)
            if not culprits:
                self._test_groups(imported)
                break
            pending = [e for e in imported if e not in culprits]
        if retry_decomposed and self.output_type is not OutputType.RAW:
            self._retry_decomposed(entries)

    def _import(self, entries: list[_Pending], *, tag: bool) -> tuple[ir.Module, list[_Pending]]:
        """One module with a function ``<name>__<i>`` per importable entry (others fail)."""
        module = ir.Module.create()
        importer = FxImporter(module=module, config_check=False)
        imported: list[_Pending] = []
        for entry in entries:
            assert entry.recipe is not None
            graph = entry.recipe.graph
            if tag:
                _tag_graph(graph, len(imported))
            try:
                importer.import_stateless_graph(graph, func_name=_batch_name(entry, len(imported)))
                imported.append(entry)
            except Exception as err:  # FxImporter raises plain Python errors
                message = f"{type(err).__name__}: {err}".strip()
                summary = _one_line(message)
                entry.result = _Failure(
                    reason=f"torch-mlir cannot import it ({summary})",
                    summary=summary,
                    diagnostics=(message,),
                    hint=None,
                )
                _drop_trailing_operations(module, len(imported))
            finally:
                if tag:
                    _untag_graph(graph)
        return module, imported

    def _lower(self, module: ir.Module) -> list[Any] | None:
        """Run the whole lowering once; the error diagnostics when it fails, else None.

        Raw output runs no pipeline, so it is verified here instead (texts are printed
        without a second verification).
        """
        try:
            if self.output_type is OutputType.RAW:
                if not module.operation.verify():
                    return [_PlainDiagnostic("the imported module does not verify")]
                return None
            _CACHE.count_lowering_run()
            pipelines = _pipelines(self.output_type)
            pipelines.flat.run(module.operation)
            if pipelines.per_function is not None:
                for func in list(module.body.operations):
                    with ir.InsertionPoint(module.body):
                        holder = builtin_dialect.ModuleOp()
                    holder.body.append(func)
                pipelines.per_function.run(module.operation)
        except ir.MLIRError as err:
            return list(err.error_diagnostics) or [_PlainDiagnostic(str(err))]
        return None

    def _locate_failures(self, entries: list[_Pending]) -> set[_Pending]:
        """Fail the entries a located re-run blames and return them (empty: none found)."""
        module, imported = self._import(entries, tag=True)
        errors = self._lower(module)
        if errors is None:
            return set()
        blamed: dict[int, list[str]] = {}
        for diagnostic in errors:
            found = _BATCH_LOCATION.search(str(diagnostic.location))
            if found is None:
                continue
            index = int(found.group(1)) - 1
            if 0 <= index < len(imported):
                blamed.setdefault(index, []).append(_render(diagnostic))
        for index, rendered in blamed.items():
            entry = imported[index]
            entry.result = self._lowering_failure(rendered)
        return {imported[i] for i in blamed}

    def _test_groups(self, entries: list[_Pending]) -> None:
        """Find the failing entries when no diagnostic names one (e.g. a folded constant
        that lost its location): lower groups of about sqrt(n) entries, then each entry
        of a failing group alone. Bisection would re-lower every entry log(n) times.
        """
        log.debug("%d nodes failed to lower without a diagnostic naming one; testing groups", len(entries))
        size = max(1, math.isqrt(len(entries)))
        for start in range(0, len(entries), size):
            group = entries[start : start + size]
            if not self._lower_group(group) and len(group) > 1:
                for entry in group:
                    self._lower_group([entry])

    def _lower_group(self, group: list[_Pending]) -> bool:
        """Import and lower ``group`` on its own; False when the pipeline fails.

        On success every entry gets its text; a failing group of one gets the failure.
        """
        module, imported = self._import(group, tag=False)
        if not imported:
            return True
        errors = self._lower(module)
        if errors is None:
            self._split(module, imported)
            return True
        if len(imported) == 1:
            imported[0].result = self._lowering_failure([_render(d) for d in errors])
        return False

    def _lowering_failure(self, rendered: list[str]) -> _Failure:
        summary = _summary(rendered, "pass pipeline failed")
        return _Failure(
            reason=f"torch-mlir cannot lower it to {self.output_type.value} ({summary})",
            summary=summary,
            diagnostics=tuple(rendered),
            hint=f"docs/op-support.md lists what lowers to {self.output_type.value}",
        )

    def _retry_decomposed(self, entries: list[_Pending]) -> None:
        """Give entries that failed to lower one more try through an exact decomposition."""
        retries: list[tuple[_Pending, _Pending]] = []
        for entry in entries:
            recipe = entry.recipe
            if not isinstance(entry.result, _Failure) or recipe is None or recipe.decomposed:
                continue
            if _decomposition_for(recipe.call[0]) is None:
                continue
            try:
                graph = _decomposed_graph(recipe.node, recipe.call, recipe.fake_of, recipe.mode, self.ctx)
            except _NoDecomposition:
                continue
            decomposed = _NodeRecipe(recipe.node, recipe.call, recipe.fake_of, recipe.mode, graph, True)
            retries.append((entry, _Pending(entry.key, decomposed, entry.func_name)))
        if not retries:
            return
        self.run([retry for _, retry in retries], retry_decomposed=False)
        for entry, retry in retries:
            if isinstance(retry.result, str):
                log.debug("node %s lowered through its decomposition", entry.recipe.node.name)
                entry.result = retry.result

    def _split(self, module: ir.Module, imported: list[_Pending]) -> None:
        """Give each entry the text of a module of its own.

        Printing a top-level module (not an op nested in the batch) is what prints the
        ``#map`` aliases and ``dense_resource`` blobs the function uses.
        """
        if self.output_type in _ONE_FUNCTION_PER_MODULE:
            holders = [op.operation for op in module.body.operations]
            for index, (entry, holder) in enumerate(zip(imported, holders)):
                (func,) = [op.operation for op in holder.regions[0].blocks[0].operations]
                _rename(func, _batch_name(entry, index), entry.func_name)
                entry.result = _print(holder.clone())
            return
        functions: dict[str, ir.Operation] = {}
        shared: list[ir.Operation] = []
        for op in module.body.operations:
            if op.operation.name == "func.func":
                functions[ir.StringAttr(op.operation.attributes["sym_name"]).value] = op.operation
            else:
                shared.append(op.operation)  # e.g. a global some lowering introduced
        for index, entry in enumerate(imported):
            single = ir.Module.create()
            with ir.InsertionPoint(single.body):
                for op in shared:
                    op.clone()
                copy = functions[_batch_name(entry, index)].clone()
            _rename(copy, _batch_name(entry, index), entry.func_name)
            entry.result = _print(single.operation)


def _batch_name(entry: _Pending, index: int) -> str:
    return f"{entry.func_name}__{index}"


def _rename(func: ir.Operation, old: str, new: str) -> None:
    if ir.StringAttr(func.attributes["sym_name"]).value != old:
        raise HelionMLIRError(f"internal error: expected function @{old} in the lowered batch")
    func.attributes["sym_name"] = ir.StringAttr.get(new)


@dataclass(frozen=True)
class _PlainDiagnostic:
    """Stands in for an MLIR diagnostic when only an error string is available."""

    message: str
    location: str = "unknown"


def _tag_graph(graph: fx.Graph, index: int) -> None:
    for n in graph.nodes:
        if n.op == "call_function":
            n.meta["stack_trace"] = f'  File "{_BATCH_FILE}", line {index + 1}, in entry\n'


def _untag_graph(graph: fx.Graph) -> None:
    for n in graph.nodes:
        n.meta.pop("stack_trace", None)


def _drop_trailing_operations(module: ir.Module, kept: int) -> None:
    """Erase what a failed import left at the end of the module (a half-built function)."""
    operations = module.body.operations
    while len(operations) > kept:
        operations[len(operations) - 1].operation.erase()


def _print(op: ir.Operation) -> str:
    # The pipeline verified the IR already; printing would verify it once more.
    return op.get_asm(enable_debug_info=True, assume_verified=True)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


class TorchMLIRLoweringError(UnsupportedNodeError):
    """torch-mlir cannot import or lower a node for an output type.

    ``summary`` is torch-mlir's one-line complaint (no IR, no addresses), which
    docs/op-support.md quotes; ``diagnostics`` holds its full diagnostics.
    """

    def __init__(self, node: fx.Node, failure: _Failure, output_type: OutputType) -> None:
        super().__init__(
            node,
            failure.reason,
            output_type=output_type.value,
            diagnostics=failure.diagnostics,
            hint=failure.hint,
        )
        self.summary = failure.summary


class TorchMLIRNodeImporter:
    """Turns ATen device-IR nodes into MLIR module text for one output type.

    Importers are cheap: all share the process-wide MLIR context and result cache.
    See the module docstring for the ``input_tensors`` convention.
    """

    def __init__(self, output_type: OutputType | str = OutputType.LINALG_ON_TENSORS) -> None:
        self.output_type = OutputType.parse(output_type)

    def import_node(self, node: fx.Node, input_tensors: Sequence[InputValue] | None = None) -> str:
        """Module text with one ``func.func`` computing ``node``.

        The function's arguments are the non-literal entries of ``input_tensors``
        (default: the input nodes' own ``meta["val"]``), in
        :func:`~helion_mlir.normalize.node_inputs` order; its results are the node's
        results (one per tuple element). Raises :class:`NodeNormalizationError` for
        unusable metadata and :class:`UnsupportedNodeError` (with torch-mlir's
        diagnostics) when torch-mlir cannot import or lower the node.
        """
        return self.import_nodes([(node, input_tensors)])[0]

    def import_nodes(self, requests: Sequence[tuple[fx.Node, Sequence[InputValue] | None]]) -> list[str]:
        """Module texts for many nodes; all cache misses are lowered with one pipeline run.

        When some nodes cannot be lowered, the others are still cached and the
        :class:`UnsupportedNodeError` of the first failing request is raised.
        """
        batch = ImportBatch(self)
        for node, input_tensors in requests:
            batch.add(node, input_tensors)
        return batch.run()

    def _prepare(
        self, node: fx.Node, input_tensors: Sequence[InputValue] | None
    ) -> tuple[tuple, bool, list[InputValue]]:
        """(cache key, whether the inputs are the node's own metas, input values)."""
        if not isinstance(node, fx.Node) or node.op != "call_function":
            raise NodeNormalizationError(
                node, "only call_function nodes can be imported", hint="pass an ATen node of the device IR"
            )
        if _is_helion_target(node.target) and not _is_helion_full(node.target):
            raise UnsupportedNodeError(
                node,
                "it is a Helion op, not an ATen op",
                output_type=self.output_type.value,
                hint="Helion ops (load, store, loops, ...) are converted by the converter itself",
            )
        if input_tensors is None:
            if "val" not in node.meta:
                normalize_helion_node(node)  # raises the NodeNormalizationError that explains it
            values = _default_input_values(node)
            own_values = True
        else:
            values = _check_input_values(node, input_tensors)
            own_values = all(v is inp.meta.get("val") for v, inp in zip(values, node_inputs(node)))
        return _signature(node, values, self.output_type), own_values, values


class ImportBatch:
    """Import requests gathered one at a time and lowered together.

    :meth:`add` checks a request and looks it up in the cache; a miss has its importable
    graph built right away (the node may change or go away afterwards). :meth:`run` lowers
    all misses with one pipeline run. This is how a kernel's emission lowers every ATen
    node it meets with a single run.
    """

    def __init__(self, importer: TorchMLIRNodeImporter) -> None:
        self.output_type = importer.output_type
        self._importer = importer
        self._results: list[_Imported | _Failure | None] = []
        self._reported: list[fx.Node] = []
        self._keys: list[tuple] = []
        self._misses: dict[tuple, _Pending] = {}

    def __len__(self) -> int:
        return len(self._results)

    def add(
        self, node: fx.Node, input_tensors: Sequence[InputValue] | None = None, *, report_as: fx.Node | None = None
    ) -> int:
        """Queue a request (see :meth:`TorchMLIRNodeImporter.import_node`); returns its position.

        An error of the request names ``report_as`` (default: ``node``), e.g. the node of
        the user's graph that ``node`` stands in for.
        """
        key, own_values, values = self._importer._prepare(node, input_tensors)
        position = len(self._results)
        if key in self._misses:
            _CACHE.count_hit()
            self._misses[key].requesters.append(position)
            found = None
        else:
            found = _CACHE.lookup(key)
            if found is None:  # a miss: its graph is built now (this may raise for bad input)
                entry = _Pending(key, None, _function_name(node.target), requesters=[position])
                with mlir_session() as (ctx, _diagnostics), ir.Location.unknown(ctx):
                    try:
                        entry.recipe = _build_recipe(node, _tensors_for_specs(values), own_values, ctx)
                        entry.results = _result_specs(entry.recipe.graph)
                    except _NoDecomposition as err:
                        entry.result = err.failure
                self._misses[key] = entry
        self._results.append(found)
        self._reported.append(report_as if report_as is not None else node)
        self._keys.append(key)
        return position

    def results(self, position: int) -> Results:
        """Shapes and dtypes of a queued request's results, known before :meth:`run`.

        Raises the request's error when it is known to fail already (an op torch-mlir
        lacks that no decomposition reaches).
        """
        found = self._results[position]
        if found is None:
            entry = self._misses[self._keys[position]]
            if isinstance(entry.result, _Failure):
                raise TorchMLIRLoweringError(self._reported[position], entry.result, self.output_type)
            return entry.results
        if isinstance(found, _Failure):
            raise TorchMLIRLoweringError(self._reported[position], found, self.output_type)
        return found.results

    def run(self) -> list[str]:
        """Module texts of all requests, in order; lowers every miss with one pipeline run.

        The misses are cached (failures too) even when some fail; then the
        :class:`UnsupportedNodeError` of the first failing request is raised.
        """
        if self._misses:
            with mlir_session() as (ctx, _diagnostics), ir.Location.unknown(ctx):
                _BatchLowering(self.output_type, ctx).run(list(self._misses.values()))
            for entry in self._misses.values():
                assert entry.result is not None
                stored = entry.result if isinstance(entry.result, _Failure) else _Imported(entry.result, entry.results)
                _CACHE.store(entry.key, stored)
                for position in entry.requesters:
                    self._results[position] = stored
            self._misses = {}
        texts: list[str] = []
        for position, result in enumerate(self._results):
            if isinstance(result, _Failure):
                raise TorchMLIRLoweringError(self._reported[position], result, self.output_type)
            assert result is not None
            texts.append(result.text)
        return texts


_SHARED_IMPORTERS: dict[OutputType, TorchMLIRNodeImporter] = {}


def _shared_importer(output_type: OutputType | str) -> TorchMLIRNodeImporter:
    parsed = OutputType.parse(output_type)
    importer = _SHARED_IMPORTERS.get(parsed)
    if importer is None:
        importer = _SHARED_IMPORTERS.setdefault(parsed, TorchMLIRNodeImporter(parsed))
    return importer


def import_nodes(
    requests: Sequence[tuple[fx.Node, Sequence[InputValue] | None]],
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
) -> list[str]:
    """Batch form of :func:`import_aten_node_to_mlir`: one pipeline run for all cache misses."""
    return _shared_importer(output_type).import_nodes(requests)


def import_aten_node_to_mlir(
    node: fx.Node,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    input_tensors: Sequence[InputValue] | None = None,
) -> str:
    """Module text of one node for ``output_type``; see :class:`TorchMLIRNodeImporter`."""
    return _shared_importer(output_type).import_node(node, input_tensors)
