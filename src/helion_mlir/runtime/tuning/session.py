"""One autotuning run of a ``backend="mlir"`` kernel: Helion's search with CPU plumbing.

:func:`tuning` wraps Helion's ``Backend.autotune`` for one bound kernel. While it runs:

* Helion's ``compile_config`` of that kernel returns a :class:`CandidateKernel`: the
  module is emitted and the host code prepared here, the native code is compiled and run
  in the JIT worker (:mod:`.worker`); a candidate that crashes or hangs there is skipped
  with the reason, the tuning process is untouched;
* the fields that cannot change the CPU code are pinned (:mod:`..configs.search_space`);
* a search has a time budget per effort (:data:`DEFAULT_BUDGET_SECONDS`) unless one is set;
* Helion's default autotuner (``HELION_AUTOTUNER``, the effort's profile) is wrapped in
  the CPU variant of the local cache chosen by ``HELION_AUTOTUNE_CACHE`` (:mod:`..configs.cache`),
  which caches the search's best config unless a user's call of the default config is
  faster (:mod:`.settle`).

:func:`cpu_do_bench` and :func:`cpu_interleaved_bench` are the backend's timers. Helion
hands them a callable that runs the whole kernel; when that callable runs one candidate in
the worker, the worker times the candidate's device function there (:mod:`.timing`), with
the same thread count as the real call and the outputs the host code allocates allocated
afresh in each call; otherwise the callable is timed here. When the worker dies while
timing, the timers run the candidates again in a new worker and time them once more; a
second death fails the timing (:class:`~helion_mlir.errors.WorkerDiedError`), and Helion
drops the candidate.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import logging
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import torch
import torch.utils._pytree as pytree
from helion.autotuner import LFBOTreeSearch, search_algorithms
from helion.autotuner.base_cache import should_skip_cache
from helion.autotuner.effort_profile import get_effort_profile
from helion.runtime.config import Config
from helion.runtime.settings import default_autotuner_fn

from ...errors import HelionMLIRError, WorkerDiedError
from ...front_end_lock import FRONT_END_LOCK
from ...lowering.kernel_config import resolve_config
from ...lowering.kernel_model import KernelModel
from ...output_type import OutputType
from ..cpu.pipelines import Pipeline
from ..kernel.compiled_kernel import CompiledKernel, compile_kernel
from ..configs.cache import cache_class_for, cached_config
from .protocol import CandidateModule
from ..configs.search_space import cpu_config_overrides
from .settle import BEST, DEFAULT, Settlement, settle
from .timing import interleave, measure, summarize
from .worker import ATTEMPTS, JITWorker, RemoteFunction, collecting, recorded_calls, shared_worker

__all__ = [
    "Beside",
    "CandidateKernel",
    "TuningSession",
    "active_session",
    "cpu_do_bench",
    "cpu_interleaved_bench",
    "observed_sessions",
    "timed_beside",
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

    def __init__(self, model: KernelModel, *, output_type: OutputType, threads: int, worker: JITWorker) -> None:
        self._worker = worker
        super().__init__(model, output_type=output_type, pipeline=Pipeline.FAST, threads=threads)

    def _build_function(self, text: str, pipeline: Pipeline, threads: int | None) -> RemoteFunction:
        module = CandidateModule(text, self.model.name, self.output_type, pipeline, threads or 1, in_place=True)
        # The worker compiles while this process prepares the host code and the next candidates.
        return self._worker.compile(module, wait=False)

    @property
    def module_key(self) -> str:
        """Equal for candidates that compile to the same code."""
        return self.function.key

    def _run_function(self, function: RemoteFunction, call: list[Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        return function(*call, allocated=_allocated_by_host(call, args, function.held_by, self.model.args))


def _allocated_by_host(call: Sequence[Any], args: tuple[Any, ...], held_by: Sequence[int | None],
                       device_args: Sequence[Any]) -> frozenset[int]:
    """Positions of the device arguments written by the function that the kernel's host code
    allocated in this call (``out = torch.empty_like(x)``): tensors that are no parameter of
    the kernel and share no storage with a tensor of the caller's ``args``."""
    callers = {t.untyped_storage().data_ptr() for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)}
    return frozenset(
        index for index in {h for h in held_by if h is not None}
        if isinstance(call[index], torch.Tensor) and not device_args[index].is_kernel_param
        and call[index].untyped_storage().data_ptr() not in callers)


