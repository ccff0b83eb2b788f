"""Lower single ATen nodes of a Helion kernel to MLIR through torch-mlir.

Each device-IR node that computes with ATen is cut out of its graph into a minimal FX
graph (one placeholder per input, the call, ``getitem`` nodes for tuple results),
imported with torch-mlir's FxImporter into the package's one shared MLIR context, and
lowered with torch-mlir's pipelines to the requested :class:`OutputType`. The result is
the text of a module holding exactly one ``func.func``, printed with debug info so every
op carries a ``loc(...)`` that the inliner later replaces with the kernel's location.

Calling convention (shared with the inliner). ``input_tensors`` has one entry per
:func:`~helion_mlir.importer.normalize.node_inputs` entry, in that order:

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

import logging
from collections.abc import Sequence

from torch import fx
from torch_mlir import ir

from ..errors import NodeNormalizationError, UnsupportedNodeError
from ..front_end_lock import under_front_end_lock
from ..mlir_context import mlir_session
from ..output_type import OutputType
from .batch_lowering import BatchLowering, Pending, function_name
from .cache import (
    IMPORT_CACHE,
    Failure,
    Imported,
    ImportStats,
    Results,
    ResultSpec,
    clear_import_cache,
    import_stats,
    keep,
    load_kept,
    signature,
)
from .graphs import NoDecomposition, build_recipe, result_specs
from .normalize import (
    node_inputs,
    normalize_helion_node,
)
from .rewrites import is_helion_full, is_helion_target
from .input_values import (
    InputValue,
    TensorSpec,
    check_input_values,
    default_input_values,
    tensors_for_specs,
)

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


class TorchMLIRLoweringError(UnsupportedNodeError):
    """torch-mlir cannot import or lower a node for an output type.

    ``summary`` is torch-mlir's one-line complaint (no IR, no addresses), which
    docs/op-support.md quotes; ``diagnostics`` holds its full diagnostics.
    """

    def __init__(self, node: fx.Node, failure: Failure, output_type: OutputType) -> None:
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
        :func:`~helion_mlir.importer.normalize.node_inputs` order; its results are the node's
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
        if is_helion_target(node.target) and not is_helion_full(node.target):
            raise UnsupportedNodeError(
                node,
                "it is a Helion op, not an ATen op",
                output_type=self.output_type.value,
                hint="Helion ops (load, store, loops, ...) are converted by the converter itself",
            )
        if input_tensors is None:
            if "val" not in node.meta:
                normalize_helion_node(node)  # raises the NodeNormalizationError that explains it
            values = default_input_values(node)
            own_values = True
        else:
            values = check_input_values(node, input_tensors)
            own_values = all(v is inp.meta.get("val") for v, inp in zip(values, node_inputs(node)))
        return signature(node, values, self.output_type), own_values, values


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
        self._results: list[Imported | Failure | None] = []
        self._reported: list[fx.Node] = []
        self._keys: list[tuple] = []
        self._misses: dict[tuple, Pending] = {}

    def __len__(self) -> int:
        return len(self._results)

    @under_front_end_lock  # fake tensors of the node's kernel, shared with other threads
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
            IMPORT_CACHE.count_hit()
            self._misses[key].requesters.append(position)
            found = None
        else:
            found = IMPORT_CACHE.lookup(key)
            if found is None and (found := load_kept(key)) is not None:
                IMPORT_CACHE.store(key, found)
            if found is None:  # a miss: its graph is built now (this may raise for bad input)
                entry = Pending(key, None, function_name(node.target), requesters=[position])
                with mlir_session() as (ctx, _diagnostics), ir.Location.unknown(ctx):
                    try:
                        entry.recipe = build_recipe(node, tensors_for_specs(values), own_values, ctx)
                        entry.results = result_specs(entry.recipe.graph)
                    except NoDecomposition as err:
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
            if isinstance(entry.result, Failure):
                raise TorchMLIRLoweringError(self._reported[position], entry.result, self.output_type)
            return entry.results
        if isinstance(found, Failure):
            raise TorchMLIRLoweringError(self._reported[position], found, self.output_type)
        return found.results

    @under_front_end_lock  # FxImporter and decompositions compute with fake tensors too
    def run(self) -> list[str]:
        """Module texts of all requests, in order; lowers every miss with one pipeline run.

        The misses are cached (failures too) even when some fail; then the
        :class:`UnsupportedNodeError` of the first failing request is raised.
        """
        if self._misses:
            with mlir_session() as (ctx, _diagnostics), ir.Location.unknown(ctx):
                BatchLowering(self.output_type, ctx).run(list(self._misses.values()))
            lowered = []
            for entry in self._misses.values():
                assert entry.result is not None
                stored = entry.result if isinstance(entry.result, Failure) else Imported(entry.result, entry.results)
                IMPORT_CACHE.store(entry.key, stored)
                if isinstance(stored, Imported):
                    lowered.append((entry.key, stored))
                for position in entry.requesters:
                    self._results[position] = stored
            keep(lowered)
            self._misses = {}
        texts: list[str] = []
        for position, result in enumerate(self._results):
            if isinstance(result, Failure):
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
