"""ATen and prims ops: lowered per node through torch-mlir, then inlined.

Tile-shaped inputs are passed with their static tile shapes (from the config), so
torch-mlir sees static shapes and the per-node cache is shared by every node with the
same signature. Compile-time-known scalars are baked into the node as literals;
runtime scalars become scalar operands.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from helion._compiler.inductor_lowering import InductorLowering
from torch import fx

from ..errors import (
    HelionMLIRError,
    NodeNormalizationError,
    UnsupportedNodeError,
    node_source_location,
)
from ..importer.cache import Results, ResultSpec
from ..importer.input_values import TensorSpec
from ..importer.normalize import node_inputs
from ..importer.rewrites import scalar_tensor_dtype
from ..mlir_types import (
    PACKED_PAIR_DTYPES,
    element_type,
    is_float_type,
    scalar_type_of_python,
    torch_element_type,
)
from ..output_type import OutputType
from .broadcasting import helion_placement
from .context import RuleContext
from .emitter import Emitter
from .helion_compat import original_args
from .unit_dims import expand_dims
from .values import Scalar, Tensor

__all__ = [
    "is_aten_op", "lower_aten_op", "traced_call", "import_and_inline", "import_aten_call", "twin_node",
    "input_values", "zero_dim_tensor", "bind_to_schema", "aligned_to_result",
]


def is_aten_op(target: Any) -> bool:
    """ATen and prims overloads go through torch-mlir."""
    return isinstance(target, torch._ops.OpOverload) and target.namespace in ("aten", "prims")


def traced_call(node: fx.Node) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments ``node`` was traced with; Helion's lowering pass may have rewritten
    the node's own (see helion_compat)."""
    recorded = original_args(node)
    if recorded is None and "lowering" in node.meta:
        raise NodeNormalizationError(
            node,
            "the kernel was bound before helion_mlir was imported, so Helion's lowering pass may "
            "have dropped inputs of this node",
            hint="import helion_mlir before calling kernel.bind (in a new process, or with a new helion.kernel)",
        )
    return (recorded[1], recorded[2]) if recorded is not None else (node.args, dict(node.kwargs))


def lower_aten_op(ctx: RuleContext, node: fx.Node) -> Any:
    """An ATen or prims op through torch-mlir: queued for import now, its body inlined
    where it stands after the walk (see :func:`import_and_inline`).

    The node is imported with the arguments it was traced with (Helion's lowering pass
    may have replaced some). Except for raw output, a scalar overload becomes its tensor
    sibling and numbers in tensor slots become 0-d tensors, forms every output type's
    backend lowers; the node's twin carries those arguments and errors still name the
    node. Operands of lower rank line up with the result as Helion lines them up
    (:func:`aligned_to_result`). The result is cast to the dtype the node's meta records.
    """
    args, kwargs = traced_call(node)
    target, numbers = node.target, {}
    if ctx.output_type is not OutputType.RAW:  # raw output stays the op as traced
        target = tensor_operand_overload(node.target, args, kwargs)
        args, kwargs, numbers = _numbers_as_tensors(target, args, kwargs)
    if not numbers and target is node.target and args == node.args and kwargs == dict(node.kwargs):
        values = aligned_to_result(ctx, node, node_inputs(node), input_values(ctx, node))
        return _checked(ctx.emit, node, import_and_inline(ctx, node, values))
    # Import a twin whose arguments are the ones to lower: Helion's discarded inputs put
    # back (see helion_compat), numbers in tensor slots as 0-d tensor inputs.
    scratch = fx.Graph()  # short-lived: its nodes die young, as garbage a cheap collection frees
    stand_ins = {slot: scratch.call_function(torch.ops.aten.scalar_tensor.default, (0,)) for slot in numbers}
    args = tuple(stand_ins.get(("arg", i), a) for i, a in enumerate(args))
    kwargs = {k: stand_ins.get(("kwarg", k), a) for k, a in kwargs.items()}
    try:
        with twin_node(node, target, args, kwargs, scratch) as twin:
            values = input_values(ctx, twin, {stand_ins[slot]: number for slot, number in numbers.items()})
            values = aligned_to_result(ctx, node, node_inputs(twin), values)
            return _checked(ctx.emit, node, import_and_inline(ctx, twin, values, report_as=node))
    except UnsupportedNodeError as err:  # report it for the node the user's graph has
        raise err.about(node) from None
    finally:
        for stand_in in stand_ins.values():
            scratch.erase_node(stand_in)


