"""The one runner of the CPU pipelines: it runs a list of steps, names the step that
fails, prints the list, and can write the IR after every step.

Consecutive pass steps run as one pass manager (one parse and one pipeline run for the
lot, cached in :func:`~helion_mlir.mlir_context.pass_manager`). MLIR does not say which
pass of a pipeline failed, so when such a group fails the module is lowered again from
its text with one pass manager per pass, and the error names the pass that fails there.

With a dump folder (``dump_dir``, or the ``HELION_MLIR_DUMP_PIPELINE`` environment
variable), every step runs on its own and the module is written after each one, in the
manner of MLIR's ``--mlir-print-ir-after-all``: ``<dir>/<function>.<pipeline>/`` holds
``00-input.mlir``, then ``NN-<step>.mlir`` per step, each headed
``// -----// IR Dump After <step> //----- //`` (``... Failed`` for a step that failed,
``... (skipped: no <condition>)`` for one whose module condition found nothing to do).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from torch_mlir import ir

from ....errors import HelionMLIRError
from ....mlir_context import format_diagnostic, pass_manager
from ....verify import parse_module
from .module_lowering import ModuleLowering
from .options import Pipeline, PipelineOptions
from .steps import Step, StepKind

__all__ = ["DUMP_ENVIRONMENT_VARIABLE", "describe_steps", "lower_to_llvm", "run_steps"]

log = logging.getLogger(__name__)

#: Environment variable naming a folder to write the IR into after every step.
DUMP_ENVIRONMENT_VARIABLE = "HELION_MLIR_DUMP_PIPELINE"


class _PassGroupFailed(Exception):
    """A pass manager running several passes failed; which pass is not known."""


def lower_to_llvm(
    module_text: str,
    func_name: str,
    pipeline: Pipeline,
    steps: Sequence[Step],
    options: PipelineOptions,
    diagnostics: list[str],
    *,
    dump_dir: Path | None = None,
) -> ModuleLowering:
    """Parse ``module_text`` and run ``steps`` on it for ``@func_name``; the caller holds the
    MLIR session whose diagnostics list is ``diagnostics``."""
    if dump_dir is None and os.environ.get(DUMP_ENVIRONMENT_VARIABLE):
        dump_dir = Path(os.environ[DUMP_ENVIRONMENT_VARIABLE])
    folder = _dump_folder(dump_dir, func_name, pipeline) if dump_dir is not None else None
    try:
        return _lower(module_text, func_name, steps, options, diagnostics, folder, group=folder is None)
    except _PassGroupFailed:
        log.debug("@%s: a group of passes failed; lowering again one pass at a time to name it", func_name)
        return _lower(module_text, func_name, steps, options, diagnostics, folder, group=False)


def _lower(module_text: str, func_name: str, steps: Sequence[Step], options: PipelineOptions,
           diagnostics: list[str], folder: Path | None, *, group: bool) -> ModuleLowering:
    module = parse_module(module_text, what=f"module holding @{func_name}")
    lowering = ModuleLowering(module, func_name, options, diagnostics)
    run_steps(lowering, steps, dump_folder=folder, group=group)
    return lowering


def run_steps(lowering: ModuleLowering, steps: Sequence[Step], *, dump_folder: Path | None = None,
              group: bool = True) -> None:
    """Run the steps that apply to ``lowering.options`` in order, each failure an
    :class:`~helion_mlir.errors.ExecutionError` naming its step."""
    active = [step for step in steps if step.runs_with(lowering.options)]
    if dump_folder is not None:
        _dump(dump_folder / "00-input.mlir", "Before the pipeline", lowering.module)
    done = 0
    for batch in _batches(active, group and dump_folder is None):
        if not batch[0].applies_to(lowering.module):  # nothing in the module for them
            for step in batch:
                done += 1
                if dump_folder is not None:
                    _dump_after(dump_folder, done, step, lowering, skipped=True)
            continue
        try:
            if batch[0].kind is StepKind.PASS:
                _run_passes(lowering, batch)
            else:
                _run_action(lowering, batch[0])
        except HelionMLIRError:
            if dump_folder is not None:
                _dump_after(dump_folder, done + 1, batch[0], lowering, failed=True)
            raise
        done += len(batch)
        if dump_folder is not None:
            _dump_after(dump_folder, done, batch[0], lowering)


def _batches(steps: Sequence[Step], group: bool) -> Iterator[list[Step]]:
    """Steps to run together: runs of consecutive pass steps when grouping, else one by one.
    Passes whose condition reads the module join only passes of the same condition, read once
    right before them."""
    batch: list[Step] = []
    for step in steps:
        joins = group and step.kind is StepKind.PASS and batch and batch[-1].kind is StepKind.PASS \
            and (step.when is batch[-1].when or not (step.depends_on_the_module or batch[-1].depends_on_the_module))
        if batch and not joins:
            yield batch
            batch = []
        batch.append(step)
    if batch:
        yield batch


def _run_passes(lowering: ModuleLowering, batch: Sequence[Step]) -> None:
    texts = [step.pass_text(lowering.options, lowering.func_name) for step in batch]
    already_reported = len(lowering.diagnostics)
    try:
        manager = pass_manager(f"builtin.module({','.join(texts)})")
    except ValueError as err:  # a pass name or option that does not parse
        if len(batch) > 1:
            raise _PassGroupFailed from None
        raise lowering.error("the pass does not parse", [str(err)], pass_name=texts[0]) from None
    try:
        manager.run(lowering.module.operation)
    except ir.MLIRError as err:
        if len(batch) > 1:
            raise _PassGroupFailed from None
        found = lowering.diagnostics[already_reported:] + [format_diagnostic(d) for d in err.error_diagnostics]
        raise lowering.error("the pass failed", found or [str(err)], pass_name=texts[0]) from None


def _run_action(lowering: ModuleLowering, step: Step) -> None:
    """Run a rewrite or check. An optional rewrite that fails leaves the module as it was
    before it (logged at debug level); a rewrite that leaves IR that does not verify is a
    bug, reported like a failed pass."""
    assert step.action is not None
    already_reported = len(lowering.diagnostics)
    before = lowering.module.operation.clone() if step.optional else None
    try:
        result = step.action(lowering)
    except HelionMLIRError:
        raise
    except Exception as err:  # a rewrite's failure is the step's, not a crash of the caller
        found = lowering.diagnostics[already_reported:]
        if before is None:
            raise lowering.error(f"the rewrite failed: {type(err).__name__}: {err}", found,
                                 pass_name=step.name) from err
        _restore(lowering.module, before)
        del lowering.diagnostics[already_reported:]
        log.debug("@%s: %s skipped, the module left as before it: %s: %s%s", lowering.func_name, step.name,
                  type(err).__name__, err, "".join(f"\n  {d}" for d in found))
        return
    finally:
        if before is not None:
            before.erase()
    if step.kind is StepKind.REWRITE:
        _verify_after(lowering, step, already_reported)
    if result is not None:  # what a rewrite counted: loops made parallel, ops vectorized, ...
        log.debug("@%s: %s -> %s", lowering.func_name, step.name, result)


def _verify_after(lowering: ModuleLowering, step: Step, already_reported: int) -> None:
    """A module a rewrite left that does not verify is the rewrite's bug: an error naming it."""
    try:
        valid = lowering.module.operation.verify()
        found: list[str] = []
    except ir.MLIRError as err:
        valid, found = False, [format_diagnostic(d) for d in err.error_diagnostics]
    if not valid:
        raise lowering.error("the rewrite left a module that does not verify",
                             lowering.diagnostics[already_reported:] + found or ["verifier failed"],
                             pass_name=step.name)


