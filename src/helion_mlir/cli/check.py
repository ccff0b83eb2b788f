"""``helion-mlir check``: emit (and optionally run) every kernel found under some paths, with a report."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import helion

from ..batch import KernelCase, KernelResult, check_kernels
from ..output_type import OutputType
from .common import EXIT_FAILED, EXIT_OK, CommandError, StageError, first_line
from .kernel_loading import KernelFileError, find_kernels, load_module
from .ops import table
from .run import RunOutcome, run_and_compare, run_on_iree_and_compare
from .arguments import argument_makers
from .targets import arguments_option, check_named_arguments, kernel_arguments, missing_arguments_hint


@dataclasses.dataclass
class CheckRow:
    """One line of the ``check`` table."""

    kernel: str
    output_type: str = "-"
    nodes: str = "-"
    emitted: str = "-"
    verified: str = "-"
    matched: str = "-"
    iree: str = "-"
    seconds: float = 0.0
    reason: str = ""
    failed: bool = False
    details: str = ""


# Folders holding other people's code or build output, never the kernels to check.
_SKIPPED_FOLDERS = frozenset({"__pycache__", "site-packages", "dist-packages", "node_modules", "build", "dist"})


def _skipped_folder(folder: Path) -> bool:
    """Hidden folders (``.venv``, ``.git``), installed packages, build output, and virtual
    environments under any name (they hold a ``pyvenv.cfg``)."""
    name = folder.name
    return (name.startswith(".") or name in _SKIPPED_FOLDERS or name.endswith(".egg-info")
            or (folder / "pyvenv.cfg").is_file())


def _collect_files(paths: Sequence[str]) -> list[tuple[Path, str]]:
    """``(file, label)`` for every Python file under ``paths``, each file once.

    Folders are searched recursively, without descending into the folders
    :func:`_skipped_folder` names (importing a virtual environment's packages from their
    sources runs arbitrary code); a path given explicitly is always taken.
    """
    found: dict[Path, str] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for root, folders, files in os.walk(path):
                folders[:] = sorted(f for f in folders if not _skipped_folder(Path(root) / f))
                for name in sorted(f for f in files if f.endswith(".py")):
                    file = Path(root) / name
                    found.setdefault(file.resolve(), str(file))
        elif path.is_file():
            found.setdefault(path.resolve(), given)
        else:
            raise CommandError(f"no such file or folder: {given}", next_step="pass Python files or folders to check")
    return list(found.items())


def _kernel_key(kernel: helion.Kernel) -> tuple[str, str]:
    """The same kernel whether a file defines it or imports it (an import under another
    module name makes a separate object): its source file and qualified name."""
    fn = kernel.fn
    try:
        source = str(Path(inspect.getsourcefile(fn) or "").resolve())
    except TypeError:
        source = ""
    return source, fn.__qualname__


def _collect_kernels(options: argparse.Namespace) -> list[CheckRow | KernelCase]:
    """A case per kernel found with arguments, a row per file or kernel that fails before
    lowering, and a "skipped" row per kernel without arguments (unless another file gives
    that kernel arguments)."""
    entries: list[CheckRow | KernelCase] = []
    checked: set[tuple[str, str]] = set()
    skipped: list[tuple[tuple[str, str], CheckRow]] = []
    found: list[tuple[str, helion.Kernel]] = []
    for file, label in _collect_files(options.paths):
        try:
            module = load_module(file)
        except KernelFileError as err:
            cause = err.__cause__
            reason = f"import failed: {type(cause).__name__}: {cause}"
            entries.append(CheckRow(label, reason=first_line(reason), failed=True, details=reason))
            _show_traceback(cause, options.debug)
            continue
        try:  # a module's __getattr__ may raise anything
            kernels = find_kernels(module)
            with_arguments = {name for name, kernel in kernels.items() if arguments_option(options, name, kernel)
                              or argument_makers(module, kernel, name)}
        except (Exception, SystemExit) as err:
            reason = f"reading the module failed: {type(err).__name__}: {err}"
            entries.append(CheckRow(label, reason=first_line(reason), failed=True, details=reason))
            _show_traceback(err, options.debug)
            continue
        for name, kernel in kernels.items():
            kernel_label = f"{label}:{name}"
            found.append((name, kernel))
            if name not in with_arguments:
                named = f" '{name}: ...'" if len(kernels) > 1 else ""
                reason = f"skipped: no arguments (define {missing_arguments_hint(module, name)}, or pass --args{named})"
                row = CheckRow(kernel_label, reason=reason)
                skipped.append((_kernel_key(kernel), row))
                entries.append(row)
                continue
            try:
                args = kernel_arguments(options, module, kernel, name=name, shape=options.shape, where=label)
            except CommandError as err:
                entries.append(CheckRow(kernel_label, reason=first_line(err.message), failed=True,
                                        details=err.message))
                _show_traceback(err.__cause__, options.debug)
                continue
            checked.add(_kernel_key(kernel))
            entries.append(KernelCase(kernel_label, kernel, args))
    check_named_arguments(options, found, "the files checked")
    checked_elsewhere = {id(row) for key, row in skipped if key in checked}
    return [entry for entry in entries if id(entry) not in checked_elsewhere]


def check_command(options: argparse.Namespace) -> int:
    output_types = [OutputType.parse(t) for t in options.output_type or ["linalg-on-tensors"]]
    entries = _collect_kernels(options)
    if not entries:
        raise CommandError(f"no Python files with helion kernels in {' '.join(options.paths)}",
                           next_step="pass files or folders that define @helion.kernel functions")

    cases = {entry.label: entry for entry in entries if isinstance(entry, KernelCase)}
    runs: dict[tuple[str, str], RunOutcome | StageError] = {}
    iree_runs: dict[tuple[str, str], RunOutcome | StageError] = {}

    def run_verified(result: KernelResult) -> None:
        if not result.ok:
            return
        case = cases[result.label]
        kind = OutputType.parse(result.output_type)
        for wanted, compare, outcomes in ((options.run, run_and_compare, runs),
                                          (options.iree, run_on_iree_and_compare, iree_runs)):
            if not wanted:
                continue
            try:
                outcomes[(result.label, result.output_type)] = compare(
                    case.kernel, case.args, output_type=kind, rtol=options.rtol, atol=options.atol)
            except StageError as err:
                outcomes[(result.label, result.output_type)] = err
                _show_traceback(err.error, options.debug)
            except (Exception, SystemExit) as err:  # comparing what came back: no kernel ends the run
                outcomes[(result.label, result.output_type)] = StageError("compare", err)
                _show_traceback(err, options.debug)

    progress = sys.stderr if sys.stderr.isatty() else None  # a bar drawn into a pipe or file is noise
    report = check_kernels(list(cases.values()), output_types, progress=progress, on_result=run_verified)
    results: dict[str, list[KernelResult]] = {}
    for result in report.results:
        results.setdefault(result.label, []).append(result)
    rows: list[CheckRow] = []
    for entry in entries:
        if isinstance(entry, CheckRow):
            rows.append(entry)
        else:
            for r in results[entry.label]:
                row = _result_row(r, runs.get((r.label, r.output_type)))
                _add_iree_outcome(row, iree_runs.get((r.label, r.output_type)))
                rows.append(row)
    _print_check_report(rows, options.run, options.iree)
    if not cases:
        print("nothing was checked: no kernel has arguments (define make_args(shape) in its file, or "
              "make_args_KERNEL(shape) per kernel in a file with several; or pass --args)")
        return EXIT_FAILED
    return EXIT_FAILED if any(row.failed for row in rows) else EXIT_OK


def _show_traceback(error: BaseException | None, debug: bool) -> None:
    if debug and error is not None:
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)


def _result_row(result: KernelResult, run: RunOutcome | StageError | None) -> CheckRow:
    emitted = result.status != "emit-failed"
    row = CheckRow(result.label, result.output_type, str(result.nodes) if result.nodes else "-",
                   "yes" if emitted else "no", ("yes" if result.ok else "no") if emitted else "-",
                   seconds=result.seconds, reason=first_line(result.reason), failed=not result.ok,
                   details=result.reason)
    if isinstance(run, StageError):
        row.matched, row.failed = "no", True
        failed = "the kernel's host code refused the arguments" if run.stage == "host" else f"{run.stage} failed"
        row.reason, row.details = f"{failed}: {first_line(run.details)}", run.details
    elif isinstance(run, RunOutcome):
        row.seconds += run.compile_seconds + run.run_seconds + run.reference_seconds
        row.matched = "yes" if run.ok else "no"
        if not run.ok:
            row.failed = True
            row.reason = "mismatch: " + ", ".join(
                f"{c.label} max abs error {c.max_abs_error:.3g} (rtol={c.rtol:g} atol={c.atol:g})"
                if c.problem == "beyond tolerance" else f"{c.label} {c.problem}"
                for c in run.mismatches)
    return row


def _add_iree_outcome(row: CheckRow, run: RunOutcome | StageError | None) -> None:
    """Fill the ``iree`` column: IREE compiled, ran and agreed with the JIT, or what failed."""
    if run is None:
        return
    if isinstance(run, RunOutcome):
        row.seconds += run.compile_seconds + run.run_seconds
        row.iree = "yes" if run.ok else "differs"
        problem = "" if run.ok else "IREE differs from the JIT: " + ", ".join(
            f"{c.label} max abs error {c.max_abs_error:.3g}" for c in run.mismatches)
        details = problem
    else:
        row.iree = {"compile": "no compile", "run": "no run", "host": "no run", "jit": "no jit"}.get(
            run.stage, f"no {run.stage}")
        who = "the JIT (IREE's numbers are compared with)" if run.stage == "jit" else f"IREE {run.stage}"
        problem, details = f"{who} failed: {first_line(run.details)}", run.details
    if problem:
        row.failed = True
        row.reason = f"{row.reason}; {problem}" if row.reason else problem
        row.details = f"{row.details}\n{details}" if row.details and row.details != row.reason else details


def _print_check_report(rows: list[CheckRow], ran: bool, iree: bool = False) -> None:
    header = ["kernel", "output type", "nodes", "emitted", "verified"] + (["matched"] if ran else [])
    header += (["iree"] if iree else []) + ["ms", "reason"]
    lines = []
    for row in rows:
        cells = [row.kernel, row.output_type, row.nodes, row.emitted, row.verified]
        cells += [row.matched] if ran else []
        cells += [row.iree] if iree else []
        cells += [f"{row.seconds * 1e3:.0f}" if row.seconds else "-", row.reason]
        lines.append(cells)
    print(table(header, lines))
    failed = [row for row in rows if row.failed]
    skipped = sum(row.reason.startswith("skipped") for row in rows)
    passed = len(rows) - len(failed) - skipped
    print(f"{passed} passed, {len(failed)} failed, {skipped} skipped")
    detailed = [row for row in failed if row.details.strip() != row.reason]
    if detailed:
        print("\nfailures:")
        for row in detailed:
            print(f"{row.kernel} [{row.output_type}]:")
            body = row.details.strip().splitlines()
            for line in body[:12]:
                print(f"  {line}")
            if len(body) > 12:
                print(f"  ... ({len(body) - 12} more lines; rerun the kernel with 'helion-mlir emit')")


# -------------------------------------------------------------------------- ops
