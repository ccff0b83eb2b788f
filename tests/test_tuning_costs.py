"""What the tuner measures is what a user's call costs.

A user's call allocates its outputs (``torch.empty_like``): an output past glibc's largest
mmap threshold (32 MiB) is fresh memory every call, whose pages the kernel's first writes
fault in. A candidate timed on outputs allocated once never pays that.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import helion
import pytest
import torch
from kernels import tuning_kernels

from helion_mlir.output_type import OutputType
from helion_mlir.runtime.compiled_kernel import compile_kernel
from helion_mlir.runtime.tuning.session import TuningSession, cpu_do_bench
from helion_mlir.runtime.tuning.worker import JITWorker

pytestmark = pytest.mark.xdist_group("autotune")

LINALG = OutputType.LINALG_ON_TENSORS


@pytest.fixture
def worker(tuning_run_worker: JITWorker) -> JITWorker:
    return tuning_run_worker


def _plain_median_ms(call: Callable[[], object], count: int = 5) -> float:
    call()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def test_the_tuner_times_a_call_as_the_user_pays_for_it(worker: JITWorker) -> None:
    """A 34 MiB output: the tuner's timing of the candidate (in the JIT worker, as Helion's
    search asks for it) agrees with a plain loop of the user's call within 10%: the median,
    over interleaved rounds, of each round's ratio (load that comes and goes hits a round's
    measurements alike)."""
    kernel = helion.kernel(tuning_kernels.repeated_copy, backend="mlir")
    x = torch.randn(17 << 19, generator=torch.Generator().manual_seed(0))
    config = helion.Config(block_sizes=[1 << 16], repeats=1)
    bound = kernel.bind((x,))
    user = compile_kernel(bound, config=config)
    candidate = TuningSession(bound, output_type=LINALG, threads=torch.get_num_threads(),
                              worker=worker).candidate(config)
    rounds: list[tuple[float, float]] = []
    try:
        for _ in range(5):
            tuner_ms = cpu_do_bench(lambda: candidate(x), warmup=1, rep=50, return_mode="median")
            rounds.append((tuner_ms, _plain_median_ms(lambda: user(x))))
    finally:
        worker.forget()
    ratio = statistics.median(tuner / user_ms for tuner, user_ms in rounds)
    assert 0.9 <= ratio <= 1.1, f"the tuner against the user's call: {ratio:.2f} (ms: {rounds})"
