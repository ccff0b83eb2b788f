"""The ``helion-mlir`` command: lower, run and check Helion kernels from the shell.

Expected failures (bad usage, a kernel that does not lower) print one ``error:`` line, the
helion_mlir message (which names the node and kernel source line) and what to do next;
``--debug`` adds the Python traceback. Exit codes: 0 success, 1 a kernel failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import inspect
import json
import logging
import re
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

import helion

from .batch import KernelCase, KernelResult, check_kernels
from .compiled_kernel import compile_kernel
from .errors import ExecutionError, HelionMLIRError
from .generate import generate_mlir
from .kernel_loading import (
    DTYPES,
    INT_RANGE,
    ArgSpecError,
    KernelFileError,
    describe_args,
    find_kernels,
    load_module,
    make_args,
    parse_args_spec,
    select_kernel,
)
from .reference import reference_kernel, register_cpu_matmul_dtype_overloads
from .lowering_registry import registered_targets, rejected_targets
from .op_catalog import CATALOG
from .op_support import DOC_PATH, measure_op_support, table_cells
from .output_type import OutputType

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

ARGS_HELP = f"""\
--args SPEC: one item per kernel parameter, separated by commas. A tensor is
DTYPE[size,...] (DTYPE one of {' '.join(DTYPES)}; f32[] is 0-d), filled with
seeded random values: floats standard normal, integers in [{INT_RANGE[0]}, {INT_RANGE[1]}), bools either.
A scalar is a number: 2, 1e-5, true. Without --args, the arguments come from the
file's make_args() when it defines one.
--config JSON: helion.Config fields, e.g. '{{"block_sizes": [32, 32]}}' (default: the
kernel's own config).
"""

EMIT_EPILOG = f"""\
examples:
  helion-mlir emit examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir emit kernels.py:rms_norm --args 'f32[64,512], f32[512], 1e-5' -t tosa -o rms_norm.mlir
  helion-mlir emit examples/matmul.py --config '{{"block_sizes": [32, 32, 32]}}'

{ARGS_HELP}"""

RUN_EPILOG = f"""\
examples:
  helion-mlir run examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir run examples/matmul_bf16.py -t stablehlo --atol 0.05

Default tolerance per output dtype: f32/f64 1e-4, bf16/f16 2e-2 (rtol and atol), integers
and bools exact. Arguments the kernel writes are compared too.

{ARGS_HELP}"""

CHECK_EPILOG = """\
examples:
  helion-mlir check examples/
  helion-mlir check examples/ -t linalg -t tosa --run --shape ragged

Every *.py file under the given folders is imported (folders starting with '.' and
__pycache__ are left out). A kernel's arguments come from its module's make_args(SHAPE);
kernels in modules without make_args are skipped. A file that fails to import is a failure.
"""

OPS_EPILOG = """\
example:
  helion-mlir ops

The table comes from docs/op-support.md (kept current by the test suite) when it is there;
--measure (or its absence) measures it afresh, which takes about a minute.
"""

MAIN_EPILOG = """\
examples:
  helion-mlir emit examples/add.py --args 'f32[128,256], f32[128,256]' -t tosa
  helion-mlir run examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir check examples/ --run
  helion-mlir ops

exit codes: 0 success, 1 a kernel failed, 2 bad usage.
Run 'helion-mlir COMMAND --help' for a command's options.
"""

NEXT_FOR_STAGE = {
    "bind": "make --args match what the kernel expects (number of parameters, dtypes, ranks)",
    "lower": "see 'helion-mlir ops' for what lowers to each output type, or try another --output-type",
    "compile": "try another --output-type; if every output type fails, please report it",
    "run": "try another --output-type; if every output type fails, please report it",
    "reference": "check that the kernel runs eagerly on these --args",
}


class CommandError(Exception):
    """An expected failure: printed as an error line, details and a next step; no traceback."""

    def __init__(self, message: str, *, details: str = "", next_step: str = "", code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message, self.details, self.next_step, self.code = message, details, next_step, code


class StageError(Exception):
    """An exception raised while binding, lowering, compiling or running a kernel."""

    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(f"{stage}: {error}")
        self.stage, self.error = stage, error

    @property
    def details(self) -> str:
        """The error's own message; other exceptions (likely bugs) are named by their type."""
        if isinstance(self.error, (HelionMLIRError, helion.exc.Base)):
            return str(self.error)
        return f"{type(self.error).__name__}: {self.error}\n(rerun with --debug to see the traceback)"


@contextlib.contextmanager
def _stage(stage: str) -> Iterator[None]:
    try:
        yield
    except Exception as err:
        raise StageError(stage, err) from err


# ---------------------------------------------------------------------------- parsing


def _output_type(text: str) -> OutputType:
    try:
        return OutputType.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _tolerance_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a non-negative number")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (each ``--help`` ends with examples)."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="helion-mlir", description="Lower Helion kernels to verified MLIR and run them on CPU.",
        epilog=MAIN_EPILOG, formatter_class=raw,
    )
    # -v/--debug are accepted before and after the command. The commands' copies default to
    # SUPPRESS so that they keep what was given before the command (separate action objects:
    # a parser's defaults live on its actions, which `parents` would share).
    common = argparse.ArgumentParser(add_help=False)
    for owner, default in ((parser, False), (common, argparse.SUPPRESS)):
        owner.add_argument("-v", "--verbose", action="store_true", default=default,
                           help="log progress of helion_mlir (INFO) to stderr")
        owner.add_argument("--debug", action="store_true", default=default, help="show Python tracebacks of errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    output_help = f"output type: {', '.join(t.value for t in OutputType)} (linalg for short)"

    def add_kernel_arguments(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("target", metavar="FILE.py[:KERNEL]",
                         help="a Python file and the name of a kernel in it (optional if it defines one)")
        sub.add_argument("--args", metavar="SPEC", help="the kernel's arguments, e.g. 'f32[128,256], 1e-5' (below)")
        sub.add_argument("--config", metavar="JSON", help="helion.Config fields as a JSON object")
        sub.add_argument("-t", "--output-type", type=_output_type, default=OutputType.LINALG_ON_TENSORS,
                         metavar="T", help=output_help + " (default: linalg-on-tensors)")
        sub.add_argument("--seed", type=int, default=0, help="seed of the random tensors (default: 0)")

    def add_tolerance_arguments(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--rtol", type=_tolerance_value, help="relative tolerance for every output")
        sub.add_argument("--atol", type=_tolerance_value, help="absolute tolerance for every output")

    emit = commands.add_parser("emit", help="print the verified MLIR module of a kernel", parents=[common],
                               description="Lower one kernel and print (or write) its verified MLIR module.",
                               epilog=EMIT_EPILOG, formatter_class=raw)
    add_kernel_arguments(emit)
    emit.add_argument("-o", "--output", metavar="OUT", type=Path, help="write the module here instead of stdout")
    emit.set_defaults(handler=_emit)

    run = commands.add_parser("run", help="run a kernel on CPU and compare with Helion's reference mode",
                              parents=[common], epilog=RUN_EPILOG, formatter_class=raw,
                              description="Compile one kernel through MLIR, run it on CPU, and compare its "
                                          "results with Helion's reference mode on the same arguments.")
    add_kernel_arguments(run)
    add_tolerance_arguments(run)
    run.set_defaults(handler=_run)

    check = commands.add_parser("check", help="lower every kernel in files or folders and summarize",
                                parents=[common], epilog=CHECK_EPILOG, formatter_class=raw,
                                description="Lower (and with --run, run) every kernel found and print a table.")
    check.add_argument("paths", nargs="+", metavar="PATH", help="Python files or folders (searched recursively)")
    check.add_argument("-t", "--output-type", type=_output_type, action="append", metavar="T",
                       help=output_help + "; repeat for several (default: linalg-on-tensors)")
    check.add_argument("--run", action="store_true", help="also run each verified kernel and compare with ref mode")
    check.add_argument("--shape", choices=("divisible", "ragged"), default="divisible",
                       help="the shape kind passed to make_args (default: divisible)")
    add_tolerance_arguments(check)
    check.set_defaults(handler=_check)

    ops = commands.add_parser("ops", help="list the node targets and ops that lower, per output type",
                              parents=[common], epilog=OPS_EPILOG, formatter_class=raw,
                              description="Print the node targets with lowering rules and the ATen/prims "
                                          "op x output-type support table.")
    ops.add_argument("--measure", action="store_true", help="measure the table instead of reading the document")
    ops.set_defaults(handler=_ops)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as stop:  # argparse has printed the help or the usage error
        return stop.code if isinstance(stop.code, int) else EXIT_OK if stop.code is None else EXIT_USAGE
    _configure_logging(options.verbose)
    try:
        return options.handler(options)
    except CommandError as err:
        cause = err.__cause__
        if options.debug and cause is not None:
            traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)
        print(f"helion-mlir: error: {err.message}", file=sys.stderr)
        for line in err.details.splitlines():
            print(f"  {line}", file=sys.stderr)
        if err.next_step:
            print(f"  next: {err.next_step}", file=sys.stderr)
        return err.code


_LOG_HANDLER = logging.StreamHandler()
_LOG_HANDLER.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))


