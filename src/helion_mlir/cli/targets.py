"""Which kernel a command acts on: ``FILE[:KERNEL]``, its ``--args`` and ``--config``."""

from __future__ import annotations

import argparse
import difflib
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import helion
from helion_mlir_cli.call_syntax import CallArguments

from ..output_type import OutputType
from .arguments import (
    ArgumentsError,
    argument_makers,
    arguments_from_file,
    describe_call,
    describe_parameters,
    evaluate_call,
)
from .common import EXIT_FAILED, EXIT_USAGE, NEXT_FOR_STAGE, CommandError, StageError
from .kernel_loading import KernelFileError, find_kernels, load_module, select_kernel

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
    """The ``--config`` JSON object as a ``helion.Config``. Its fields are checked against
    the kernel when the config is resolved (Helion's aliases such as ``block_size`` and the
    kernel's own tunables are fields too), by Helion's normalization."""
    if text is None:
        return None
    example = 'e.g. --config \'{"block_sizes": [32, 32]}\''
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as err:
        raise CommandError(f"--config is not valid JSON: {err}", next_step=f"pass a JSON object, {example}") from None
    if not isinstance(fields, dict):
        raise CommandError("--config must be a JSON object of helion.Config fields", next_step=example)
    return helion.Config(**fields)


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
        kernels = find_kernels(module)
    except KernelFileError as err:
        raise CommandError(str(err), next_step="name a kernel of the file: FILE.py:KERNEL") from err
    check_named_arguments(options, [(n, k) for n, k in kernels.items()] + [(name, kernel)], str(path))
    args = kernel_arguments(options, module, kernel, name=name, shape=None, where=str(path))
    return KernelTarget(path, name, kernel, args, config)


def _names(name: str, kernel: helion.Kernel) -> tuple[str, ...]:
    """What ``--args 'KERNEL: ...'`` may call a kernel: its name in the file, its function's name."""
    return tuple(dict.fromkeys((name, kernel.fn.__name__)))


def check_named_arguments(options: argparse.Namespace, kernels: Sequence[tuple[str, helion.Kernel]],
                          where: str) -> None:
    """Refuse ``--args 'KERNEL: ...'`` for a kernel none of ``kernels`` is (a typo would
    otherwise leave the kernel it meant on other arguments)."""
    known = {alias for name, kernel in kernels for alias in _names(name, kernel)}
    for call in options.args or ():
        if call.kernel is not None and call.kernel not in known:
            close = difflib.get_close_matches(call.kernel, known, n=1)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            listed = ", ".join(sorted({name for name, _ in kernels})) or "none"
            raise CommandError(f"--args names kernel '{call.kernel}', which is not a kernel of {where}{guess}; "
                               f"kernels there: {listed}", next_step=ARGS_NEXT_STEP)


def arguments_option(options: argparse.Namespace, name: str, kernel: helion.Kernel) -> CallArguments | None:
    """The ``--args`` for this kernel: the one naming it, else the one naming no kernel."""
    given = options.args or ()
    names = _names(name, kernel)
    return next((c for c in given if c.kernel in names), None) or next((c for c in given if c.kernel is None), None)


def kernel_arguments(options: argparse.Namespace, module: ModuleType, kernel: helion.Kernel, *,
                     name: str, shape: str | None, where: str) -> tuple[Any, ...]:
    """The kernel's arguments from ``--args``, else from the file's ``make_args_<kernel>``/
    ``make_args`` (with their ``make_kwargs``)."""
    call = arguments_option(options, name, kernel)
    if call is not None:
        try:
            return evaluate_call(call, kernel, seed=options.seed, namespace=vars(module))
        except ArgumentsError as err:
            raise CommandError(f"bad --args for kernel '{name}': {err}", next_step=ARGS_NEXT_STEP,
                               code=EXIT_USAGE) from err
    makers = argument_makers(module, kernel, name)
    if makers is None:
        raise CommandError(f"kernel {describe_parameters(kernel)} needs arguments: pass --args, or define "
                           f"{missing_arguments_hint(module, name)} in {where}", next_step=ARGS_NEXT_STEP)
    called = f"{makers[0]}({shape!r})" if shape is not None else f"{makers[0]}()"
    try:
        return arguments_from_file(module, kernel, shape, name=name)
    except ArgumentsError as err:
        raise CommandError(f"the arguments of {called} do not fit kernel '{name}': {err}",
                           next_step="fix make_args/make_kwargs, or pass --args") from err
    except (Exception, SystemExit) as err:
        raise CommandError(f"{called} failed: {type(err).__name__}: {err}",
                           next_step="fix make_args/make_kwargs, or pass --args") from err


def missing_arguments_hint(module: ModuleType, name: str) -> str:
    """What a file defines to give a kernel its arguments: ``make_args()``, or in a file with
    several kernels ``make_args_<kernel>()`` for each."""
    return f"make_args_{name}()" if len(find_kernels(module)) > 1 else "make_args()"


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
    return CommandError(what, details=err.details, next_step=NEXT_FOR_STAGE[err.stage], code=code)