def aligned_to_result(ctx: RuleContext, node: fx.Node, sources: Sequence[Any], values: list[Any]) -> list[Any]:
    """``values`` (those of the operands ``sources``, nodes or numbers), each tensor operand of
    lower rank than ``node``'s result given unit dims where Helion broadcasts it (see
    :mod:`.broadcasting`): ``b[t0]`` added to ``a[t0, t1]`` is ``b[t0][:, None]``.

    Helion lines operands up so in the inputs of its pointwise (Inductor) lowerings and of
    ``expand``; other ops (matmuls, gathers, concatenations) keep torch's rules.
    """
    result = node.meta.get("val")
    if not isinstance(result, torch.Tensor) or not _broadcasts_by_tile(node):
        return values
    aligned = []
    for source, value in zip(sources, values):
        meta = source.meta.get("val") if isinstance(source, fx.Node) else None
        if isinstance(value, Tensor) and isinstance(meta, torch.Tensor) and meta.dim() == value.rank:
            where = f"node '{node.name}' at {node_source_location(node)}: "
            placement = helion_placement(ctx.model.bound.env, list(meta.shape), list(result.shape), where)
            if placement is not None:
                value = expand_dims(ctx.emit, value, [d for d in range(result.dim()) if d not in placement])
        aligned.append(value)
    return aligned


def _broadcasts_by_tile(node: fx.Node) -> bool:
    """Whether Helion lowers ``node`` through Inductor (pointwise ops and reductions) or as
    ``expand``: the lowerings that line operands up by tile."""
    return node.target is torch.ops.aten.expand.default or isinstance(node.meta.get("lowering"), InductorLowering)


