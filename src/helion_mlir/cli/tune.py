"""``helion-mlir tune``: find a kernel's best config for this CPU with Helion's autotuner.

The kernel is tuned as it would be under ``backend="mlir"`` (same search, same on-disk
cache entry). The times printed are one set, measured alike: calls of the kernel with the
tuned config, with the default config (and ``--config``), and of torch eager (the file's
``reference()``, called with the kernel's arguments, when the file defines one), made as a
user makes them (compiled in this process, host code included, outputs allocated by each
call), round-robin. They are the measurement that chose the config cached: a search's best
slower than the default config is not cached, the default is (see
:mod:`helion_mlir.runtime.tuning.settle`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import helion

from ..lowering.kernel_config import resolve_config
from ..output_type import OutputType
from ..runtime.backend.tune import TuneResult, tune
from ..runtime.tuning.settle import BEST, DEFAULT
from .common import EXIT_FAILED, EXIT_OK, CommandError, StageError, bind, stage
from .kernel_loading import load_module
from .targets import KernelTarget, load_target, stage_failure

__all__ = ["tune_command"]

#: Label of the file's ``reference()`` in the times.
EAGER = "torch eager"
#: Label of ``--config`` in the times.
GIVEN = "--config"


def tune_command(options: argparse.Namespace) -> int:
    target = load_target(options)
    output_type = OutputType.parse(options.output_type)
    print(f"kernel {target.name} ({target.path}), output type {output_type}, effort {options.effort}")
    print(f"args: {target.describe_args()}", flush=True)
    if target.config is not None:  # checked before a tuning run, rather than after it
        try:
            bound = bind(target.kernel, target.args)
            with stage("config"):
                resolve_config(bound, target.config)
        except StageError as err:
            raise stage_failure(err, target, output_type) from err.error
    references = _reference(target)
    configs = {GIVEN: target.config} if target.config is not None else {}
    try:
        result = tune(target.kernel, target.args, effort=options.effort, force=options.force, output_type=output_type,
                      configs=configs, references=references)
    except Exception as err:
        raise CommandError(f"tuning kernel '{target.name}' failed", details=StageError("tune", err).details,
                           next_step="check that 'helion-mlir run' runs the kernel on these --args",
                           code=EXIT_FAILED) from err
    if result.from_cache:
        print(f"cached result: nothing compiled or timed ({result.seconds:.1f} s)")
    else:
        problems = [f"{result.failures} did not compile"] if result.failures else []
        if result.dropped:
            problems.append(f"{result.dropped} dropped: their JIT worker died each time they were tried")
        problems_text = f"; {', '.join(problems)}" if problems else ""
        print(f"searched {result.candidates} configs ({result.timed} distinct modules timed{problems_text}) "
              f"in {result.seconds:.1f} s")
    if result.untimed:
        print("nothing was timed within the autotune budget: the default config runs, and is not cached "
              "(a longer HELION_AUTOTUNE_BUDGET_SECONDS tunes the kernel)")
    default = " (the default config)" if result.config == result.default_config else ""
    print(f"best config: {_decorator_config(result.config.minimize(result.bound.config_spec))}{default}")
    _print_times(target, result)
    if not result.untimed:
        print(f"cached in: {result.cache_file}")
    return EXIT_OK


def _reference(target: KernelTarget) -> dict[str, Callable[..., Any]]:
    """The file's ``reference()`` under its label, checked on a copy of the arguments."""
    reference = getattr(load_module(target.path), "reference", None)
    if not callable(reference):
        return {}
    copies = tuple(a.clone() if hasattr(a, "clone") else a for a in target.args)
    try:
        reference(*copies)
    except Exception as err:
        raise CommandError(f"{target.path.name}'s reference() failed on the kernel's arguments: "
                           f"{type(err).__name__}: {err}",
                           next_step="make reference(...) take the kernel's arguments and compute its result, "
                                     "or rename it", code=EXIT_FAILED) from err
    return {EAGER: reference}


def _decorator_config(config: helion.Config) -> str:
    """What to write in ``@helion.kernel(config=...)`` (the fields that differ from the default)."""
    fields = ", ".join(f"{k}={v!r}" for k, v in sorted(config.config.items()))
    return f"helion.Config({fields})"


def _print_times(target: KernelTarget, result: TuneResult) -> None:
    settled = result.settlement
    times = dict(settled.times)
    tuned = times.pop(BEST if result.config == settled.best else DEFAULT)
    head = f"tuned {tuned:.3f} ms" + (" (the default config)" if result.config == settled.default else "")
    parts = [head]
    if settled.default is None:
        parts.append("default config: not timed (it did not run in the search)")
    if settled.default == settled.best:
        times.pop(DEFAULT, None)
    names = {BEST: "the search's best", DEFAULT: "default config"}
    parts += [f"{names.get(label, label)} {ms:.3f} ms ({ms / tuned:.2f}x the tuned time)"
              for label, ms in times.items()]
    if EAGER not in times:
        parts.append(f"torch eager: not timed ({target.path.name} defines no reference(); define reference(...) "
                     "taking the kernel's arguments to time torch eager)")
    print(f"times of a call (median of {settled.rounds} interleaved calls each): " + ", ".join(parts))
    if settled.default_won:
        which, then = (("the cached config", "--force tunes again") if result.from_cache
                       else ("the search's best config", "the default config is cached instead"))
        best = _decorator_config(settled.best.minimize(result.bound.config_spec))
        print(f"note: {which}, {best}, took {settled.times[BEST]:.3f} ms a call and the default config "
              f"{settled.times[DEFAULT]:.3f} ms: {then}")
