"""``helion-mlir run``: compile a kernel, run it on CPU and compare it with Helion's reference mode."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import shlex
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helion
import torch

from ..errors import ExecutionError
from ..output_type import OutputType
from ..runtime.kernel.compiled_kernel import CompiledKernel, compile_kernel
from ..runtime.configs.default_config_hint import suggesting
from ..runtime.kernel.host_code import GENERATED_HOST_CODE
from ..runtime.reference import reference_kernel, register_cpu_matmul_dtype_overloads
from .arguments import describe_value
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CommandError, StageError, bind, stage
from .ops import table
from .targets import load_target, stage_failure

_PACKAGE = Path(__file__).resolve().parents[1]


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


def _compiled(bound: Any, output_type: OutputType, config: helion.Config | None, runtime: str,
              checked: bool = False, device: str | None = None) -> CompiledKernel:
    """The compiled kernel, ready to run: a GPU module whose GPU is missing here fails at the
    ``device`` stage, after it compiled."""
    try:
        compiled = compile_kernel(bound, output_type=output_type, config=config, runtime=runtime, checked=checked,
                                  device=device)
    except helion.exc.InvalidConfig as err:
        raise StageError("config", err) from err
    except ExecutionError as err:
        raise StageError("compile", err) from err
    except Exception as err:  # compile_kernel lowers first
        raise StageError("lower", err) from err
    if compiled.device is not None:
        with stage("device"):
            compiled.function.load()
    return compiled


def run_and_compare(kernel: helion.Kernel, args: tuple[Any, ...], *, output_type: OutputType,
                    config: helion.Config | None = None, rtol: float | None = None,
                    atol: float | None = None, runtime: str = "jit", checked: bool = False,
                    device: str | None = None) -> RunOutcome:
    """Compile ``kernel`` through MLIR (in checked mode with ``checked``), run it (on
    ``runtime``, with IREE for ``device``) and Helion's reference mode on copies of ``args``,
    and compare what each returns and every argument either one writes.

    Raises :class:`StageError` naming the step that failed.
    """
    bound = bind(kernel, args)
    compiled = _compiled(bound, output_type, config, runtime, checked, device)
    mlir_args, ref_args = _clone(args), _clone(args)
    started = time.perf_counter()
    result = _run(compiled, kernel, mlir_args)
    run_seconds = time.perf_counter() - started
    register_cpu_matmul_dtype_overloads()
    with stage("reference"):
        started = time.perf_counter()
        expected = reference_kernel(kernel)(*ref_args)
        reference_seconds = time.perf_counter() - started
    checks = _compare_outputs(kernel, args, (result, mlir_args), (expected, ref_args), rtol, atol)
    return RunOutcome(checks, compiled.emit_seconds, compiled.compile_seconds, run_seconds, reference_seconds)


def run_on_iree_and_compare(kernel: helion.Kernel, args: tuple[Any, ...], *, output_type: OutputType,
                            config: helion.Config | None = None, rtol: float | None = None,
                            atol: float | None = None, device: str | None = None) -> RunOutcome:
    """Run ``kernel`` through IREE (compiled for ``device``, by default this CPU) and through
    the in-process JIT on copies of ``args`` and compare IREE's outputs (returned values and
    written arguments) with the JIT's.

    ``reference_seconds`` of the outcome is the JIT's run time. Raises :class:`StageError`
    naming the step that failed (``lower``, ``compile``, ``device`` and ``run`` are IREE's,
    ``jit`` the JIT's compile or run).
    """
    bound = bind(kernel, args)
    iree = _compiled(bound, output_type, config, "iree", device=device)
    iree_args, our_args = _clone(args), _clone(args)
    started = time.perf_counter()
    result = _run(iree, kernel, iree_args)
    run_seconds = time.perf_counter() - started
    with stage("jit"):
        ours = compile_kernel(bound, output_type=output_type, config=config)
        started = time.perf_counter()
        expected = ours(*our_args)
        our_seconds = time.perf_counter() - started
    checks = _compare_outputs(kernel, args, (result, iree_args), (expected, our_args), rtol, atol)
    return RunOutcome(checks, iree.emit_seconds, iree.compile_seconds, run_seconds, our_seconds)


def _run(compiled: CompiledKernel, kernel: helion.Kernel, args: tuple[Any, ...]) -> Any:
    """Call the compiled kernel; a failure is a ``host`` StageError when the kernel's own host
    code raised it (an assert on shapes, say), a ``run`` one otherwise."""
    try:
        return compiled(*args)
    except Exception as err:
        where = _host_code_origin(err, kernel, compiled)
        raise StageError("run" if where is None else "host", err, where=where or "") from err


def _host_code_origin(error: BaseException, kernel: helion.Kernel, compiled: CompiledKernel) -> str | None:
    """``file:line: code`` where the kernel's host code raised ``error``, or None when the
    error came from the compiled device code or from helion_mlir while host code launched it."""
    source = inspect.getsourcefile(kernel.fn)
    generated = GENERATED_HOST_CODE.split("{")[0]
    raised_at = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == source or frame.filename.startswith(generated):
            raised_at = frame
        elif raised_at is not None and Path(frame.filename).resolve().is_relative_to(_PACKAGE):
            return None  # the host code was launching the device code
    if raised_at is None:
        return None
    if raised_at.filename == source:
        return f"{raised_at.filename}:{raised_at.lineno}: {raised_at.line}"
    lines = compiled.host.source.splitlines()
    line = lines[raised_at.lineno - 1].strip() if raised_at.lineno and raised_at.lineno <= len(lines) else ""
    return f"in the host code Helion generated from {source}: {line}"


def _compare_outputs(kernel: helion.Kernel, args: tuple[Any, ...], actual: tuple[Any, tuple[Any, ...]],
                     expected: tuple[Any, tuple[Any, ...]], rtol: float | None, atol: float | None) -> list[OutputCheck]:
    """Compare two runs' (result, arguments after the run): results, then written arguments."""
    (result, actual_args), (reference, reference_args) = actual, expected
    pairs = list(_paired_leaves("result", result, reference))
    returned = {id(value) for _, value, _ in pairs}
    params = list(inspect.signature(kernel.fn).parameters)
    for name, original, value, want in zip(params, args, actual_args, reference_args):
        if isinstance(original, torch.Tensor) and id(value) not in returned:
            if not (torch.equal(original, value) and torch.equal(original, want)):
                pairs.append((f"argument {name} (written)", value, want))
    return [_compare(label, value, want, rtol, atol) for label, value, want in pairs]


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
    shape = describe_value(expected)
    default = default_tolerance(expected.dtype)
    rt, at = default if rtol is None else rtol, default if atol is None else atol
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return OutputCheck(label, shape, float("nan"), rt, at, f"got {describe_value(actual)}")
    a, e = actual.double(), expected.double()
    same = (a == e) | (a.isnan() & e.isnan())
    error = torch.where(same, 0.0, (a - e).abs())
    max_abs_error = error.max().item() if error.numel() else 0.0
    within = bool(torch.isclose(a, e, rtol=rt, atol=at, equal_nan=True).all())
    return OutputCheck(label, shape, max_abs_error, rt, at, "" if within else "beyond tolerance")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def run_command(options: argparse.Namespace) -> int:
    if options.device is not None and options.runtime != "iree":
        raise CommandError(f"--device {options.device} is a device IREE compiles for",
                           next_step="add --runtime iree", code=EXIT_USAGE)
    target = load_target(options)
    output_type = OutputType.parse(options.output_type)
    checked = ", checked" if options.checked else ""
    device = f" on {options.device}" if options.device else ""
    print(f"kernel {target.name} ({target.path}), output type {output_type}, runtime {options.runtime}{device}"
          f"{checked}")
    print(f"args: {target.describe_args()}")
    # The kernel's arguments as given here (make_args serve tune as they serve run).
    tune = " ".join(["helion-mlir tune", shlex.quote(options.target),
                     *(f"--args {shlex.quote(call.text)}" for call in options.args or ())])
    try:
        with suggesting(tune):
            outcome = run_and_compare(target.kernel, target.args, output_type=output_type,
                                      config=target.config, rtol=options.rtol, atol=options.atol,
                                      runtime=options.runtime, checked=options.checked, device=options.device)
    except StageError as err:
        raise stage_failure(err, target, output_type) from err.error
    rows = [
        (c.label, c.shape, f"{c.max_abs_error:.3g}", f"rtol={c.rtol:g} atol={c.atol:g}",
         "ok" if c.ok else f"MISMATCH: {c.problem}")
        for c in outcome.checks
    ]
    print(table(("output", "shape", "max abs error", "tolerance", ""), rows))
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
