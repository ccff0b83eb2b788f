"""Importing and lowering a batch of node graphs with one pipeline run, and finding which
entry failed when the run fails (diagnostics carry each entry's index)."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch_mlir import ir
from torch_mlir.dialects import builtin as builtin_dialect
from torch_mlir.extras.fx_importer import FxImporter
from torch_mlir.passmanager import PassManager

from ..errors import HelionMLIRError, describe_target
from ..mlir_context import format_diagnostic, pass_manager
from ..output_type import TORCH_BACKEND_PIPELINE, OutputType
from .bf16_conversions import convert_integers_to_bf16_through_bits
from .cache import IMPORT_CACHE, Failure, Results
from .graphs import NoDecomposition, NodeRecipe, decomposed_graph
from .rewrites import decomposition_for, is_helion_full

log = logging.getLogger(__name__)

aten = torch.ops.aten

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


def _pipelines(output_type: OutputType) -> tuple[PassManager, PassManager | None]:
    """The pass managers of one output type: one run on the batch module, then, if needed,
    one on each function's own module."""
    backend = _pipeline_body(output_type.backend_pipeline)
    if output_type in _ONE_FUNCTION_PER_MODULE:
        return pass_manager(TORCH_BACKEND_PIPELINE), pass_manager(f"builtin.module(builtin.module({backend}))")
    return pass_manager(f"builtin.module({_pipeline_body(TORCH_BACKEND_PIPELINE)},{backend})"), None


def function_name(target: Any) -> str:
    """``aten_add_Tensor``: named after the ATen op, which is part of the cache key."""
    if is_helion_full(target):
        target = aten.full.default
    return re.sub(r"[^A-Za-z0-9_]", "_", describe_target(target))


def _render(diagnostic: Any) -> str:
    """A diagnostic as it would read for the node alone: without its location (batch
    bookkeeping, not the kernel's) and with batch function names ``f__3`` back to ``f``."""
    return _BATCH_SUFFIX.sub(r"\1", format_diagnostic(diagnostic, with_locations=False))


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
class Pending:
    """One cache miss on its way through import and lowering."""

    key: tuple
    recipe: NodeRecipe | None
    func_name: str
    result: str | Failure | None = None
    results: Results = None
    requesters: list[int] = field(default_factory=list)


# FxImporter locates ops from a node's stack trace; a batch entry's index disguised as a
# line of this file tells which entry an error belongs to.
_BATCH_FILE = "helion-mlir-batch-entry"
_BATCH_LOCATION = re.compile(re.escape(f'"{_BATCH_FILE}"') + r":(\d+):")


