"""Which kernel a command acts on: ``FILE[:KERNEL]``, its ``--args`` and ``--config``."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import json
from pathlib import Path
from typing import Any

import helion

from ..output_type import OutputType
from .common import EXIT_FAILED, NEXT_FOR_STAGE, CommandError, StageError
from .kernel_loading import (
    ArgSpecError,
    KernelFileError,
    describe_args,
    load_module,
    make_args,
    parse_args_spec,
    select_kernel,
)


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


def load_target(options: argparse.Namespace) -> KernelTarget:
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


def stage_failure(err: StageError, target: KernelTarget, output_type: OutputType) -> CommandError:
    what = {
        "bind": f"Helion cannot bind kernel '{target.name}' to ({describe_args(target.args)})",
        "lower": f"cannot lower kernel '{target.name}' to {output_type}",
        "compile": f"cannot compile kernel '{target.name}' ({output_type}) for the CPU",
        "run": f"kernel '{target.name}' ({output_type}) failed on the CPU",
        "reference": f"Helion's reference mode failed on kernel '{target.name}'",
    }[err.stage]
    return CommandError(what, details=err.details, next_step=NEXT_FOR_STAGE[err.stage], code=EXIT_FAILED)
