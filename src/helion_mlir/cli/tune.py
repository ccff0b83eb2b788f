"""``helion-mlir tune``: find a kernel's best config for this CPU with Helion's autotuner.

The kernel is tuned as it would be under ``backend="mlir"`` (same search, same on-disk
cache entry), then the tuned config, the baseline config (Helion's default, or
``--config``) and torch eager (the file's ``reference()``, when it has one) are timed
against each other in this process, by the same wall-clock timer the tuner uses.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import helion

from ..lowering.kernel_config import resolve_config
from ..output_type import OutputType
from ..runtime.compiled_kernel import compile_kernel
from ..runtime.tuning.timing import fresh_argument_run, interleave
from ..runtime.tuning.tune import TuneResult, tune
from .common import EXIT_FAILED, EXIT_OK, CommandError, StageError, bind, stage
from .kernel_loading import load_module
from .targets import KernelTarget, load_target, stage_failure

__all__ = ["tune_command"]


#: Wall-clock budget of the final comparison.
COMPARISON_MS = 3000.0


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
    try:
        result = tune(target.kernel, target.args, effort=options.effort, force=options.force, output_type=output_type)
    except Exception as err:
        raise CommandError(f"tuning kernel '{target.name}' failed", details=StageError("tune", err).details,
                           next_step="check that 'helion-mlir run' runs the kernel on these --args",
                           code=EXIT_FAILED) from err
    if result.from_cache:
        print(f"cached result: nothing compiled or timed ({result.seconds:.1f} s)")
    else:
        failed = f", {result.failures} did not compile" if result.failures else ""
        print(f"searched {result.candidates} configs ({result.timed} distinct modules timed{failed}) "
              f"in {result.seconds:.1f} s")
    print(f"best config: {_decorator_config(result.config.minimize(result.bound.config_spec))}")
    _print_comparison(target, result, output_type)
    print(f"cached in: {result.cache_file}")
    return EXIT_OK


def _decorator_config(config: helion.Config) -> str:
    """What to write in ``@helion.kernel(config=...)`` (the fields that differ from the default)."""
    fields = ", ".join(f"{k}={v!r}" for k, v in sorted(config.config.items()))
    return f"helion.Config({fields})"


def _print_comparison(target: KernelTarget, result: TuneResult, output_type: OutputType) -> None:
    baseline_name = "--config" if target.config is not None else "default config"
    baseline = target.config if target.config is not None else result.default_config
    functions: dict[str, Callable[..., Any]] = {}
    try:
        with stage("run"):
            for label, config in (("tuned", result.config), (baseline_name, baseline)):
                functions[label] = compile_kernel(result.bound, output_type=output_type, config=config)
            reference = getattr(load_module(target.path), "reference", None)
            if callable(reference):
                functions["torch eager"] = reference
            runs = [fresh_argument_run(fn, target.args) for fn in functions.values()]
            samples = interleave([call for call, _ in runs], prepares=[prep for _, prep in runs], repeat=1000,
                                 max_total_ms=COMPARISON_MS)
    except StageError as err:
        raise stage_failure(err, target, output_type) from err.error
    times = {label: statistics.median(s) for label, s in zip(functions, samples)}
    tuned = times["tuned"]
    parts = [f"tuned {tuned:.3f} ms"]
    for label, ms in times.items():
        if label != "tuned":
            parts.append(f"{label} {ms:.3f} ms ({ms / tuned:.2f}x the tuned time)")
    if "torch eager" not in times:
        parts.append(f"torch eager: n/a ({target.path.name} defines no reference())")
    print("times: " + ", ".join(parts))