def _configure_logging(verbose: bool) -> None:
    logger = logging.getLogger("helion_mlir")
    if verbose:
        _LOG_HANDLER.setStream(sys.stderr)
        logger.addHandler(_LOG_HANDLER)
        logger.setLevel(logging.INFO)
    else:
        logger.removeHandler(_LOG_HANDLER)
        logger.setLevel(logging.NOTSET)


# ---------------------------------------------------------------------- one kernel


@dataclasses.dataclass
class KernelTarget:
    """A kernel picked from a file on the command line, with the arguments to bind it to."""

    path: Path
    name: str
    kernel: helion.Kernel
    args: tuple[Any, ...]
    config: helion.Config | None


def _split_target(target: str) -> tuple[Path, str | None]:
    """``FILE.py:KERNEL`` or ``FILE.py`` (a trailing ``:name`` is a kernel name only if it
    is an identifier, so ``C:\\k.py`` stays a path)."""
    path, sep, name = target.rpartition(":")
    if sep and name.isidentifier():
        return Path(path), name
    return Path(target), None


def _parse_config(text: str | None) -> helion.Config | None:
    if text is None:
        return None
    example = 'e.g. --config \'{"block_sizes": [32, 32]}\''
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as err:
        raise CommandError(f"--config is not valid JSON: {err}", next_step=f"pass a JSON object, {example}") from None
    if not isinstance(fields, dict):
        raise CommandError("--config must be a JSON object of helion.Config fields", next_step=example)
    known = [p.name for p in inspect.signature(helion.Config).parameters.values() if p.kind is p.KEYWORD_ONLY]
    for field in fields:
        if field not in known:
            close = difflib.get_close_matches(field, known, n=1)
            guess = f"; did you mean '{close[0]}'?" if close else ""
            raise CommandError(f"--config: unknown helion.Config field '{field}'{guess}",
                               next_step="fields include block_sizes, loop_orders, reduction_loops, num_threads")
    try:
        return helion.Config(**fields)
    except (TypeError, ValueError) as err:
        raise CommandError(f"--config: {err}", next_step=example) from err