class BatchLowering:
    """Imports node graphs into one module and lowers them with one pipeline run.

    When the run fails, the batch is imported once more with each entry's ops located at
    its index, which the error diagnostics then name; those entries fail and the others
    run again. Failures no diagnostic pins down fall back to testing groups. Entries
    that fail to lower get one more try through an exact decomposition.
    """

    def __init__(self, output_type: OutputType, ctx: ir.Context) -> None:
        self.output_type = output_type
        self.ctx = ctx

    def run(self, entries: list[Pending], *, retry_decomposed: bool = True) -> None:
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

    def _import(self, entries: list[Pending], *, tag: bool) -> tuple[ir.Module, list[Pending]]:
        """One module with a function ``<name>__<i>`` per importable entry (others fail)."""
        module = ir.Module.create()
        importer = FxImporter(module=module, config_check=False)
        imported: list[Pending] = []
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
                entry.result = Failure(
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
            IMPORT_CACHE.count_lowering_run()
            flat, per_function = _pipelines(self.output_type)
            flat.run(module.operation)
            if per_function is not None:
                for func in list(module.body.operations):
                    with ir.InsertionPoint(module.body):
                        holder = builtin_dialect.ModuleOp()
                    holder.body.append(func)
                per_function.run(module.operation)
        except ir.MLIRError as err:
            return list(err.error_diagnostics) or [_PlainDiagnostic(str(err))]
        return None

    def _locate_failures(self, entries: list[Pending]) -> set[Pending]:
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

    def _test_groups(self, entries: list[Pending]) -> None:
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

    def _lower_group(self, group: list[Pending]) -> bool:
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

    def _lowering_failure(self, rendered: list[str]) -> Failure:
        summary = _summary(rendered, "pass pipeline failed")
        return Failure(
            reason=f"torch-mlir cannot lower it to {self.output_type.value} ({summary})",
            summary=summary,
            diagnostics=tuple(rendered),
            hint=f"docs/op-support.md lists what lowers to {self.output_type.value}",
        )

    def _retry_decomposed(self, entries: list[Pending]) -> None:
        """Give entries that failed to lower one more try through an exact decomposition."""
        retries: list[tuple[Pending, Pending]] = []
        for entry in entries:
            recipe = entry.recipe
            if not isinstance(entry.result, Failure) or recipe is None or recipe.decomposed:
                continue
            if decomposition_for(recipe.call[0]) is None:
                continue
            try:
                graph = decomposed_graph(recipe.node, recipe.call, recipe.fake_of, recipe.mode, self.ctx)
            except NoDecomposition:
                continue
            decomposed = NodeRecipe(recipe.node, recipe.call, recipe.fake_of, recipe.mode, graph, True)
            retries.append((entry, Pending(entry.key, decomposed, entry.func_name)))
        if not retries:
            return
        self.run([retry for _, retry in retries], retry_decomposed=False)
        for entry, retry in retries:
            if isinstance(retry.result, str):
                log.debug("node %s lowered through its decomposition", entry.recipe.node.name)
                entry.result = retry.result

    def _split(self, module: ir.Module, imported: list[Pending]) -> None:
        """Give each entry the text of a module of its own.

        Printing a top-level module (not an op nested in the batch) is what prints the
        ``#map`` aliases and ``dense_resource`` blobs the function uses.
        """
        if self.output_type is OutputType.STABLEHLO:
            _state_broadcast_expansion(module.operation)
        convert_integers_to_bf16_through_bits(module.operation)
        if self.output_type in _ONE_FUNCTION_PER_MODULE:
            holders = [op.operation for op in module.body.operations]
            for index, (entry, holder) in enumerate(zip(imported, holders)):
                (func,) = [op.operation for op in holder.regions[0].blocks[0].operations]
                _rename(func, _batch_name(entry, index), entry.func_name)
                entry.result = _print(holder.clone(), self.output_type)
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
            entry.result = _print(single.operation, self.output_type)


def _batch_name(entry: Pending, index: int) -> str:
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


def _state_broadcast_expansion(module: ir.Operation) -> None:
    """Say which dimensions each ``stablehlo.dynamic_broadcast_in_dim`` expands.

    torch-mlir leaves ``known_expanding_dimensions`` and ``known_nonexpanding_dimensions``
    out, so a consumer must expect any operand dimension to be 1 at run time; IREE cannot
    lower the op then. Under torch's rules for symbolic sizes (a dynamic size is never 1:
    sizes 0 and 1 are specialized), only a static 1 broadcast to another size expands.
    """
    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "stablehlo.dynamic_broadcast_in_dim" and "known_expanding_dimensions" not in op.attributes:
            source = ir.RankedTensorType(op.operands[0].type).shape
            result = ir.RankedTensorType(op.results[0].type).shape
            targets = ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"])
            expands = [source[i] == 1 and result[d] != 1 for i, d in enumerate(targets)]
            op.attributes["known_expanding_dimensions"] = ir.DenseI64ArrayAttr.get(
                [i for i, e in enumerate(expands) if e])
            op.attributes["known_nonexpanding_dimensions"] = ir.DenseI64ArrayAttr.get(
                [i for i, e in enumerate(expands) if not e])
        return ir.WalkResult.ADVANCE

    module.walk(visit)


def _print(op: ir.Operation, output_type: OutputType) -> str:
    """The text of a lowered module; tosa in MLIR's generic op form.

    The custom syntax of TOSA ops changes between MLIR releases (IREE 3.13's MLIR reads
    ``tosa.reduce_sum %x axis(1)`` where torch-mlir's prints ``{axis = 1 : i32}``); the
    generic form of the same ops reads the same in both.
    """
    # The pipeline verified the IR already; printing would verify it once more.
    return op.get_asm(enable_debug_info=True, assume_verified=True,
                      print_generic_op_form=output_type is OutputType.TOSA)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------
