"""Wall-clock timing of CPU kernels that holds on a shared, noisy machine.

Helion's own timers are made for GPUs (CUDA events, an L2 flush between calls); on a CPU
the wall clock around one call is the measurement. What makes it hold:

* every timed call is preceded by an untimed ``prepare`` (restoring the arguments a kernel
  updates in place, so repetitions do not compound: an accumulation that grows into
  denormals or infinities would time other arithmetic than the real call does);
* warm-up calls first (page faults of fresh outputs, OpenMP workers waking up), then a
  number of samples sized from an estimate of one call, at least :data:`MIN_SAMPLES`;
* garbage collection is paused while samples are taken;
* the summary is a median, so a sample stretched by another process taking the core is
  an outlier that does not move it;
* candidates compared with each other are sampled round-robin (:func:`interleave`),
  alternating the order each round, so that load that comes and goes hits all of them
  alike.

A call that alone takes longer than :data:`LONG_CALL_MS` gets few samples: such a
candidate is far from the best and is abandoned after a rough measurement.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

__all__ = [
    "INTERLEAVED_BUDGET_MS",
    "LONG_CALL_MS",
    "MIN_ROUNDS",
    "MIN_SAMPLES",
    "bitwise",
    "fresh_argument_run",
    "interleave",
    "measure",
    "summarize",
]

#: Fewest timed samples of one candidate (more when the budget allows).
MIN_SAMPLES = 5
#: Most timed samples of one candidate.
MAX_SAMPLES = 2000
#: A call at least this long is timed with :data:`LONG_CALL_SAMPLES` samples only.
LONG_CALL_MS = 250.0
LONG_CALL_SAMPLES = 2
#: Fewest rounds of an interleaved comparison.
MIN_ROUNDS = 5
#: Most wall-clock time an interleaved comparison takes. Helion sizes its final
#: re-timing for GPU launches (seconds per candidate); CPU samples of a candidate spread
#: less, and a few seconds of alternating rounds settle the ranking.
INTERLEAVED_BUDGET_MS = 3000.0

Call = Callable[[], object]
Prepare = Callable[[], None]


def _noop() -> None:
    return None


@contextmanager
def _gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _timed(call: Call, prepare: Prepare) -> float:
    """Milliseconds of one call, after an untimed ``prepare``."""
    prepare()
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


def measure(call: Call, *, prepare: Prepare | None = None, warmup_ms: float = 25.0,
            rep_ms: float = 100.0) -> list[float]:
    """Per-call wall-clock samples (milliseconds) of ``call``.

    ``warmup_ms`` and ``rep_ms`` are budgets, as in Helion's and Triton's ``do_bench``:
    the numbers of warm-up and timed calls are sized from an estimate of one call.
    """
    prepare = prepare or _noop
    with _gc_paused():
        prepare()
        call()  # the first call is never timed: it pays for cold caches and page faults
        estimate = _timed(call, prepare)
        if estimate < 1.0:
            estimate = min(estimate, min(_timed(call, prepare) for _ in range(4)))
        if estimate >= LONG_CALL_MS:
            return [estimate, *(_timed(call, prepare) for _ in range(LONG_CALL_SAMPLES - 1))]
        per_call = max(estimate, 1e-3)
        for _ in range(max(1, min(MAX_SAMPLES, int(warmup_ms / per_call)))):
            prepare()
            call()
        count = max(MIN_SAMPLES, min(MAX_SAMPLES, int(rep_ms / per_call)))
        samples = []
        deadline = time.perf_counter() + 2 * rep_ms / 1e3  # the preparation counts against the budget too
        while len(samples) < count and (len(samples) < MIN_SAMPLES or time.perf_counter() < deadline):
            samples.append(_timed(call, prepare))
        return samples


def interleave(calls: Sequence[Call], *, prepares: Sequence[Prepare | None] | None = None,
               repeat: int = 100, max_total_ms: float | None = None) -> list[list[float]]:
    """Per-call samples of each of ``calls``, taken in rounds that visit every call once.

    At most ``repeat`` rounds, at least :data:`MIN_ROUNDS`, and no more than fit in
    ``max_total_ms`` (capped at :data:`INTERLEAVED_BUDGET_MS`) of wall-clock time, the
    preparation between timed calls included.
    """
    if not calls:
        return []
    preps = [p or _noop for p in (prepares or [None] * len(calls))]
    samples: list[list[float]] = [[] for _ in calls]
    budget_s = min(max_total_ms or INTERLEAVED_BUDGET_MS, INTERLEAVED_BUDGET_MS) / 1e3
    order = list(range(len(calls)))
    with _gc_paused():
        for call, prep in zip(calls, preps):
            prep()
            call()
        started = time.perf_counter()
        for round_index in range(max(repeat, MIN_ROUNDS)):
            if round_index >= MIN_ROUNDS and time.perf_counter() - started > budget_s:
                break
            for index in order if round_index % 2 == 0 else order[::-1]:
                samples[index].append(_timed(calls[index], preps[index]))
    return samples


def summarize(samples: Sequence[float], return_mode: str = "median",
              quantiles: Sequence[float] | None = None) -> float | tuple[float, ...] | list[float]:
    """Reduce samples as Helion's timers do: ``quantiles`` if given, else by ``return_mode``
    (``min``, ``max``, ``mean``, ``median`` or ``all``)."""
    if not samples:
        return math.inf
    if quantiles:
        ordered = sorted(samples)
        picked = tuple(ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles)
        return picked[0] if len(picked) == 1 else picked
    if return_mode == "all":
        return list(samples)
    reducers: dict[str, Callable[[Sequence[float]], float]] = {
        "min": min, "max": max, "mean": statistics.fmean, "median": statistics.median,
    }
    if return_mode not in reducers:
        raise ValueError(f"return_mode must be one of min, max, mean, median, all; got {return_mode!r}")
    return reducers[return_mode](samples)


def fresh_argument_run(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Callable[[], Any], Prepare | None]:
    """A call of ``fn`` as a user calls it, and the (untimed) preparation each call needs:
    a kernel that writes its arguments is called on private copies of them, the copies it
    writes restored before each call so that its updates do not compound; one that writes
    none is called on ``args`` themselves, without preparation (None). ``fn`` is called
    once here, on copies, to see what it writes."""
    private = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
    fn(*private)
    pairs = [(p, a) for p, a in zip(private, args)
             if isinstance(a, torch.Tensor) and not torch.equal(bitwise(p), bitwise(a))]
    if not pairs:  # no copy is kept: several kernels timed side by side share the caller's tensors
        return (lambda: fn(*args)), None

    def restore() -> None:
        for copy, original in pairs:
            copy.copy_(original)

    return (lambda: fn(*private)), restore


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bitwise(t: torch.Tensor) -> torch.Tensor:
    """``t`` as integers of its width, so that equality is bitwise (-0.0 is not 0.0, NaN is NaN)."""
    bits = _BITS.get(t.dtype.itemsize)
    return t if bits is None or t.dtype == bits else t.view(bits)