def _load_target(options: argparse.Namespace) -> KernelTarget:
    """Everything ``emit`` and ``run`` need before lowering; usage errors exit with 2."""
    try:
        specs = parse_args_spec(options.args) if options.args is not None else None
    except ArgSpecError as err:
        raise CommandError(f"bad --args: {err}", next_step="write e.g. --args 'f32[128,256], i64[128], 1e-5'") from None
    config = _parse_config(options.config)
    path, name = _split_target(options.target)
    try:
        module = load_module(path)
        name, kernel = select_kernel(module, name, path)
    except KernelFileError as err:
        raise CommandError(str(err), next_step="name an existing file and kernel: FILE.py[:KERNEL]") from err
    if specs is not None:
        args = make_args(specs, options.seed)
    elif callable(getattr(module, "make_args", None)):
        try:
            args = tuple(module.make_args())
        except Exception as err:
            raise CommandError(f"make_args() of {path} failed: {type(err).__name__}: {err}",
                               next_step="pass --args instead") from err
    else:
        raise CommandError(f"no --args given, and {path} defines no make_args()",
                           next_step="pass the kernel's arguments, e.g. --args 'f32[128,256], f32[128,256]'")
    _check_arity(name, kernel, args)
    return KernelTarget(path, name, kernel, args, config)