def bind_to_schema(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call of ``target`` by parameter name, as its schema binds them.

    Raises :class:`HelionMLIRError` for a call the op would refuse: more positional values
    than positional parameters (a keyword-only parameter such as ``gelu``'s ``approximate``
    given by position) or an unknown keyword. Ops without a schema bind nothing.
    """
    schema = getattr(target, "_schema", None)
    if schema is None:
        return {}
    positional = [a.name for a in schema.arguments if not a.kwarg_only]
    keyword_only = [a.name for a in schema.arguments if a.kwarg_only]
    if len(args) > len(positional):
        raise HelionMLIRError(
            f"{schema.name} takes {len(positional)} positional argument(s) but was given {len(args)}; "
            f"its keyword-only parameters ({', '.join(keyword_only) or 'none'}) must be passed by name"
        )
    unknown = sorted(set(kwargs) - set(positional) - set(keyword_only))
    if unknown:
        raise HelionMLIRError(f"{schema.name} has no parameter named {', '.join(unknown)}")
    return dict(zip(positional, args)) | dict(kwargs)


@contextlib.contextmanager
def twin_node(
    node: fx.Node, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], scratch: fx.Graph | None = None
) -> Iterator[fx.Node]:
    """A stand-in for ``node`` computing ``target(*args, **kwargs)``, with ``node``'s metadata.

    The call is checked against ``target``'s schema first (:func:`bind_to_schema`): a
    keyword-only argument must be given by name, as the importer passes it on. The twin
    lives in a scratch graph (a new one unless given), so the kernel's graphs keep no
    trace of it, not even its name; it is erased on leaving the ``with`` block.
    """
    bind_to_schema(target, args, kwargs)
    graph = scratch if scratch is not None else fx.Graph()
    twin = graph.call_function(target, args, kwargs)
    twin.meta = {k: val for k, val in node.meta.items() if k != "lowering"}
    try:
        yield twin
    finally:
        graph.erase_node(twin)


def import_aten_call(
    ctx: RuleContext, node: fx.Node, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
) -> Any:
    """Lower ``target(*args, **kwargs)`` through torch-mlir where lowered values (Tensors,
    Scalars) stand in the argument slots; errors name ``node``.

    This is how a rule computes an ATen op on values it made itself (a cast input, an
    element count) rather than on the kernel's nodes.
    """
    scratch = fx.Graph()  # short-lived, as lower_aten_op's
    given: dict[fx.Node, Any] = {}

    def stand_in(value: Any) -> Any:
        if isinstance(value, (Tensor, Scalar)):
            placeholder = scratch.placeholder(f"in{len(given)}")
            given[placeholder] = value
            return placeholder
        if isinstance(value, (list, tuple)):
            return type(value)(stand_in(x) for x in value)
        return value

    args, kwargs = stand_in(tuple(args)), {k: stand_in(x) for k, x in (kwargs or {}).items()}
    with twin_node(node, target, args, kwargs, scratch) as twin:
        return import_and_inline(ctx, twin, [given[n] for n in node_inputs(twin)], report_as=node)


def tensor_operand_overload(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The sibling overload taking tensors where ``target`` takes scalars (``lt.Scalar`` ->
    ``lt.Tensor``, ``pow.Scalar`` -> ``pow.Tensor_Tensor``); ``target`` itself when there is
    none. torch-mlir's backends legalize the scalar forms only with constant scalars, and
    tosa not even then; the tensor forms work with every output type."""
    if target in _TENSOR_FORMS:
        return _TENSOR_FORMS[target]
    schema = getattr(target, "_schema", None)
    if schema is None or not any(_is_scalar_type(a.type) for a in schema.arguments):
        return target
    for name in target.overloadpacket.overloads():
        candidate = getattr(target.overloadpacket, name)
        other = candidate._schema
        if other.is_mutable or len(other.arguments) != len(schema.arguments) or len(other.returns) != len(schema.returns):
            continue
        upgrades = 0
        for mine, theirs in zip(schema.arguments, other.arguments):
            if str(mine.type) == str(theirs.type):
                continue
            if _is_scalar_type(mine.type) and isinstance(theirs.type, torch._C.TensorType):
                upgrades += 1
                continue
            break
        else:
            if upgrades:
                return candidate
    return target


# torch-mlir has the bitwise_*_shift tensor forms but not the __*shift__ ones, and its
# linalg lowering of clamp_max.Tensor fails on a dynamic dimension (clamp_max(x, t) is
# minimum(x, t); torch-mlir lowers the latter everywhere). Only integers get here: float
# clamps and extremes are rules.extrema's.
_TENSOR_FORMS = {
    torch.ops.aten.clamp_max.default: torch.ops.aten.minimum.default,
    torch.ops.aten.clamp_max.Tensor: torch.ops.aten.minimum.default,
    torch.ops.aten.__rshift__.Scalar: torch.ops.aten.bitwise_right_shift.Tensor,
    torch.ops.aten.__lshift__.Scalar: torch.ops.aten.bitwise_left_shift.Tensor,
    torch.ops.aten.__rshift__.Tensor: torch.ops.aten.bitwise_right_shift.Tensor,
    torch.ops.aten.__lshift__.Tensor: torch.ops.aten.bitwise_left_shift.Tensor,
}


def _is_scalar_type(t: Any) -> bool:
    return str(t) in ("Scalar", "number", "float", "int")


def _numbers_as_tensors(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any], dict[tuple[str, Any], Any]]:
    """Find numbers (literals or scalar nodes) in tensor-typed slots of the op's schema.

    torch-mlir turns ``add.Tensor(x, 2.0)`` into ``add.Scalar``, which tosa cannot
    legalize with a runtime scalar, and rejects a literal in a tensor slot outright
    (``div.Tensor_mode(x, 3)``). Such numbers become 0-d tensor inputs instead.
    """
    schema = getattr(target, "_schema", None)
    found: dict[tuple[str, Any], Any] = {}
    if schema is None:
        return args, kwargs, found
    for i, spec in enumerate(schema.arguments):
        if not isinstance(spec.type, torch._C.TensorType):
            continue
        slot, value = (("arg", i), args[i]) if i < len(args) else (("kwarg", spec.name), kwargs.get(spec.name))
        is_scalar_node = isinstance(value, fx.Node) and isinstance(
            value.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)
        )
        if is_scalar_node or (isinstance(value, (int, float, bool)) and not isinstance(value, type(None))):
            found[slot] = value
    return args, kwargs, found


def zero_dim_tensor(emit: Emitter, value: Any, partners: list[torch.dtype]) -> Tensor:
    """A lowered number as a 0-d tensor that promotes with ``partners`` as the plain number would."""
    if isinstance(value, Tensor):
        return value
    sample = _scalar_kind(None, value)(0) if isinstance(value, Scalar) else value
    dtype = scalar_tensor_dtype(sample, partners)
    elt = element_type(dtype)
    scalar = emit.convert(value, elt) if isinstance(value, Scalar) else emit.const(value, elt)
    result = Tensor(emit.fresh("t0d"), (), dtype)
    emit.op(f"{result.ssa} = tensor.from_elements {scalar.ssa} : {result.type}")
    return result