class TuningSession:
    """The state of one tuning run (see the module docstring)."""

    def __init__(self, bound: Any, *, output_type: OutputType, threads: int, worker: JITWorker) -> None:
        self.bound = bound
        self.output_type = output_type
        self.threads = threads
        self.worker = worker
        self._candidates: dict[str, CandidateKernel] = {}
        self.failures = 0  # configs that did not lower or compile (counted at the end)
        self.dropped = 0  # modules given up because their worker died each time (not among the failures)
        self.timed = 0  # distinct modules timed
        self.seconds = 0.0
        self.settlement: Settlement | None = None  # the search's best against the default config, if timed
        self.untimed: Config | None = None  # the config run because the budget ran out before anything was timed
        self.listed_only = False  # a choice among the kernel's configs=[...] (Helion's FiniteSearch)
        self.started = time.perf_counter()
        self._beside = _BESIDE.get() or Beside()

    def candidate(self, config: Any) -> CandidateKernel:
        """The candidate kernel of ``config`` (one per config per run)."""
        key = repr(config)
        found = self._candidates.get(key)
        if found is None:
            try:
                with FRONT_END_LOCK:  # what reads the bound kernel's shared compile state
                    model = KernelModel(self.bound, resolve_config(self.bound, config))
                found = CandidateKernel(model, output_type=self.output_type, threads=self.threads, worker=self.worker)
            except Exception as err:
                self.failures += 1
                log.warning("kernel %s: skipping %r: %s", self.bound.kernel.name, config, _first_line(err))
                raise
            self._candidates[key] = found
        return found

    def compile_cached(self, bound: Any, config: Any) -> Any:
        """Compile a config read from the autotune cache here, as the kernel will run it after
        tuning (the compiled kernel is cached, so that run does not compile it again)."""
        return compile_kernel(bound, config=config, output_type=self.output_type, threads=self.threads).config

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

    def settle(self, best: Config, args: Sequence[object]) -> Config:
        """The config to cache once the search found ``best`` (see :mod:`.settle`): the
        default config, when it ran in the worker in this run and a call of it is faster."""
        default = self.bound.config_spec.default_config()
        tried = self._candidates.get(repr(default))
        if tried is None or tried.module_key not in self.worker.ran:
            log.info("kernel %s: the default config did not run in this search; %r is cached untimed against it",
                     self.bound.kernel.name, best)
            if not (self._beside.configs or self._beside.references):
                return best
            default = None
        try:
            settled = settle(self.bound, args, best, output_type=self.output_type, default=default,
                             configs=self._beside.configs, references=self._beside.references)
        except HelionMLIRError as err:
            log.warning("kernel %s: %r is cached untimed against the default config, which could not be "
                        "timed: %s", self.bound.kernel.name, best, _first_line(err))
            return best
        self.settlement = settled
        if settled.default_won:
            log.warning("kernel %s: a call with the search's best config took %.3f ms, with the default config "
                        "%.3f ms: the default config is kept", self.bound.kernel.name, settled.times[BEST],
                        settled.times[DEFAULT])
        return settled.config

    def fallback_when_nothing_timed(self) -> Config | None:
        """What to run when the search ends without a working config (Helion's ``NoConfigFound``,
        or the assertion of its ``FiniteSearch`` of a ``configs=[...]`` list): when the time
        budget ran out before any candidate was timed (Helion's search then returns its best so
        far, and none is known better), the first listed config or else the default config,
        provided it compiles here and did not fail in the worker; None when the error stands.
        Nothing is cached (the cache writes after a search that returns)."""
        budget = self.bound.settings.autotune_budget_seconds
        if budget is None or self.worker.timed or time.perf_counter() - self.started < budget:
            return None
        config = self.bound.kernel.configs[0] if self.listed_only else self.bound.config_spec.default_config()
        tried = self._candidates.get(repr(config))
        if tried is not None and (self.worker.failure(tried.module_key) is not None
                                  or self.worker.dropped(tried.module_key)):
            return None
        try:
            self.compile_cached(self.bound, config)
        except HelionMLIRError as err:
            log.warning("kernel %s: %r does not compile either: %s", self.bound.kernel.name, config, _first_line(err))
            return None
        log.warning("kernel %s: the autotune budget of %s s ran out before any config was timed; %r runs, not "
                    "cached (a longer HELION_AUTOTUNE_BUDGET_SECONDS tunes the kernel)",
                    self.bound.kernel.name, budget, config)
        self.untimed = config
        return config


@dataclasses.dataclass(frozen=True)
class Beside:
    """What a tuning run times beside its best and default configs (see :func:`timed_beside`)."""

    configs: Mapping[str, Config] = dataclasses.field(default_factory=dict)
    references: Mapping[str, Callable[..., object]] = dataclasses.field(default_factory=dict)


_BESIDE: contextvars.ContextVar[Beside | None] = contextvars.ContextVar("helion_mlir_timed_beside", default=None)


@contextmanager
def timed_beside(beside: Beside) -> Iterator[None]:
    """Inside the block, a tuning run times these configs and callables (taking the kernel's
    arguments) by label, with its best and default configs, in the same rounds
    (``helion-mlir tune``: torch eager, ``--config``); :attr:`TuningSession.settlement`
    holds the times."""
    token = _BESIDE.set(beside)
    try:
        yield
    finally:
        _BESIDE.reset(token)


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

        cache_cls = cache_class_for(settings.autotune_cache, output_type=session.output_type, threads=session.threads,
                                    check=session.compile_cached)
        cache = cache_cls(factory(), autotuner_factory=factory)
        cache.after_search = session.settle
        return cache

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
    return force or should_skip_cache() or cached_config(bound, args, output_type=output_type, threads=threads,
                                                         warn=False) is None