def _check_arity(name: str, kernel: helion.Kernel, args: tuple[Any, ...]) -> None:
    params = list(inspect.signature(kernel.fn).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) <= len(args) <= len(positional):
        return
    wanted = f"{len(required)} to {len(positional)}" if len(required) != len(positional) else str(len(positional))
    raise CommandError(
        f"kernel '{name}' takes {wanted} arguments ({', '.join(p.name for p in positional)}), "
        f"got {len(args)}: {describe_args(args) or 'none'}",
        next_step="give one --args item per parameter: DTYPE[sizes] for a tensor, a number for a scalar",
    )


def _stage_failure(err: StageError, target: KernelTarget, output_type: OutputType) -> CommandError:
    what = {
        "bind": f"Helion cannot bind kernel '{target.name}' to ({describe_args(target.args)})",
        "lower": f"cannot lower kernel '{target.name}' to {output_type}",
        "compile": f"cannot compile kernel '{target.name}' ({output_type}) for the CPU",
        "run": f"kernel '{target.name}' ({output_type}) failed on the CPU",
        "reference": f"Helion's reference mode failed on kernel '{target.name}'",
    }[err.stage]
    return CommandError(what, details=err.details, next_step=NEXT_FOR_STAGE[err.stage], code=EXIT_FAILED)


def _emit(options: argparse.Namespace) -> int:
    target = _load_target(options)
    try:
        with _stage("bind"):
            bound = target.kernel.bind(target.args)
        with _stage("lower"):
            text = generate_mlir(bound, output_type=options.output_type, config=target.config)
    except StageError as err:
        raise _stage_failure(err, target, options.output_type) from err.error
    if options.output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return EXIT_OK
    try:
        options.output.write_text(text)
    except OSError as err:
        raise CommandError(f"cannot write {options.output}: {err.strerror}", next_step="choose another -o path") from None
    print(f"wrote {options.output} (kernel {target.name}, {options.output_type})", file=sys.stderr)
    return EXIT_OK


# ------------------------------------------------------------ running and comparing


@dataclasses.dataclass
class OutputCheck:
    """One output (returned value or written argument) against the reference."""

    label: str
    shape: str
    max_abs_error: float
    rtol: float
    atol: float
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


@dataclasses.dataclass
class RunOutcome:
    checks: list[OutputCheck]
    emit_seconds: float
    compile_seconds: float
    run_seconds: float
    reference_seconds: float

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def mismatches(self) -> list[OutputCheck]:
        return [check for check in self.checks if not check.ok]


def default_tolerance(dtype: torch.dtype) -> float:
    """rtol and atol for a dtype: the rounding of half-precision floats, exact for integers."""
    if dtype in (torch.float16, torch.bfloat16):
        return 2e-2
    return 1e-4 if dtype.is_floating_point else 0.0