def input_values(ctx: RuleContext, node: fx.Node, numbers: dict[fx.Node, Any] | None = None) -> list[Any]:
    """The values of ``node``'s inputs (``numbers``: stand-in nodes for numbers to pass as
    0-d tensors); a reduction over ragged tile dims gets only the in-bounds lanes (exact
    for every reduction, mean and variance included)."""
    inputs = node_inputs(node)
    numbers = numbers or {}
    partners = [x.dtype for x in (ctx.value(n) for n in inputs if n not in numbers) if isinstance(x, Tensor)]
    values = [zero_dim_tensor(ctx.emit, ctx.value(numbers[n]), partners) if n in numbers else ctx.value(n)
              for n in inputs]
    reduced = reduced_dims(node)
    if reduced is None or not inputs or node.args[0] is not inputs[0]:
        return values
    source = ctx.tensor(inputs[0])
    meta = inputs[0].meta.get("val")
    if not isinstance(meta, torch.Tensor) or meta.dim() != source.rank:
        return values
    dims = range(source.rank) if reduced == "all" else [d % max(source.rank, 1) for d in reduced]
    extents: list[Any] = []
    clipped = False
    for d in range(source.rank):
        tile = ctx.tile_of(meta.shape[d])
        if d in dims and tile is not None and tile.ragged and source.shape[d] == tile.size:
            extents.append(tile.extent)
            clipped = True
        else:
            extents.append(source.shape[d] if source.shape[d] is not None else ctx.emit.dim(source, d))
    if clipped:
        values[0] = ctx.emit.slice_prefix(source, extents)
    return values


def reduced_dims(node: fx.Node) -> list[int] | str | None:
    """The dims a reduction op reduces ("all" for every dim), or None if it is not one."""
    spec = _REDUCTIONS.get(node.target)
    if spec is None:
        return None
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if spec == "all" or dims is None or dims == []:
        return "all"
    return [int(d) for d in dims] if isinstance(dims, (list, tuple)) else [int(dims)]


_aten = torch.ops.aten
_REDUCTIONS: dict[Any, str] = {
    op: "dims"
    for op in (
        _aten.sum.dim_IntList, _aten.mean.dim, _aten.amax.default, _aten.amin.default, _aten.max.dim,
        _aten.min.dim, _aten.argmax.default, _aten.argmin.default, _aten.var.correction,
        _aten.var_mean.correction, _aten.std.correction, _aten.prod.dim_int, _aten._softmax.default,
        _aten._log_softmax.default, _aten.logsumexp.default, _aten.any.dim, _aten.all.dim,
    )
} | {op: "all" for op in (_aten.sum.default, _aten.mean.default, _aten.max.default, _aten.min.default, _aten.prod.default)}


def _checked(emit: Emitter, node: fx.Node, result: Any) -> Any:
    """Cast a result to the dtype the node's meta records (in-place ops keep their input dtype)."""
    meta = node.meta.get("val")
    if isinstance(result, Tensor) and isinstance(meta, torch.Tensor) and meta.dtype != result.dtype:
        return emit.cast(result, meta.dtype)
    return result


