"""Which reductions of a kernel's codegen graphs are rolled, and whether they can be lowered
as loops over chunks.

The kernel model asks this when it builds the graphs for a config with
``reduction_loops``: a rolled graph whose reductions cannot be combined across chunks is
built again in persistent form. The loop lowering itself is
:mod:`helion_mlir.lowering.rules.rolled_reductions`, which shares the op tables below.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import sympy
import torch
from helion._compiler.device_ir import ReductionLoopGraphInfo
from helion._compiler.inductor_lowering import (
    FakeGraphLowering,
    PointwiseLowering,
    ReductionLowering,
    _patched_inductor_config,
)
from helion.language import _tracing_ops
from torch import fx
from torch._inductor.virtualized import V

from ..importer.normalize import getitems, nodes_in
from .helion_compat import ORIGINAL_ARGS_KEY, original_args


class Fold(enum.Enum):
    """The Inductor reduction types with an explicit cross-chunk combine (Inductor's names)."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    ANY = "any"
    ARGMAX = "argmax"
    ARGMIN = "argmin"

    @property
    def is_arg(self) -> bool:
        """An arg-reduction: the position of the extreme value, carried with the value."""
        return self in (Fold.ARGMAX, Fold.ARGMIN)


_FOLDS = {fold.value for fold in Fold}
HALF_DTYPES = (torch.float16, torch.bfloat16)


# -- which graphs and nodes are rolled ----------------------------------------------------
def rolled_block_ids(graphs: Sequence[Any]) -> set[int]:
    """Block ids of the reduction loops the graphs call (the rolled reduction dimensions)."""
    called = {int(n.args[0]) for g in graphs for n in g.graph.nodes
              if n.op == "call_function" and n.target is _tracing_ops._for_loop}
    return {bid for gid in called if isinstance(graphs[gid], ReductionLoopGraphInfo)
            for bid in graphs[gid].block_ids}


def rolled_reduction(node: fx.Node, block_ids: Sequence[int]) -> ReductionLowering | None:
    """The lowering of a reduction over one of ``block_ids`` (inside a reduction loop body)."""
    lowering = node.meta.get("lowering")
    if node.op == "call_function" and isinstance(lowering, ReductionLowering) and lowering.block_index in block_ids:
        return lowering
    return None


def needs_inductor_tail(node: fx.Node, blocks: set[int], block_of: Callable[[Any], int | None]) -> bool:
    """A pointwise tail of a multi-buffer lowering (``mean = sum / n``) that its traced form
    cannot compute, so that it is evaluated from its Inductor form (which reads the finished
    reductions): its traced inputs were moved into a reduction loop body, or they are
    chunks of a rolled dimension (``blocks``), where the traced op would reduce one chunk
    (a later loop over the same dimension that uses ``x - x.mean(-1)`` recomputes the mean
    in its body)."""
    lowering = node.meta.get("lowering")
    if not blocks or node.op != "call_function" or not isinstance(lowering, PointwiseLowering):
        return False
    if not node.kwargs.get("_extra_args") and node.target is not _tracing_ops._inductor_lowering_extra:
        return False
    recorded = node.meta.get(ORIGINAL_ARGS_KEY)
    restored = original_args(node)
    if recorded is None or restored is None:
        return True
    traced = nodes_in(restored[1])
    if len(traced) < len(nodes_in(recorded[1])):
        return True
    return any(_is_chunk(source, blocks, block_of) for source in traced)


def _is_chunk(node: fx.Node, blocks: set[int], block_of: Callable[[Any], int | None]) -> bool:
    """Whether ``node`` is a tensor with a dimension over one of ``blocks``."""
    meta = node.meta.get("val")
    return isinstance(meta, torch.Tensor) and any(block_of(size) in blocks for size in meta.shape)


def unsupported_rolled_reduction(graphs: Sequence[Any], block_of: Callable[[Any], int | None],
                                 sizes: Mapping[int, Any]) -> str | None:
    """Why the rolled graphs cannot be lowered as loops (None when they can).

    A reduction kind without a cross-chunk combine, an Inductor op the chunk evaluation
    lacks, a reduction whose input is not chunked (Helion keeps it outside the loop when a
    guard pins the dimension's size), a per-chunk value used after its loop, or a value
    over the whole dimension that a loop body reads as if it were one chunk.
    ``block_of`` maps a dimension size to its block id, ``sizes`` a block id to the
    number of elements of its dimension.
    """
    blocks = rolled_block_ids(graphs)
    for info in graphs:
        for node in info.graph.nodes:
            if node.op == "call_function" and node.target is _tracing_ops._for_loop:
                reason = _unsupported_loop_use(graphs, node, blocks)
                if reason is not None:
                    return reason
            lowering = rolled_reduction(node, list(blocks)) if isinstance(info, ReductionLoopGraphInfo) else None
            if lowering is not None:
                if lowering.reduction_type not in _FOLDS:
                    return f"'{node.name}' is a {lowering.reduction_type} reduction, which has no cross-chunk combine here"
                if not _has_chunked_input(node, lowering.block_index, block_of):
                    return f"the input of '{node.name}' is not computed per chunk"
                data = lowering.buffer.data
                args = (index_symbols(0, len(data.ranges)), index_symbols(len(data.ranges), len(data.reduction_ranges)))
            elif needs_inductor_tail(node, blocks, block_of):
                data = node.meta["lowering"].buffer.data
                args = (index_symbols(0, len(data.ranges)),)
            else:
                continue
            missing = sorted(_ops_used(data.inner_fn, args) - set(UNARY_OPS) - set(BINARY_OPS) - _OTHER_OPS)
            if missing:
                return f"'{node.name}' computes with Inductor ops {', '.join(missing)}, which chunks do not evaluate"
    for info in graphs:
        if not isinstance(info, ReductionLoopGraphInfo):
            continue
        reason = _whole_dimension_input(info, sizes) or _chunk_input(info, block_of)
        if reason is not None:
            return reason
    return None


def _chunk_input(info: ReductionLoopGraphInfo, block_of: Callable[[Any], int | None]) -> str | None:
    """A loop body input over its rolled dimension that another loop computed chunk by chunk
    (the halves of ``hl.split`` in one loop, joined and stored in the next): the body would
    read whichever chunk that loop left last, not its own."""
    for node in info.graph.nodes:
        meta = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(meta, torch.Tensor) and any(block_of(size) in info.block_ids for size in meta.shape):
            return f"'{node.name}' is one chunk of a value another loop computes chunk by chunk"
    return None


def _unsupported_loop_use(graphs: Sequence[Any], loop: fx.Node, blocks: set[int]) -> str | None:
    info = graphs[int(loop.args[0])]
    if not isinstance(info, ReductionLoopGraphInfo):
        return None
    outputs = list(next(n for n in info.graph.nodes if n.op == "output").args[0] or [])
    for index, item in getitems(loop).items():
        out = outputs[index]
        if item.users and not (isinstance(out, fx.Node) and rolled_reduction(out, list(blocks))):
            return f"'{out}' is computed per chunk of a rolled reduction but used after the loop"
    return None


def _whole_dimension_input(info: ReductionLoopGraphInfo, sizes: Mapping[int, Any]) -> str | None:
    """A loop body input that spans its rolled dimension whole. Helion computes a value
    over the dimension that needs no load (``hl.arange(n)``) once, before the loop, and
    hands it to a body where every value over the dimension is one chunk: the body would
    combine all ``n`` lanes with a chunk of them (Helion's own code generator fails there)."""
    whole = {_size_expr(sizes[b]) for b in info.block_ids if b in sizes}
    for node in info.graph.nodes:
        meta = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(meta, torch.Tensor) and any(_size_expr(size) in whole for size in meta.shape):
            return f"'{node.name}' spans the whole rolled dimension but its loop reads it chunk by chunk"
    return None


def _size_expr(size: Any) -> sympy.Expr:
    return size._sympy_() if isinstance(size, torch.SymInt) else sympy.sympify(size)


def _has_chunked_input(node: fx.Node, block_id: int, block_of: Callable[[Any], int | None]) -> bool:
    return any(_is_chunk(source, {block_id}, block_of) for source in inductor_input_nodes(node))


def inductor_input_nodes(node: fx.Node) -> list[fx.Node]:
    """A node's inputs as Helion pairs them with Inductor buffer names (``_extra_deps`` are
    ordering edges, not inputs)."""
    return nodes_in((node.args, {k: a for k, a in node.kwargs.items() if k != "_extra_deps"}))


# -- Inductor inner functions on whole tensors --------------------------------------------
UNARY_OPS: dict[str, tuple[str | None, str | None]] = {
    "neg": ("arith.negf", None),
    "exp": ("math.exp", None),
    "log": ("math.log", None),
    "sqrt": ("math.sqrt", None),
    "rsqrt": ("math.rsqrt", None),
    "abs": ("math.absf", "math.absi"),
}
BINARY_OPS: dict[str, tuple[str, str | None]] = {
    "add": ("arith.addf", "arith.addi"),
    "sub": ("arith.subf", "arith.subi"),
    "mul": ("arith.mulf", "arith.muli"),
    "truediv": ("arith.divf", None),
    "div": ("arith.divf", None),
    "maximum": ("arith.maximumf", "arith.maxsi"),
    "minimum": ("arith.minimumf", "arith.minsi"),
}
_OTHER_OPS = {"load", "index_expr", "constant", "to_dtype", "square", "reciprocal"}


def index_symbols(start: int, count: int) -> list[sympy.Symbol]:
    return [sympy.Symbol(f"i{n}") for n in range(start, start + count)]


class _OpRecorder:
    """An ops handler that only records which ops an inner function calls."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def op(*_args: Any, **_kwargs: Any) -> str:
            self.used.add(name)
            return name

        return op


@contextlib.contextmanager
def inductor_handlers(handler: Any) -> Iterator[None]:
    with _patched_inductor_config(), V.set_graph_handler(FakeGraphLowering()), V.set_ops_handler(handler):
        yield


def _ops_used(inner_fn: Callable[..., Any], args: tuple[Any, ...]) -> set[str]:
    recorder = _OpRecorder()
    with inductor_handlers(recorder):
        inner_fn(*args)
    return recorder.used