def _clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def run_and_compare(kernel: helion.Kernel, args: tuple[Any, ...], *, output_type: OutputType,
                    config: helion.Config | None = None, rtol: float | None = None,
                    atol: float | None = None) -> RunOutcome:
    """Compile ``kernel`` through MLIR, run it and Helion's reference mode on copies of
    ``args``, and compare what each returns and every argument either one writes.

    Raises :class:`StageError` naming the step that failed.
    """
    with _stage("bind"):
        bound = kernel.bind(args)
    try:
        compiled = compile_kernel(bound, output_type=output_type, config=config)
    except ExecutionError as err:
        raise StageError("compile", err) from err
    except Exception as err:  # compile_kernel lowers first
        raise StageError("lower", err) from err
    mlir_args, ref_args = _clone(args), _clone(args)
    with _stage("run"):
        started = time.perf_counter()
        result = compiled(*mlir_args)
        run_seconds = time.perf_counter() - started
    register_cpu_matmul_dtype_overloads()
    with _stage("reference"):
        started = time.perf_counter()
        expected = reference_kernel(kernel)(*ref_args)
        reference_seconds = time.perf_counter() - started
    pairs = list(_paired_leaves("result", result, expected))
    returned = {id(actual) for _, actual, _ in pairs}
    params = list(inspect.signature(kernel.fn).parameters)
    for name, original, actual, reference in zip(params, args, mlir_args, ref_args):
        if isinstance(original, torch.Tensor) and id(actual) not in returned:
            if not (torch.equal(original, actual) and torch.equal(original, reference)):
                pairs.append((f"argument {name} (written)", actual, reference))
    checks = [_compare(label, actual, reference, rtol, atol) for label, actual, reference in pairs]
    return RunOutcome(checks, compiled.emit_seconds, compiled.compile_seconds, run_seconds, reference_seconds)


def _paired_leaves(label: str, actual: Any, expected: Any) -> Iterator[tuple[str, Any, Any]]:
    """Matching leaves of two results (tuples and lists are walked together; None skipped)."""
    if isinstance(actual, (tuple, list)) and isinstance(expected, (tuple, list)) and len(actual) == len(expected):
        for index, (a, e) in enumerate(zip(actual, expected)):
            yield from _paired_leaves(f"{label}[{index}]", a, e)
    elif actual is not None or expected is not None:
        yield label, actual, expected


def _compare(label: str, actual: Any, expected: Any, rtol: float | None, atol: float | None) -> OutputCheck:
    numbers = (bool, int, float)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        actual, expected = torch.tensor(actual), torch.tensor(expected)
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)):
        return OutputCheck(label, "-", float("nan"), 0.0, 0.0,
                           f"got {type(actual).__name__}, the reference returned {type(expected).__name__}")
    shape = describe_args((expected,))
    default = default_tolerance(expected.dtype)
    rt, at = default if rtol is None else rtol, default if atol is None else atol
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return OutputCheck(label, shape, float("nan"), rt, at, f"got {describe_args((actual,))}")
    a, e = actual.double(), expected.double()
    same = (a == e) | (a.isnan() & e.isnan())
    error = torch.where(same, 0.0, (a - e).abs())
    max_abs_error = error.max().item() if error.numel() else 0.0
    within = bool(torch.isclose(a, e, rtol=rt, atol=at, equal_nan=True).all())
    return OutputCheck(label, shape, max_abs_error, rt, at, "" if within else "beyond tolerance")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _run(options: argparse.Namespace) -> int:
    target = _load_target(options)
    print(f"kernel {target.name} ({target.path}), output type {options.output_type}")
    print(f"args: {describe_args(target.args)}")
    try:
        outcome = run_and_compare(target.kernel, target.args, output_type=options.output_type,
                                  config=target.config, rtol=options.rtol, atol=options.atol)
    except StageError as err:
        raise _stage_failure(err, target, options.output_type) from err.error
    rows = [
        (c.label, c.shape, f"{c.max_abs_error:.3g}", f"rtol={c.rtol:g} atol={c.atol:g}",
         "ok" if c.ok else f"MISMATCH: {c.problem}")
        for c in outcome.checks
    ]
    print(_table(("output", "shape", "max abs error", "tolerance", ""), rows))
    print(f"times: emit {_ms(outcome.emit_seconds)}, compile {_ms(outcome.compile_seconds)}, "
          f"run {_ms(outcome.run_seconds)} (reference mode {_ms(outcome.reference_seconds)})")
    if not outcome.checks:
        print("nothing to compare: the kernel returns nothing and writes no argument")
    elif outcome.ok:
        print(f"match: {len(outcome.checks)} output(s) agree with Helion's reference mode")
    else:
        print(f"mismatch: {len(outcome.mismatches)} of {len(outcome.checks)} output(s) differ from "
              "Helion's reference mode (loosen --rtol/--atol if that is rounding)")
        return EXIT_FAILED
    return EXIT_OK


