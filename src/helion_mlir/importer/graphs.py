"""The minimal FX graph of one node: a placeholder per input, the call (rewritten or
decomposed where torch-mlir needs it), ``getitem`` nodes for tuple results, and the result
specs read off it."""

from __future__ import annotations

import contextlib
import logging
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import TensorMetadata
from torch_mlir import ir

from ..errors import NodeNormalizationError, describe_target
from .cache import Failure, Results, ResultSpec
from .normalize import (
    STATIC_FAKE_MODE,
    node_inputs,
    normalize_helion_node,
    synthesize_tensor_meta,
    to_fake_tensor,
)
from .rewrites import (
    aten_call,
    decomposition_for,
    rewritten_before_import,
    scalar_tensor_dtype,
    torch_mlir_has_op,
)
from .input_values import (
    SYMBOLIC_SCALARS,
    InputValue,
    evaluating,
    evaluation_mode,
    placeholder_value,
)

log = logging.getLogger(__name__)

aten = torch.ops.aten

# --------------------------------------------------------------------------------------
# The minimal FX graph of one node
# --------------------------------------------------------------------------------------


def _set_value_meta(node: fx.Node, value: Any) -> None:
    node.meta["val"] = value
    if isinstance(value, torch.Tensor):
        node.meta["tensor_meta"] = TensorMetadata(**synthesize_tensor_meta(value))


@dataclass
class NodeRecipe:
    """Everything needed to (re)build the importable graph of one node."""

    node: fx.Node
    call: tuple[Any, tuple, dict]  # ATen target, args and kwargs over the graph's placeholders
    fake_of: dict[fx.Node, Any]  # placeholder -> its value (meta/fake tensor or SymInt)
    mode: FakeTensorMode | None  # see evaluation_mode
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
            fake = placeholder_value(value, mode)
        elif isinstance(value, SYMBOLIC_SCALARS):
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
        with evaluating(mode):
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
                "helion_mlir.lowering.helion_compat.original_args(node)",
            )


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
        if not isinstance(scalar, SYMBOLIC_SCALARS):
            return value
        dtype = scalar_tensor_dtype(scalar, tensor_dtypes)
        wrapped = graph.create_node(
            "call_function", aten.scalar_tensor.default, (value,), {"dtype": dtype}, name=f"{value.name}_tensor"
        )
        with evaluating(mode):
            values_of[wrapped] = torch.empty((), dtype=dtype)
        _set_value_meta(wrapped, values_of[wrapped])
        return wrapped

    return _map_tensor_arguments(call, wrap)


def build_recipe(node: fx.Node, values: Sequence[InputValue], own_values: bool, ctx: ir.Context) -> NodeRecipe:
    """The minimal importable graph computing ``node`` on ``values``."""
    mode = evaluation_mode(node, values)
    graph, replacement, fake_of = _placeholders_for(node, values, mode)
    args = fx.map_arg(node.args, replacement.__getitem__)
    kwargs = fx.map_arg(node.kwargs, replacement.__getitem__)
    call = aten_call(node.target, tuple(args), dict(kwargs))
    _check_required_tensors(node, call)
    target = call[0]
    operands = fx.map_arg(call[1], lambda p: fake_of.get(p, p))
    if not torch_mlir_has_op(target, ctx) or rewritten_before_import(target, operands):
        decomposed = decomposed_graph(node, call, fake_of, mode, ctx)
        return NodeRecipe(node, call, fake_of, mode, decomposed, True)
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
    return NodeRecipe(node, call, fake_of, mode, graph, False)


def result_specs(graph: fx.Graph) -> Results:
    """What the graph's results are, from the values its output node returns."""

    def spec(value: Any) -> ResultSpec | None:
        if not isinstance(value, torch.Tensor):
            return None
        return ResultSpec(tuple(d if isinstance(d, int) else None for d in value.shape), value.dtype)

    returned = graph.output_node().args[0]
    if isinstance(returned, (tuple, list)):
        return tuple(spec(n.meta.get("val")) for n in returned)
    return spec(returned.meta.get("val"))


def decomposed_graph(
    node: fx.Node,
    call: tuple[Any, tuple, dict],
    fake_of: dict[fx.Node, Any],
    mode: FakeTensorMode | None,
    ctx: ir.Context,
) -> fx.Graph:
    """Trace the call through exact decompositions until only ops torch-mlir knows remain."""

    target, args, kwargs = call
    placeholders = list(fake_of)
    inputs = [fake_of[p] for p in placeholders]
    if mode is None:
        # Trace on fake CPU tensors: meta tensors would put a meta device into the
        # graph wherever a decomposition creates a tensor.
        mode = STATIC_FAKE_MODE
        inputs = [placeholder_value(v, mode) if isinstance(v, torch.Tensor) else v for v in inputs]

    tensor_dtypes = [v.dtype for v in inputs if isinstance(v, torch.Tensor)]

    def as_tensor(value: Any) -> Any:
        if isinstance(value, SYMBOLIC_SCALARS):
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
            decomposition = decomposition_for(op)
            if decomposition is None:
                raise NoDecomposition(
                    f"torch-mlir has no op {describe_target(op)}, and no decomposition of it is known",
                    hint="an exact rewrite in helion_mlir.importer.node_importer._EXACT_REWRITES would add support",
                )
            table[op] = decomposition
        try:
            with mode, _quiet(_FAKE_TENSOR_LOG):
                traced = make_fx(run, decomposition_table=table, tracing_mode="real")(*inputs)
        except Exception as err:  # whatever a decomposition raises for these inputs
            raise NoDecomposition(f"decomposing {describe_target(target)} failed ({type(err).__name__}: {err})") from err
        to_decompose = sorted(
            {n.target for n in traced.graph.nodes if n.op == "call_function" and not torch_mlir_has_op(n.target, ctx)},
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
    raise NoDecomposition(f"decomposing {describe_target(target)} does not reach ops torch-mlir has")


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


class NoDecomposition(Exception):
    """Internal: a node torch-mlir lacks cannot be decomposed; carries the failure to report."""

    def __init__(self, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.failure = Failure(reason=reason, summary=reason, diagnostics=(), hint=hint)