def _restore(module: ir.Module, saved: ir.Operation) -> None:
    """Put the body of ``saved`` (a clone of ``module``'s op) in place of ``module``'s."""
    for op in list(module.body.operations):
        op.erase()
    for op in list(saved.regions[0].blocks[0].operations):
        module.body.append(op)


def _shown(step: Step, options: PipelineOptions, func_name: str | None = None) -> str:
    return step.pass_text(options, func_name) if step.kind is StepKind.PASS else step.name


def describe_steps(pipeline: Pipeline, steps: Sequence[Step], options: PipelineOptions) -> str:
    """The steps that run with ``options``, one a line: number, kind, name, and what a
    rewrite does (with the option a conditional step depends on)."""
    active = [step for step in steps if step.runs_with(options)]
    lines = [f"{pipeline.value} pipeline ({options.describe()}): {len(active)} steps"]
    for number, step in enumerate(active, 1):
        line = f"{number:>4}  {step.kind.value:<7}  {_shown(step, options)}"
        if step.when is not None:
            line += f"  [{step.when.name}]"
        if step.summary:
            line += f"  -- {step.summary}"
        lines.append(line)
    return "\n".join(lines)


def _dump_folder(root: Path, func_name: str, pipeline: Pipeline) -> Path:
    """A new folder for one lowering's dumps: ``<root>/<function>.<pipeline>[.N]``."""
    root.mkdir(parents=True, exist_ok=True)
    base = f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', func_name)}.{pipeline.value}"
    folder, count = root / base, 1
    while folder.exists():
        count += 1
        folder = root / f"{base}.{count}"
    folder.mkdir()
    return folder


def _dump_after(folder: Path, number: int, step: Step, lowering: ModuleLowering, *, failed: bool = False,
                skipped: bool = False) -> None:
    shown = _shown(step, lowering.options, lowering.func_name)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", shown).strip("-")[:80]
    outcome = " Failed" if failed else f" (skipped: no {step.when.name})" if skipped and step.when else ""
    _dump(folder / f"{number:02d}-{slug}.mlir", f"After {shown}{outcome}", lowering.module)


def _dump(path: Path, what: str, module: ir.Module) -> None:
    path.write_text(f"// -----// IR Dump {what} //----- //\n{module}\n")
