"""One autotuning run of a ``backend="mlir"`` kernel: Helion's search with CPU plumbing.

:func:`tuning` wraps Helion's ``Backend.autotune`` for one bound kernel. While it runs:

* Helion's ``compile_config`` of that kernel returns a :class:`CandidateKernel`: the
  module is emitted and the host code prepared here, the native code is compiled and run
  in the JIT worker (:mod:`.worker`); a candidate that crashes or hangs there is skipped
  with the reason, the tuning process is untouched;
* the fields that cannot change the CPU code are pinned (:mod:`.search_space`);
* a search has a time budget per effort (:data:`DEFAULT_BUDGET_SECONDS`) unless one is set;
* Helion's default autotuner (``HELION_AUTOTUNER``, the effort's profile) is wrapped in
  the CPU variant of the local cache chosen by ``HELION_AUTOTUNE_CACHE`` (:mod:`.cache`).

:func:`cpu_do_bench` and :func:`cpu_interleaved_bench` are the backend's timers. Helion
hands them a callable that runs the whole kernel; when that callable runs one candidate in
the worker, the worker times the candidate's device function there (:mod:`.timing`), with
the same thread count as the real call; otherwise the callable is timed here.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch
from helion.autotuner import LFBOTreeSearch, search_algorithms
from helion.autotuner.base_cache import should_skip_cache
from helion.autotuner.effort_profile import get_effort_profile
from helion.runtime.settings import default_autotuner_fn

from ...errors import HelionMLIRError
from ...output_type import OutputType
from ..compiled_kernel import CompiledKernel
from .cache import cache_class_for, cached_config
from .protocol import CandidateModule
from .search_space import cpu_config_overrides
from .timing import interleave, measure, summarize
from .worker import JITWorker, RemoteFunction, collecting, recorded_calls, shared_worker

__all__ = [
    "CandidateKernel",
    "TuningSession",
    "active_session",
    "cpu_do_bench",
    "cpu_interleaved_bench",
    "observed_sessions",
    "tuning",
]

log = logging.getLogger(__name__)

#: ``autotune_budget_seconds`` of a search at each effort unless the user sets one. On a
#: CPU a candidate costs tenths of a second to compile and its runs are slower than a GPU's,
#: so Helion's profiles, sized for GPUs, take minutes at quick effort (Helion's CuTe and Metal
#: backends bound their non-full searches alike) and far longer at full effort on kernels
#: that move much memory: a full search of a 1024x16384 RMS norm spent 281 s on its first
#: 30 configs on two loaded cores. Helion checks the budget between generations and sizes its
#: final selection of the best configs to what is left, by its own estimate of a window, so a
#: search ends past the budget by up to a generation and what the estimate misses (a large
#: tensor's trips to the JIT worker): with 480 s that search took 608 s at a load average of 9
#: on the two cores. 420 s keeps a full search within ten minutes.
DEFAULT_BUDGET_SECONDS = {"quick": 45, "full": 420}


class CandidateKernel(CompiledKernel):
    """A config the autotuner tries: emitted here, compiled and run in the JIT worker."""

    def __init__(self, bound: Any, *, output_type: OutputType, config: Any, threads: int, worker: JITWorker) -> None:
        self._worker = worker
        super().__init__(bound, output_type=output_type, config=config, pipeline="fast", threads=threads)

    def _build_function(self, text: str, pipeline: str, threads: int | None) -> RemoteFunction:
        module = CandidateModule(text, self.model.name, self.output_type, pipeline, threads or 1, in_place=True)
        # The worker compiles while this process prepares the host code and the next candidates.
        return self._worker.compile(module, wait=False)

    @property
    def module_key(self) -> str:
        """Equal for candidates that compile to the same code."""
        return self.function.key


class TuningSession:
    """The state of one tuning run (see the module docstring)."""

    def __init__(self, bound: Any, *, output_type: OutputType, threads: int, worker: JITWorker) -> None:
        self.bound = bound
        self.output_type = output_type
        self.threads = threads
        self.worker = worker
        self._candidates: dict[str, CandidateKernel] = {}
        self.failures = 0  # configs that did not lower or compile (counted at the end)
        self.timed = 0  # distinct modules timed
        self.seconds = 0.0

    def candidate(self, config: Any) -> CandidateKernel:
        """The candidate kernel of ``config`` (one per config per run)."""
        key = repr(config)
        found = self._candidates.get(key)
        if found is None:
            try:
                found = CandidateKernel(self.bound, output_type=self.output_type, config=config, threads=self.threads,
                                        worker=self.worker)
            except Exception as err:
                self.failures += 1
                log.warning("kernel %s: skipping %r: %s", self.bound.kernel.name, config, _first_line(err))
                raise
            self._candidates[key] = found
        return found

    @property
    def candidates(self) -> int:
        """Configs compiled so far in this run."""
        return len(self._candidates)

    @property
    def kernels(self) -> list[CandidateKernel]:
        """The candidates compiled so far in this run."""
        return list(self._candidates.values())

    @property
    def configs(self) -> list[Any]:
        """Their configs."""
        return [c.config for c in self._candidates.values()]

    @property
    def modules(self) -> int:
        """Distinct modules among them (what was compiled and timed)."""
        return len({c.module_key for c in self._candidates.values()})


_ACTIVE: contextvars.ContextVar[TuningSession | None] = contextvars.ContextVar("helion_mlir_tuning", default=None)
_OBSERVED: contextvars.ContextVar[list[TuningSession] | None] = contextvars.ContextVar(
    "helion_mlir_observed_tuning", default=None)


def observed_sessions() -> AbstractContextManager[list[TuningSession]]:
    """Collect the tuning runs that happen inside the block (for reports and tests)."""
    return collecting(_OBSERVED)


def active_session(bound: Any) -> TuningSession | None:
    """The tuning run of ``bound`` in progress, if any."""
    session = _ACTIVE.get()
    return session if session is not None and session.bound is bound else None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def _cpu_autotuner_fn(session: TuningSession) -> Callable[..., Any]:
    """Helion's ``default_autotuner_fn`` with the CPU variant of its cache."""

    def autotuner_fn(bound: Any, args: Sequence[object], **kwargs: object) -> Any:
        settings = bound.settings
        name = os.environ.get("HELION_AUTOTUNER", "")
        search_cls = search_algorithms.get(name) if name else LFBOTreeSearch
        if search_cls is None:
            raise ValueError(f"Unknown HELION_AUTOTUNER value: {name}, valid options are: "
                             f"{', '.join(search_algorithms)}")
        profile = get_effort_profile(settings.autotune_effort)
        parameters = inspect.signature(search_cls.__init__).parameters
        for key, value in search_cls.get_kwargs_from_profile(profile, settings).items():
            if key not in kwargs and key in parameters:
                kwargs[key] = value

        def factory() -> Any:
            return search_cls(bound, args, **kwargs)

        cache_cls = cache_class_for(settings.autotune_cache, output_type=session.output_type, threads=session.threads)
        return cache_cls(factory(), autotuner_factory=factory)

    return autotuner_fn