def import_and_inline(
    ctx: RuleContext, node: fx.Node, input_values: list[Any], *, report_as: fx.Node | None = None
) -> Any:
    """Queue ``node`` for import with the given input values; returns its result value(s).

    ``input_values`` follows :func:`node_inputs` order: Tensors and Scalars become operands,
    Python numbers are baked into the node. The results are named now and defined where
    the op stands once the kernel's ATen ops are lowered together (see
    :mod:`helion_mlir.lowering.deferred_inline`). Errors name ``report_as`` (default: ``node``).
    """
    resolved = list(input_values)
    _reject_packed(node, resolved)
    emit = ctx.emit
    import_inputs: list[Any] = []
    operands: list[str] = []
    for source, value in zip(node_inputs(node), resolved):
        if isinstance(value, Tensor):
            import_inputs.append(TensorSpec(value.shape, value.dtype, dynamic_size_keys(source, value)))
            operands.append(value.ssa)
        elif isinstance(value, Scalar):
            val = source.meta.get("val")
            kind = _scalar_kind(val, value)
            import_inputs.append(val if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) else kind(1))
            operands.append(emit.convert(value, scalar_type_of_python(kind())).ssa)
        elif isinstance(value, (bool, int, float)):
            import_inputs.append(value)
        else:
            raise HelionMLIRError(f"input '{source.name}' has a value torch-mlir cannot take: {value!r}")
    reported = report_as if report_as is not None else node
    raw = ctx.output_type is OutputType.RAW
    queued = ctx.deferred.queue(node, import_inputs, report_as=reported)
    result = _named_results(emit, reported.name, queued.results)
    results = list(result) if isinstance(result, tuple) else [result]

    def bind(returned: list[str]) -> None:
        if len(returned) != len(results):
            raise HelionMLIRError(f"torch-mlir returned {len(returned)} results, expected {len(results)}")
        for name, value in zip(returned, results):
            if raw:  # raw functions return torch types
                emit.op(f"{value.ssa} = torch_c.to_builtin_tensor {name} : {vtensor_type(value)} -> {value.type}")
            elif name != value.ssa:  # a result that could not take its name (see result_names)
                emit.op(f"{value.ssa} = tensor.cast {name} : {value.type} to {value.type}")

    if raw:
        values = [x for x in resolved if isinstance(x, (Tensor, Scalar))]
        operands = [_to_torch(emit, operand, value) for operand, value in zip(operands, values)]
    ctx.deferred.inline_later(queued, operands, result_names=None if raw else [r.ssa for r in results], bind=bind)
    return result


def _reject_packed(node: fx.Node, values: list[Any]) -> None:
    """torch-mlir imports a float4_e2m1fn_x2 tensor of N bytes as N f4 values, not 2N:
    such a value must not reach it."""
    meta = node.meta.get("val")
    dtypes = [x.dtype for x in values if isinstance(x, Tensor)]
    dtypes += [m.dtype for m in (meta if isinstance(meta, (tuple, list)) else [meta]) if isinstance(m, torch.Tensor)]
    packed = sorted({str(d) for d in dtypes if d in PACKED_PAIR_DTYPES})
    if packed:
        raise HelionMLIRError(
            f"ATen ops on {', '.join(packed)} values go through torch-mlir, which imports a packed "
            "tensor with half its values; unpack them with hl.float4_e2m1fn_x2_to_float32 "
            "(or view the bytes as torch.uint8) first"
        )


def dynamic_size_keys(source: fx.Node, value: Tensor) -> tuple[Any, ...]:
    """For each dynamic dim of ``value``, the size expression Helion traced for it: dynamic
    dims of one node's inputs with the same expression have the same size at run time."""
    meta = source.meta.get("val")
    if not isinstance(meta, torch.Tensor) or meta.dim() != value.rank:
        return ()
    return tuple(size.node.expr if d is None and isinstance(size, torch.SymInt) else None
                 for d, size in zip(value.shape, meta.shape))


def vtensor_type(value: Tensor) -> str:
    """The torch dialect's value-tensor type of a builtin tensor value."""
    dims = ",".join("?" if d is None else str(d) for d in value.shape)
    return f"!torch.vtensor<[{dims}],{torch_element_type(value.dtype)}>"


def _to_torch(emit: Emitter, ssa: str, value: Any) -> str:
    """Raw output: torch-dialect functions take torch types; convert a builtin operand."""
    out = emit.fresh("tt")
    if isinstance(value, Tensor):
        emit.op(f"{out} = torch_c.from_builtin_tensor {ssa} : {value.type} -> {vtensor_type(value)}")
        return out
    kind = scalar_type_of_python(_scalar_kind(None, value)())
    emit.op(f"{out} = torch_c.from_{kind} {ssa}")
    return out


def _scalar_kind(val: Any, value: Scalar) -> type:
    if isinstance(val, torch.SymBool) or value.type == "i1":
        return bool
    if isinstance(val, torch.SymFloat) or is_float_type(value.type):
        return float
    return int


def _named_results(emit: Emitter, hint: str, specs: Results) -> Any:
    """Tensor values with fresh names for the op's result(s)."""
    if isinstance(specs, tuple):
        return tuple(_as_value(emit.fresh(f"{hint}_{i}_"), spec) for i, spec in enumerate(specs))
    return _as_value(emit.fresh(hint), specs)


def _as_value(name: str, spec: ResultSpec | None) -> Tensor:
    if spec is None:
        raise HelionMLIRError(f"result {name} of an ATen op is not a tensor")
    return Tensor(name, spec.shape, spec.dtype)
