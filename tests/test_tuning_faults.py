"""A tuning run whose JIT worker dies: each step the worker serves is tried again in a new
worker, and what is cached is the best config measured, as if nothing had happened.

The worker is made to die with its test hook (``JITWorker.inject_fault``: the worker
process kills itself with SIGKILL on a chosen request, as the OOM killer or a user would
kill it). Every death costs a worker start (seconds), so one search dies at every step. A
candidate whose worker dies a second time is dropped: see test_autotune.py's aborting
candidates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


import helion
import pytest
import torch
from kernels import tuning_kernels

from helion_mlir.output_type import OutputType
from helion_mlir.runtime.configs.cache import cached_config
from helion_mlir.runtime.tuning import session as tuning_session
from helion_mlir.runtime.tuning.session import TuningSession, cpu_do_bench, observed_sessions
from helion_mlir.runtime.tuning.worker import JITWorker

pytestmark = pytest.mark.xdist_group("autotune")


@pytest.fixture
def worker(tuning_run_worker: JITWorker) -> JITWorker:
    return tuning_run_worker


def repeats_only_kernel() -> helion.Kernel:
    """``repeated_copy`` with its block size pinned: the quick search times the two values of
    ``repeats`` (64 and 1; 1 does the work once, clearly faster) beside the default config.
    Its budget outlasts the worker starts a death costs on a loaded machine (quick effort's 45 s
    did not: the search skipped its final re-timing); the search itself ends in seconds."""
    return helion.kernel(tuning_kernels.repeated_copy, backend="mlir", autotune_effort="quick",
                         autotune_progress_bar=False, autotune_config_overrides={"block_sizes": [4096]},
                         autotune_budget_seconds=600)


@pytest.mark.slow  # five worker starts
def test_a_search_whose_worker_dies_at_every_step_caches_the_best_config_measured(
        worker: JITWorker, caplog: pytest.LogCaptureFixture) -> None:
    """The worker dies once while compiling the reference config, running it for the
    baseline, timing the faster candidate, and re-timing the candidates at the end; each
    step starts again in a new worker, and the search goes on as if it had not died (a
    candidate dropped there would leave the slower one to be cached)."""
    # The search times repeats=64 (its initial population's) before repeats=1 (a neighbour
    # of it): the third worker dies timing the second, repeats=1.
    faults = [("compile", 1), ("run", 1), ("time", 2), ("interleave", 1)]
    worker.close()  # the first fault is armed in the next worker, each next one in the worker after
    worker.inject_fault(*faults)
    kernel = repeats_only_kernel()
    x = torch.randn(1 << 15, generator=torch.Generator().manual_seed(0))
    started = worker.started
    with caplog.at_level("WARNING"), observed_sessions() as sessions:
        result = kernel(x)
    (run,) = sessions
    torch.testing.assert_close(result, x * 2.0)
    bound = kernel.bind((x,))
    assert bound._config["repeats"] == 1  # both candidates were timed, the faster won
    cached = cached_config(bound, (x,), output_type=OutputType.LINALG_ON_TENSORS, threads=torch.get_num_threads())
    assert cached is not None and cached.config == bound._config
    assert run.settlement is not None and run.settlement.config == cached.config  # measured against the default
    assert (run.failures, run.dropped) == (0, 0) and "(worker died)" not in caplog.text
    assert f"kernel repeated_copy: the JIT worker died {len(faults)} time(s) while tuning:" in caplog.text
    for doing in ("compiling @repeated_copy; compiling it again", "running @repeated_copy; trying again",
                  "timing @repeated_copy; running and timing again", "timing 2 candidates; running and timing again"):
        assert f"killed by SIGKILL while {doing} in a new worker" in caplog.text, doing
    assert not worker._faults and worker.started == started + len(faults) + 1


def test_a_worker_killed_between_running_and_timing_a_candidate_is_a_death_like_any_other(
        worker: JITWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed while idle, after running a candidate and before timing it: the new worker
    does not hold the candidate's arguments, so the timing is tried again after running it
    there, as for a death while timing."""
    x = torch.ones(4096)
    session = TuningSession(repeats_only_kernel().bind((x,)), output_type=OutputType.LINALG_ON_TENSORS, threads=1,
                            worker=worker)
    candidate = session.candidate(helion.Config(block_sizes=[4096], repeats=1))
    run_once = tuning_session._remote_call
    kills: list[int] = []

    def run_then_kill(fn: Callable[[], object]) -> Any:
        remote = run_once(fn)
        if not kills:
            assert worker._process is not None
            kills.append(worker._process.pid)
            worker._process.kill()
            worker._process.wait()
        return remote

    monkeypatch.setattr(tuning_session, "_remote_call", run_then_kill)
    started = worker.started
    samples = cpu_do_bench(lambda: candidate(x), warmup=1, rep=1, return_mode="all")
    assert samples and kills and worker.started == started + 1
    assert worker.deaths[-1] == ("the JIT worker was killed by SIGKILL while waiting for its next request; "
                                 "running and timing again in a new worker")