def _expects_candidates(bound: Any, args: Sequence[object], *, force: bool, output_type: OutputType,
                        threads: int) -> bool:
    """Whether Helion's ``Backend.autotune`` will compile candidates (rather than return the
    one config, the default config or a cached result): then the worker is started at once."""
    settings = bound.settings
    force = force or settings.force_autotune
    configs = bound.kernel.configs
    if settings.autotune_effort == "none" and (force or not configs):
        return False
    if not force and configs:
        return len(configs) > 1
    return force or should_skip_cache() or cached_config(bound, args, output_type=output_type, threads=threads) is None


@contextmanager
def tuning(bound: Any, args: Sequence[object], *, output_type: OutputType, force: bool = True,
           worker: JITWorker | None = None) -> Iterator[TuningSession]:
    """Run Helion's autotuner on ``bound`` inside this block with the CPU plumbing."""
    threads = max(1, torch.get_num_threads())
    session = TuningSession(bound, output_type=output_type, threads=threads, worker=worker or shared_worker())
    observers = _OBSERVED.get()
    if observers is not None:
        observers.append(session)
    started = time.perf_counter()
    settings = bound.settings
    saved = {name: getattr(settings, name)
             for name in ("autotune_config_overrides", "autotuner_fn", "autotune_budget_seconds")}
    session.worker.compile_timeout = float(settings.autotune_compile_timeout)
    session.worker.run_timeout = float(settings.autotune_benchmark_timeout)
    if _expects_candidates(bound, args, force=force, output_type=output_type, threads=threads):
        session.worker.start()  # it imports while Helion prepares the search
    settings.autotune_config_overrides = cpu_config_overrides(bound, saved["autotune_config_overrides"])
    if saved["autotuner_fn"] is default_autotuner_fn:
        settings.autotuner_fn = _cpu_autotuner_fn(session)
    if settings.autotune_budget_seconds is None:
        settings.autotune_budget_seconds = DEFAULT_BUDGET_SECONDS.get(settings.autotune_effort)
    token = _ACTIVE.set(session)
    session.worker.timed.clear()
    try:
        yield session
    finally:
        _ACTIVE.reset(token)
        for name, value in saved.items():
            setattr(settings, name, value)
        session.timed = len(session.worker.timed)
        session.failures += sum(1 for c in session.kernels if session.worker.failure(c.module_key) is not None)
        session.seconds = time.perf_counter() - started
        try:
            session.worker.forget()
        except HelionMLIRError as err:
            log.debug("the JIT worker could not forget this run's candidates: %s", err)


def _remote_call(fn: Callable[[], object]) -> RemoteFunction | None:
    """Run ``fn`` once; the candidate it ran in the worker, if it ran exactly one."""
    with recorded_calls() as calls:
        fn()
    return calls[0] if len(calls) == 1 else None


def cpu_do_bench(fn: Callable[[], object], warmup: float = 25, rep: float = 100, grad_to_none: Any = None,
                 quantiles: Sequence[float] | None = None, return_mode: str = "mean",
                 process_group_name: str | None = None, **_options: object) -> float | tuple[float, ...] | list[float]:
    """Helion's ``do_bench`` for CPU kernels: wall-clock samples of ``fn`` (ms), reduced by
    ``return_mode`` or ``quantiles``; ``warmup`` and ``rep`` are millisecond budgets."""
    remote = _remote_call(fn)
    if remote is not None:
        samples = remote.worker.time(remote, warmup_ms=warmup, rep_ms=rep)
    else:
        samples = measure(fn, warmup_ms=warmup, rep_ms=rep)
    return summarize(samples, return_mode, quantiles)


def cpu_interleaved_bench(fns: Sequence[Callable[[], object]], *, repeat: int, desc: str | None = None,
                          max_total_ms: float | None = None, **_options: object) -> list[float]:
    """Helion's ``interleaved_bench`` for CPU kernels: the median of each callable's samples,
    taken round-robin (see :func:`.timing.interleave`)."""
    remotes = [_remote_call(fn) for fn in fns]
    workers = {id(r.worker) for r in remotes if r is not None}
    if remotes and all(r is not None for r in remotes) and len(workers) == 1:
        functions = [r for r in remotes if r is not None]
        samples = functions[0].worker.interleave(functions, repeat=repeat, max_total_ms=max_total_ms)
    else:
        samples = interleave(list(fns), repeat=repeat, max_total_ms=max_total_ms)
    return [statistics.median(s) for s in samples]