# ------------------------------------------------------------------------ check


@dataclasses.dataclass
class CheckRow:
    """One line of the ``check`` table."""

    kernel: str
    output_type: str = "-"
    nodes: str = "-"
    emitted: str = "-"
    verified: str = "-"
    matched: str = "-"
    seconds: float = 0.0
    reason: str = ""
    failed: bool = False
    details: str = ""


def _collect_files(paths: Sequence[str]) -> list[tuple[Path, str]]:
    """``(file, label)`` for every Python file under ``paths``, each file once."""
    found: dict[Path, str] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for file in sorted(path.rglob("*.py")):
                parts = file.relative_to(path).parts
                if not any(part.startswith(".") or part == "__pycache__" for part in parts):
                    found.setdefault(file.resolve(), str(file))
        elif path.is_file():
            found.setdefault(path.resolve(), given)
        else:
            raise CommandError(f"no such file or folder: {given}", next_step="pass Python files or folders to check")
    return [(file, label) for file, label in found.items()]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _check(options: argparse.Namespace) -> int:
    output_types = options.output_type or [OutputType.LINALG_ON_TENSORS]
    entries: list[CheckRow | KernelCase] = []
    for file, label in _collect_files(options.paths):
        try:
            module = load_module(file)
        except KernelFileError as err:
            cause = err.__cause__
            reason = f"import failed: {type(cause).__name__}: {cause}"
            entries.append(CheckRow(label, reason=_first_line(reason), failed=True, details=reason))
            _show_traceback(cause, options.debug)
            continue
        make = getattr(module, "make_args", None)
        for name, kernel in find_kernels(module).items():
            kernel_label = f"{label}:{name}"
            if not callable(make):
                entries.append(CheckRow(kernel_label, reason="skipped: no example args (define make_args)"))
                continue
            try:
                args = tuple(make(options.shape))
            except Exception as err:
                reason = f"make_args({options.shape!r}) failed: {type(err).__name__}: {err}"
                entries.append(CheckRow(kernel_label, reason=_first_line(reason), failed=True, details=reason))
                _show_traceback(err, options.debug)
                continue
            entries.append(KernelCase(kernel_label, kernel, args))
    if not entries:
        raise CommandError(f"no Python files with helion kernels in {' '.join(options.paths)}",
                           next_step="pass files or folders that define @helion.kernel functions")

    cases = {entry.label: entry for entry in entries if isinstance(entry, KernelCase)}
    runs: dict[tuple[str, str], RunOutcome | StageError] = {}

    def run_verified(result: KernelResult) -> None:
        if not (options.run and result.ok):
            return
        case = cases[result.label]
        try:
            runs[(result.label, result.output_type)] = run_and_compare(
                case.kernel, case.args, output_type=OutputType.parse(result.output_type),
                rtol=options.rtol, atol=options.atol)
        except StageError as err:
            runs[(result.label, result.output_type)] = err
            _show_traceback(err.error, options.debug)

    report = check_kernels(list(cases.values()), output_types, progress=sys.stderr, on_result=run_verified)
    results: dict[str, list[KernelResult]] = {}
    for result in report.results:
        results.setdefault(result.label, []).append(result)
    rows: list[CheckRow] = []
    for entry in entries:
        if isinstance(entry, CheckRow):
            rows.append(entry)
        else:
            rows += [_result_row(r, runs.get((r.label, r.output_type))) for r in results[entry.label]]
    _print_check_report(rows, options.run)
    return EXIT_FAILED if any(row.failed for row in rows) else EXIT_OK


