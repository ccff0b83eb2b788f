"""Make Helion device-IR nodes importable by torch-mlir's FxImporter.

The importer derives every MLIR type from node metadata: it reads
``meta["tensor_meta"]`` (a :class:`~torch.fx.passes.shape_prop.TensorMetadata`, accessed
by attribute) and falls back to ``meta["val"]``, which must then be a FakeTensor. A node
with neither silently becomes ``!torch.none`` and only fails much later, far from its
cause. This module checks and completes the metadata up front so that failures name
the node and its kernel source line.

It also fixes the calling convention shared by the importer and the inliner:
:func:`node_inputs`.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx
from torch._prims_common import (
    make_channels_last_strides_for,
    make_contiguous_strides_for,
)
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.passes.shape_prop import TensorMetadata

from ..errors import NodeNormalizationError
from ..front_end_lock import under_front_end_lock

__all__ = [
    "SCALAR_TYPES",
    "STATIC_FAKE_MODE",
    "getitems",
    "graph_outputs",
    "node_inputs",
    "nodes_in",
    "normalize_helion_node",
    "synthesize_tensor_meta",
    "to_fake_tensor",
]

log = logging.getLogger(__name__)

#: Values a node may produce besides tensors; the importer maps them to ``!torch.int``,
#: ``!torch.float`` and ``!torch.bool``.
SCALAR_TYPES: tuple[type, ...] = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)

#: The mode of fake tensors with concrete sizes (no shape environment): real and meta
#: tensors are re-created in it, and decompositions of static nodes are traced in it.
STATIC_FAKE_MODE = FakeTensorMode(allow_non_fake_inputs=True)

_STRIDE_RULES: dict[torch.memory_format, Callable[[Sequence[Any]], Sequence[Any]]] = {
    torch.contiguous_format: make_contiguous_strides_for,
    torch.channels_last: make_channels_last_strides_for,
    torch.channels_last_3d: make_channels_last_strides_for,
}
_RANKS: dict[torch.memory_format, int | None] = {
    torch.contiguous_format: None,
    torch.channels_last: 4,
    torch.channels_last_3d: 5,
}
# Dense strides by (memory format, size expressions): torch builds them with SymInt
# arithmetic (~0.3 ms for symbolic sizes) and the same tile shapes come back again and again.
_DENSE_STRIDES: dict[tuple, tuple] = {}
_DENSE_STRIDES_LIMIT = 4096


def _expr(value: Any) -> Any:
    """An int, or the sympy expression of a symbolic int (compared structurally, no guards)."""
    if isinstance(value, torch.SymInt):
        expr = value.node.expr
        return int(expr) if expr.is_Integer else expr
    return int(value)


def _memory_format(val: torch.Tensor) -> torch.memory_format | None:
    """The memory format ``val`` is known to be dense in, else None (e.g. a permuted view).

    Strides are compared with the dense strides of the format as expressions, so the
    check never guards on (or fails for) unbacked sizes such as Helion's tile sizes. It
    is exact for concrete sizes and may answer None for a symbolic tensor whose strides
    are equal to the dense ones only after simplification.
    """
    sizes = tuple(_expr(d) for d in val.shape)
    strides = tuple(_expr(s) for s in val.stride())
    for memory_format, rank in _RANKS.items():
        if rank is not None and rank != len(sizes):
            continue
        key = (memory_format, sizes)
        dense = _DENSE_STRIDES.get(key)
        if dense is None:
            dense = tuple(_expr(s) for s in _STRIDE_RULES[memory_format](val.shape))
            if len(_DENSE_STRIDES) >= _DENSE_STRIDES_LIMIT:
                _DENSE_STRIDES.clear()
            _DENSE_STRIDES[key] = dense
        # Strides of size-1 dimensions do not matter, as for Tensor.is_contiguous().
        # (Type checks first: comparing a sympy expression with an int sympifies it.)
        if all(
            (type(size) is int and size == 1) or stride is want or (type(stride) is type(want) and stride == want)
            for size, stride, want in zip(sizes, strides, dense)
        ):
            return memory_format
    return None


def synthesize_tensor_meta(val: torch.Tensor) -> dict[str, Any]:
    """The ``tensor_meta`` fields torch-mlir and FX passes read, computed from a tensor value.

    Works for fake tensors with symbolic (even unbacked) sizes without adding guards. The
    keys are those of :class:`~torch.fx.passes.shape_prop.TensorMetadata`, so
    ``TensorMetadata(**synthesize_tensor_meta(v))`` is what goes into a node's meta.
    """
    if not isinstance(val, torch.Tensor):
        raise TypeError(f"synthesize_tensor_meta needs a torch.Tensor, got {type(val).__name__}")
    if val.is_quantized:
        # torch-mlir drops quantization parameters; refuse rather than lower wrongly.
        raise TypeError("quantized tensors are not supported")
    return {
        "shape": val.shape,
        "dtype": val.dtype,
        "requires_grad": val.requires_grad,
        "stride": tuple(val.stride()) if val.layout == torch.strided else (),
        "memory_format": _memory_format(val) if val.layout == torch.strided else None,
        "is_quantized": False,
        "qparams": {},
    }


def to_fake_tensor(val: torch.Tensor, mode: FakeTensorMode = STATIC_FAKE_MODE) -> FakeTensor:
    """``val`` as a FakeTensor: fake tensors are returned as is, real and meta ones
    re-created in ``mode``.

    The importer only accepts fake tensors as values; a real tensor would also pin its
    storage in the node metadata for no benefit.
    """
    if isinstance(val, FakeTensor):
        return val
    if val.is_meta:
        with mode:
            return torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device="cpu")
    return mode.from_tensor(val, static_shapes=True)


def node_inputs(node: fx.Node) -> list[fx.Node]:
    """The distinct FX nodes ``node`` reads, in order of first appearance (args, then kwargs).

    Nested lists, tuples, dicts and slices are searched too. This order is the calling
    convention between the importer and the inliner: the i-th entry of ``input_tensors``
    given to the importer, and the i-th operand the inliner binds, describe this i-th node.
    Helion's bookkeeping keywords count too (``aten.max.dim`` lists its
    ``_inductor_lowering_extra`` node in ``kwargs["_extra_deps"]``), so the convention
    never depends on which keywords an op's schema knows.
    """
    found: dict[fx.Node, None] = {}
    fx.map_arg((node.args, node.kwargs), lambda inp: found.setdefault(inp, None))
    return list(found)


def nodes_in(tree: Any) -> list[fx.Node]:
    """Every FX node in an argument tree (lists, tuples, dicts), repeats included, in order."""
    found: list[fx.Node] = []
    fx.map_arg(tree, found.append)
    return found


def graph_outputs(graph: fx.Graph) -> list[Any]:
    """What a graph returns, as a list (one entry for a single value, none for ``None``)."""
    returned = graph.output_node().args[0]
    if returned is None:
        return []
    return list(returned) if isinstance(returned, (list, tuple)) else [returned]


def getitems(node: fx.Node) -> dict[int, fx.Node]:
    """The ``operator.getitem(node, i)`` users of a multi-result node, by index."""
    return {int(u.args[1]): u for u in node.users if u.op == "call_function" and u.target is operator.getitem}


def _fail(node: fx.Node, reason: str, hint: str) -> NodeNormalizationError:
    return NodeNormalizationError(node, reason, hint=hint)


def _normalized_value(node: fx.Node, val: Any) -> tuple[Any, Any]:
    """(fake value, tensor_meta or None) for one produced value; raises on unsupported kinds."""
    if isinstance(val, torch.Tensor):
        try:
            fake = to_fake_tensor(val)
            return fake, TensorMetadata(**synthesize_tensor_meta(fake))
        except (TypeError, RuntimeError) as err:
            raise _fail(
                node,
                f"cannot describe its tensor value ({err})",
                "only dense, non-quantized tensors can be lowered through torch-mlir",
            ) from err
    if isinstance(val, SCALAR_TYPES):
        return val, None
    raise _fail(
        node,
        f"its value meta['val'] is a {type(val).__name__}, not a tensor, scalar or tuple of tensors",
        "only nodes that compute tensors or scalars (ATen-like ops) can be imported; "
        "control flow and memory ops are handled by the converter itself",
    )


@under_front_end_lock  # fake tensors: the node's own mode and this module's static one
def normalize_helion_node(node: fx.Node) -> fx.Node:
    """Complete ``node.meta`` so torch-mlir's importer can type the node; returns ``node``.

    * ``meta["val"]`` becomes a FakeTensor (real and meta tensors are re-created as fakes);
    * ``meta["tensor_meta"]`` is (re)built from it, element by element for tuple outputs
      such as ``aten.max.dim`` (a tuple of TensorMetadata, as FX's shape propagation
      stores it);
    * scalar results (``aten.sym_size.int``) keep their value and get no tensor_meta.

    Idempotent. Raises :class:`NodeNormalizationError` (naming node, target and source
    line) when the node has no ``val`` or one of a kind torch-mlir cannot type.
    """
    if "val" not in node.meta:
        raise _fail(
            node,
            "it has no meta['val'], so its result type is unknown",
            "import nodes taken from a bound kernel's device IR "
            "(kernel.bind(args).host_function.device_ir), whose nodes carry fake values",
        )
    val = node.meta["val"]
    if isinstance(val, (tuple, list)) and not isinstance(val, torch.Size):
        if not val or not all(isinstance(v, torch.Tensor) for v in val):
            raise _fail(
                node,
                "its value meta['val'] is a sequence that is not a non-empty sequence of tensors",
                "only multi-result ATen ops (e.g. aten.max.dim, aten.var_mean) may produce tuples",
            )
        pairs = [_normalized_value(node, v) for v in val]
        # Keep the container type: a list value (aten.split) types as !torch.list<vtensor>.
        node.meta["val"] = type(val)(fake for fake, _ in pairs)
        node.meta["tensor_meta"] = type(val)(meta for _, meta in pairs)
        return node
    fake, meta = _normalized_value(node, val)
    node.meta["val"] = fake
    if meta is None:
        node.meta.pop("tensor_meta", None)
    else:
        node.meta["tensor_meta"] = meta
    log.debug("normalized node %s", node.name)
    return node
