"""Inline a kernel's ATen ops after one torch-mlir pipeline run for all of them.

Lowering ATen nodes one at a time costs a pipeline run each (a few milliseconds, much of
it fixed); one run over every node of a kernel costs about half as much per node. The emitter cannot wait for
an op's text, though: the ops after it use its results. So each ATen op gets its result
names at once, and a :class:`~helion_mlir.inliner.builder.Slot` in the builder where its inlined
body goes once the whole kernel has been visited and its ATen nodes lowered together.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import fx

from ..importer.cache import Results
from ..importer.node_importer import ImportBatch, TorchMLIRNodeImporter
from ..importer.input_values import InputValue
from ..inliner.builder import Slot
from ..inliner.rewrite import inline_torch_mlir_output
from ..output_type import OutputType
from .emitter import Emitter

__all__ = ["DeferredInliner", "QueuedImport"]

log = logging.getLogger(__name__)

# torch-mlir's TOSA form of int64 arithmetic: its operands cast to i32 (TOSA has no 64-bit
# integer arithmetic), the result cast back.
_INT64_NARROWED = re.compile(r"tosa\.cast\b[^\n]*i64>\)? -> tensor<[^>]*i32>")


@dataclass(frozen=True)
class QueuedImport:
    """A node queued for import: where it is in the batch, and what its results are."""

    position: int
    results: Results
    node: fx.Node


@dataclass
class _Job:
    position: int  # of the request in the import batch
    slot: Slot
    operands: list[str]
    location: str | None
    result_names: list[str] | None
    bind: Callable[[list[str]], None]
    node: fx.Node


class DeferredInliner:
    """The ATen imports of one emission: queued in program order, inlined by :meth:`flush`."""

    def __init__(self, importer: TorchMLIRNodeImporter, emit: Emitter) -> None:
        self.importer = importer
        self.emit = emit
        self._batch = ImportBatch(importer)
        self._jobs: list[_Job] = []
        self._warned_narrowing: set[tuple[str, str | None]] = set()  # (target, location)

    def queue(
        self, node: fx.Node, import_inputs: Sequence[InputValue], *, report_as: fx.Node | None = None
    ) -> QueuedImport:
        """Queue ``node`` for import (see :meth:`ImportBatch.add`); its results' shapes and
        dtypes are known at once. Errors name ``report_as`` (default: ``node``)."""
        position = self._batch.add(node, import_inputs, report_as=report_as)
        return QueuedImport(position, self._batch.results(position), report_as if report_as is not None else node)

    def inline_later(
        self,
        queued: QueuedImport,
        operands: Sequence[str],
        *,
        result_names: Sequence[str] | None,
        bind: Callable[[list[str]], None],
    ) -> None:
        """Keep the current place in the builder for a queued node's body.

        At :meth:`flush` the lowered body is inlined there with ``operands`` for the
        function's arguments, the results taking ``result_names`` where they can (see
        :func:`~helion_mlir.inliner.rewrite.inline_torch_mlir_output`); ``bind`` then gets the names
        the results have and emits whatever gives them their final names.
        """
        slot = self.emit.builder.slot()
        names = list(result_names) if result_names is not None else None
        self._jobs.append(_Job(queued.position, slot, list(operands), self.emit.location, names, bind, queued.node))

    def check(self) -> None:
        """Lower what is queued; raise the first queued node's error, if any.

        An emission that fails at some node calls this first, so that an earlier ATen
        node's failure is the one reported.
        """
        self._batch.run()

    def flush(self) -> None:
        """Lower every queued node with one pipeline run and inline each into its slot."""
        if not self._jobs:
            return
        texts = self._batch.run()
        builder, location = self.emit.builder, self.emit.location
        try:
            for job in self._jobs:
                if self.importer.output_type is OutputType.TOSA:
                    self._warn_if_int64_narrowed(job.node, texts[job.position], job.location)
                self.emit.location = job.location
                with builder.filling(job.slot):
                    returned = inline_torch_mlir_output(
                        texts[job.position], job.operands, builder, location=job.location,
                        result_names=job.result_names,
                    )
                    job.bind(returned)
        finally:
            self.emit.location = location
        log.debug("inlined %d ATen ops lowered in one batch", len(self._jobs))
        self._batch = ImportBatch(self.importer)
        self._jobs = []

    def _warn_if_int64_narrowed(self, node: fx.Node, text: str, location: str | None) -> None:
        """Say (once per op and source line) that a TOSA op computes an int64 result in 32 bits.

        torch-mlir's TOSA form of int64 ``add``, ``sub``, ``mul`` and of the divisions built from
        them casts the operands to i32: values beyond 2**31 come out wrong. A conversion to a
        32-bit type narrows on purpose and has no int64 result, so it is not reported.
        """
        val = node.meta.get("val")
        results = val if isinstance(val, (tuple, list)) else (val,)
        if not any(isinstance(r, torch.Tensor) and r.dtype == torch.int64 for r in results):
            return
        if not _INT64_NARROWED.search(text):
            return
        key = (str(node.target), location)
        if key in self._warned_narrowing:
            return
        self._warned_narrowing.add(key)
        log.warning(
            "node '%s' (%s)%s computes an int64 result in 32 bits in tosa (TOSA has no 64-bit integer arithmetic): "
            "values beyond +-2**31 come out wrong; emit linalg-on-tensors or stablehlo for exact int64 arithmetic",
            node.name, node.target, f" at {location}" if location else "",
        )