def _show_traceback(error: BaseException | None, debug: bool) -> None:
    if debug and error is not None:
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)


def _result_row(result: KernelResult, run: RunOutcome | StageError | None) -> CheckRow:
    emitted = result.status != "emit-failed"
    row = CheckRow(result.label, result.output_type, str(result.nodes) if result.nodes else "-",
                   "yes" if emitted else "no", ("yes" if result.ok else "no") if emitted else "-",
                   seconds=result.seconds, reason=_first_line(result.reason), failed=not result.ok,
                   details=result.reason)
    if isinstance(run, StageError):
        row.matched, row.failed = "no", True
        row.reason, row.details = f"{run.stage} failed: {_first_line(run.details)}", run.details
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


def _print_check_report(rows: list[CheckRow], ran: bool) -> None:
    header = ["kernel", "output type", "nodes", "emitted", "verified"] + (["matched"] if ran else []) + ["ms", "reason"]
    lines = []
    for row in rows:
        cells = [row.kernel, row.output_type, row.nodes, row.emitted, row.verified]
        cells += [row.matched] if ran else []
        cells += [f"{row.seconds * 1e3:.0f}" if row.seconds else "-", row.reason]
        lines.append(cells)
    print(_table(header, lines))
    failed = [row for row in rows if row.failed]
    skipped = sum(row.reason.startswith("skipped") for row in rows)
    passed = len(rows) - len(failed) - skipped
    print(f"{len(rows)} checked: {passed} passed, {len(failed)} failed, {skipped} skipped")
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


def _ops(options: argparse.Namespace) -> int:
    groups: dict[str, list[str]] = {}
    for target in registered_targets():
        module, _, name = target.partition(".")
        groups.setdefault(module, []).append(name)
    print("Node targets with a registered lowering rule:")
    for module, names in groups.items():
        print(f"  {module}: {', '.join(names)}")
    print("  ATen/prims ops: via torch-mlir (support per output type below)")
    print("Node targets refused on purpose (UnsupportedNodeError):")
    for target, reason in rejected_targets().items():
        print(f"  {target}: {reason}")
    columns, rows, notes, source = _op_table(options.measure)
    print(f"\nATen/prims ops per output type ({source}):")
    print(_table(["target", *columns], [[name, *(c.replace("<br>", "; ") for c in cells)] for name, cells in rows]))
    if notes:
        print("\nReasons:")
        for number, note in enumerate(notes, start=1):
            print(f"  [{number}] {_unescape_markdown(note)}")
    return EXIT_OK


def _unescape_markdown(text: str) -> str:
    """A reason as op_support writes it into the document, back to plain text."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("\\|", "|")


def _op_table(measure: bool) -> tuple[list[str], list[tuple[str, list[str]]], list[str], str]:
    """(columns, [(target, cells)], reasons, where it came from) of the op support table."""
    if not measure and DOC_PATH.is_file():
        text = DOC_PATH.read_text()
        lines = text.splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("| target |"))
        columns = [c.strip() for c in lines[header].strip("|").split("|")][1:]
        rows = []
        for line in lines[header + 2:]:
            if not line.startswith("|"):
                break
            name, *cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows.append((name.strip("`"), cells))
        notes = re.findall(r"^\d+\. (.*)$", text, re.MULTILINE)
        return columns, rows, notes, f"from {DOC_PATH.name}"
    print("measuring op support (about a minute)...", file=sys.stderr)
    cells, notes = table_cells(measure_op_support())
    columns = [t.value for t in OutputType]
    rows = [(case.name, [cells[(case.name, column)] for column in columns]) for case in CATALOG]
    return columns, rows, notes, "measured now"


# ----------------------------------------------------------------------- tables


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns; the last column is not padded."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = []
    for cells in [header, *rows]:
        padded = [str(cell).ljust(width) for cell, width in zip(cells[:-1], widths)]
        lines.append("  ".join([*padded, str(cells[-1])]).rstrip())
    return "\n".join(lines)

