"""The config a search caches: its best, unless a user's call of the default config is faster.

Helion's search ranks candidates by their timings in the JIT worker, which time the
device function alone (its outputs allocated afresh each call, as the kernel's host code
allocates them). Before its result is cached, :func:`settle` times the search's best config
and Helion's default config as a user calls the kernel: compiled in this process
(``compile_kernel``, the code the user's calls then run), through the kernel's host code,
each call allocating its own outputs, sampled round-robin (:func:`.timing.interleave`).
When the default config is the faster of the two, the default is cached instead: a search
never replaces the default with a config whose calls are slower. Other callables (torch
eager, another config) can be timed beside them in the same rounds, so that one set of
numbers is reported for all (``helion-mlir tune``).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from helion.runtime.config import Config

from ...output_type import OutputType
from ..kernel.compiled_kernel import compile_kernel
from .timing import fresh_argument_run, interleave

__all__ = ["BEST", "DEFAULT", "SETTLE_BUDGET_MS", "Settlement", "settle"]

#: Labels of the search's best config and of the default config in :attr:`Settlement.times`.
BEST = "tuned"
DEFAULT = "default config"
#: Wall-clock budget of the comparison (at least :data:`.timing.MIN_ROUNDS` rounds are taken).
SETTLE_BUDGET_MS = 2000.0
#: Most rounds of the comparison.
SETTLE_ROUNDS = 1000


@dataclasses.dataclass(frozen=True)
class Settlement:
    """What :func:`settle` measured and chose."""

    config: Config  #: the config to cache
    best: Config  #: the search's best config
    default: Config | None  #: the default config, when it was timed
    times: dict[str, float]  #: median milliseconds of a call, by label (BEST, DEFAULT, others')
    rounds: int  #: calls of each that were timed

    @property
    def default_won(self) -> bool:
        """Whether a call of the default config was the faster (the default is the one to cache)."""
        return self.config != self.best


def settle(bound: Any, args: Sequence[object], best: Config, *, output_type: OutputType,
           default: Config | None, configs: Mapping[str, Config] | None = None,
           references: Mapping[str, Callable[..., object]] | None = None) -> Settlement:
    """Time calls of ``bound`` on ``args`` with ``best`` and ``default`` (None: not timed),
    plus ``configs`` and ``references`` (callables taking the kernel's arguments) under
    their labels, round-robin; the config to cache is ``default`` when it is faster."""
    calls: dict[str, Callable[..., object]] = {BEST: compile_kernel(bound, output_type=output_type, config=best)}
    if default is not None and default != best:
        calls[DEFAULT] = compile_kernel(bound, output_type=output_type, config=default)
    for label, config in (configs or {}).items():
        calls[label] = compile_kernel(bound, output_type=output_type, config=config)
    calls.update(references or {})
    runs = [fresh_argument_run(fn, tuple(args)) for fn in calls.values()]
    samples = interleave([call for call, _ in runs], prepares=[prepare for _, prepare in runs],
                         repeat=SETTLE_ROUNDS, max_total_ms=SETTLE_BUDGET_MS)
    times = {label: statistics.median(s) for label, s in zip(calls, samples)}
    if DEFAULT not in times and default == best:
        times[DEFAULT] = times[BEST]
    chosen = default if default is not None and times.get(DEFAULT, math.inf) < times[BEST] else best
    return Settlement(config=chosen, best=best, default=default, times=times, rounds=min(len(s) for s in samples))