@contextmanager
def tuning(bound: Any, args: Sequence[object], *, output_type: OutputType, force: bool = True,
           worker: JITWorker | None = None) -> Iterator[TuningSession]:
    """Run Helion's autotuner on ``bound`` inside this block with the CPU plumbing."""
    threads = max(1, torch.get_num_threads())
    session = TuningSession(bound, output_type=output_type, threads=threads, worker=worker or shared_worker())
    session.listed_only = bool(bound.kernel.configs) and not (force or bound.settings.force_autotune)
    observers = _OBSERVED.get()
    if observers is not None:
        observers.append(session)
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
    earlier_deaths = len(session.worker.deaths)  # of runs before this one that did not end in a session
    try:
        yield session
    finally:
        _ACTIVE.reset(token)
        for name, value in saved.items():
            setattr(settings, name, value)
        session.timed = len(session.worker.timed)
        modules = {c.module_key for c in session.kernels}
        session.dropped = sum(1 for key in modules if session.worker.dropped(key))
        session.failures += sum(1 for c in session.kernels
                                if session.worker.failure(c.module_key) is not None
                                and not session.worker.dropped(c.module_key))
        session.seconds = time.perf_counter() - session.started
        deaths = session.worker.deaths[earlier_deaths:]
        if deaths:
            log.warning("kernel %s: the JIT worker died %d time(s) while tuning:\n  %s", bound.kernel.name,
                        len(deaths), "\n  ".join(deaths))
        try:
            session.worker.forget()
        except HelionMLIRError as err:
            log.debug("the JIT worker could not forget this run's candidates: %s", err)


def _remote_call(fn: Callable[[], object]) -> RemoteFunction | None:
    """Run ``fn`` once; the candidate it ran in the worker, if it ran exactly one."""
    with recorded_calls() as calls:
        fn()
    return calls[0] if len(calls) == 1 else None


T = TypeVar("T")


def _timed_in_worker(fns: Sequence[Callable[[], object]],
                     timer: Callable[[list[RemoteFunction]], list[T]]) -> list[T] | None:
    """Run each of ``fns`` once and, if each ran one candidate in the worker (the same
    worker), time them there with ``timer``; None otherwise. A worker that dies while
    timing is replaced, and ``fns`` run and timed again, once."""
    for attempt in range(1, ATTEMPTS + 1):
        remotes = [_remote_call(fn) for fn in fns]
        functions = [r for r in remotes if r is not None]
        if not remotes or len(functions) < len(remotes) or len({id(r.worker) for r in functions}) != 1:
            return None
        try:
            return timer(functions)
        except WorkerDiedError as err:
            worker = functions[0].worker
            if attempt == ATTEMPTS:
                if len(functions) == 1:
                    worker.drop(functions[0].module, "timing it", err)
                else:
                    worker.note_death(err, f"giving up: timing them failed {ATTEMPTS} times")
                raise
            worker.note_death(err, "running and timing again in a new worker")
    raise AssertionError("unreachable")


def cpu_do_bench(fn: Callable[[], object], warmup: float = 25, rep: float = 100, grad_to_none: Any = None,
                 quantiles: Sequence[float] | None = None, return_mode: str = "mean",
                 process_group_name: str | None = None, **_options: object) -> float | tuple[float, ...] | list[float]:
    """Helion's ``do_bench`` for CPU kernels: wall-clock samples of ``fn`` (ms), reduced by
    ``return_mode`` or ``quantiles``; ``warmup`` and ``rep`` are millisecond budgets."""
    samples = _timed_in_worker([fn], lambda fs: fs[0].worker.time(fs[0], warmup_ms=warmup, rep_ms=rep))
    if samples is None:
        samples = measure(fn, warmup_ms=warmup, rep_ms=rep)
    return summarize(samples, return_mode, quantiles)


def cpu_interleaved_bench(fns: Sequence[Callable[[], object]], *, repeat: int, desc: str | None = None,
                          max_total_ms: float | None = None, **_options: object) -> list[float]:
    """Helion's ``interleaved_bench`` for CPU kernels: the median of each callable's samples,
    taken round-robin (see :func:`.timing.interleave`)."""
    samples = _timed_in_worker(fns, lambda fs: fs[0].worker.interleave(fs, repeat=repeat, max_total_ms=max_total_ms))
    if samples is None:
        samples = interleave(list(fns), repeat=repeat, max_total_ms=max_total_ms)
    return [statistics.median(s) for s in samples]
