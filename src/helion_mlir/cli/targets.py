"""Which kernel a command acts on: ``FILE[:KERNEL]``, its ``--args`` and ``--config``."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import helion

from ..errors import INDEX_CHECK_PREFIX, OutOfBoundsAccessError
from ..output_type import OutputType
from .arguments import ArgumentsError, arguments_from_file, describe_call, describe_parameters, evaluate_call
from .common import EXIT_FAILED, EXIT_USAGE, NEXT_FOR_STAGE, CommandError, StageError
from .kernel_loading import KernelFileError, load_module, select_kernel

ARGS_NEXT_STEP = "write the kernel's arguments as in a Python call, e.g. --args 'f32[128,256], eps=1e-5' " \
                 "(the syntax is in --help)"


@dataclasses.dataclass
class KernelTarget:
    """A kernel picked from a file on the command line, with the arguments to bind it to
    (every parameter, in signature order, defaults applied)."""

    path: Path
    name: str
    kernel: helion.Kernel
    args: tuple[Any, ...]
    config: helion.Config | None

    def describe_args(self) -> str:
        return describe_call(self.kernel, self.args)


def _split_target(target: str) -> tuple[Path, str | None]:
    """``FILE.py:KERNEL`` or ``FILE.py`` (a trailing ``:name`` is a kernel name only if it
    is an identifier, so ``C:\\k.py`` stays a path)."""
    path, sep, name = target.rpartition(":")
    if sep and name.isidentifier():
        return Path(path), name
    return Path(target), None


def parse_config(text: str | None) -> helion.Config | None:
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


def load_file(path: Path) -> ModuleType:
    """Import a kernel file; a missing file or one that fails to import is a usage error."""
    if path.is_dir():
        raise CommandError(f"{path} is a folder: this command takes one kernel, FILE.py[:KERNEL]",
                           next_step=f"name a file in it, or check every kernel there: helion-mlir check {path}")
    try:
        return load_module(path)
    except KernelFileError as err:
        missing = not Path(path).is_file()
        raise CommandError(str(err), next_step="name an existing Python file: FILE.py[:KERNEL]" if missing
                           else f"fix the error above in {path} (--debug shows where it was raised)") from err


def load_target(options: argparse.Namespace) -> KernelTarget:
    """Everything ``emit``, ``run`` and ``ops`` need before lowering; usage errors exit with 2."""
    config = parse_config(options.config)
    path, name = _split_target(options.target)
    module = load_file(path)
    try:
        name, kernel = select_kernel(module, name, path)
    except KernelFileError as err:
        raise CommandError(str(err), next_step="name a kernel of the file: FILE.py:KERNEL") from err
    args = kernel_arguments(options, module, kernel, shape=None, where=str(path))
    return KernelTarget(path, name, kernel, args, config)


def kernel_arguments(options: argparse.Namespace, module: ModuleType, kernel: helion.Kernel, *,
                     shape: str | None, where: str) -> tuple[Any, ...]:
    """The kernel's arguments from ``--args``, else from the file's ``make_args``/``make_kwargs``."""
    if options.args is not None:
        try:
            return evaluate_call(options.args, kernel, seed=options.seed, namespace=vars(module))
        except ArgumentsError as err:
            raise CommandError(f"bad --args for kernel '{kernel.fn.__name__}': {err}", next_step=ARGS_NEXT_STEP,
                               code=EXIT_USAGE) from err
    if not callable(getattr(module, "make_args", None)):
        raise CommandError(f"kernel {describe_parameters(kernel)} needs arguments: pass --args, or define "
                           f"make_args() in {where}", next_step=ARGS_NEXT_STEP)
    called = f"make_args({shape!r})" if shape is not None else "make_args()"
    try:
        return arguments_from_file(module, kernel, shape)
    except ArgumentsError as err:
        raise CommandError(f"the arguments of {called} do not fit kernel '{kernel.fn.__name__}': {err}",
                           next_step="fix make_args/make_kwargs, or pass --args") from err
    except (Exception, SystemExit) as err:
        raise CommandError(f"{called} failed: {type(err).__name__}: {err}",
                           next_step="fix make_args/make_kwargs, or pass --args") from err


def stage_failure(err: StageError, target: KernelTarget, output_type: OutputType) -> CommandError:
    what = {
        "bind": f"Helion cannot bind kernel '{target.name}' to ({target.describe_args()})",
        "config": f"--config does not fit kernel '{target.name}'",
        "lower": f"cannot lower kernel '{target.name}' to {output_type}",
        "compile": f"cannot compile kernel '{target.name}' ({output_type}) for the CPU",
        "host": f"kernel '{target.name}' refused these arguments: its host code raised",
        "run": f"kernel '{target.name}' ({output_type}) failed on the CPU",
        "reference": f"Helion's reference mode failed on kernel '{target.name}'",
    }[err.stage]
    code = EXIT_USAGE if err.stage in ("host", "config") else EXIT_FAILED
    next_step = NEXT_FOR_STAGE[err.stage]
    if isinstance(err.error, OutOfBoundsAccessError) and err.error.check.startswith(INDEX_CHECK_PREFIX):
        next_step = "check the index at that line for these --args (the hint says what an unchecked run does)"
    return CommandError(what, details=err.details, next_step=next_step, code=code)
