"""Helion's autotuner on ``backend="mlir"`` kernels: searches, failures, cache, settings.

Kernels come from tests/kernels/tuning_kernels.py and are tiny; searches use the quick
effort or a short ``configs=[...]`` list, so the module costs a worker start (a few
seconds) and a few short searches. Every test has a cache directory of its own.
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from examples_util import load_example_by_name
from kernels import tuning_kernels
from model_counts import ModelCounts

from helion_mlir.errors import ExecutionError, HelionMLIRError, WorkerDiedError
from helion_mlir.lowering.kernel_config import resolve_config
from helion_mlir.output_type import OutputType
from helion_mlir.runtime.backend import helion_backend
from helion_mlir.runtime.kernel import compiled_kernel
from helion_mlir.runtime.kernel.compiled_kernel import CompiledKernel
from helion_mlir.runtime.tuning import session as tuning_session
from helion_mlir.runtime.tuning import worker as worker_module
from helion_mlir.runtime.configs.cache import cache_path, cpu_cache_key
from helion_mlir.runtime.tuning.protocol import CandidateModule
from helion_mlir.runtime.configs.search_space import TUNED_FIELDS
from helion_mlir.runtime.configs.seeds import SEED_LOOP_TILE, SEED_OUTER_TILE, SEED_TILES
from helion_mlir.runtime.tuning.session import CandidateKernel, TuningSession, observed_sessions
from helion_mlir.runtime.tuning.worker import MAX_PENDING_COMPILES, JITWorker
from helion_mlir.runtime.tuning.worker_process import WORKER_ARGUMENTS
from helion_mlir_cli import main

TESTS_DIR = Path(__file__).resolve().parent

# One test process runs the module: one JIT worker start, one tuning of the shared fixture.
pytestmark = pytest.mark.xdist_group("autotune")


@pytest.fixture(scope="module")
def worker(tuning_worker: JITWorker) -> JITWorker:
    """The JIT worker of the module's tuning runs."""
    return tuning_worker


@pytest.fixture(autouse=True)
def _tuning_setup(tuning_run_worker: JITWorker) -> None:
    pass


def mlir_kernel(fn: Any, **settings: Any) -> helion.Kernel:
    settings.setdefault("autotune_progress_bar", False)
    return helion.kernel(fn, backend="mlir", **settings)


def vector(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def tune(kernel: helion.Kernel, args: tuple[Any, ...]) -> tuple[Any, TuningSession]:
    """Call the kernel (which tunes it); its result and the tuning run."""
    with observed_sessions() as sessions:
        result = kernel(*args)
    (run,) = sessions
    return result, run


def test_a_candidate_builds_one_kernel_model_from_one_resolution(worker: JITWorker,
                                                                 model_counts: ModelCounts) -> None:
    """The tuning entry point: each config the search tries is resolved once and modelled once,
    the model serving emission, argument checks and host code."""
    x = vector(1 << 10)
    bound = mlir_kernel(tuning_kernels.repeated_copy).bind((x,))
    session = TuningSession(bound, output_type=OutputType.LINALG_ON_TENSORS, threads=1, worker=worker)
    config = helion.Config(block_sizes=[64], repeats=1)
    candidate = session.candidate(config)
    assert model_counts.take() == (1, 1)
    assert session.candidate(config) is candidate and model_counts.take() == (0, 0)
    torch.testing.assert_close(candidate(x), x * 2.0)


# ------------------------------------------------------------------------- searching


@pytest.fixture(scope="module")
def tuned_repeated_copy(worker: JITWorker, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``repeated_copy`` tuned at quick effort once for the module, with its own cache."""
    cache = tmp_path_factory.mktemp("repeated-copy-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning_session, "shared_worker", lambda: worker)
        patch.setenv("HELION_CACHE_DIR", str(cache))
        kernel = mlir_kernel(tuning_kernels.repeated_copy, autotune_effort="quick")
        x = vector(1 << 15)
        shared_before = worker.received.shared_bytes
        result, run = tune(kernel, (x,))
        shared = worker.received.shared_bytes - shared_before
        bound = kernel.bind((x,))
        key = cpu_cache_key(bound, (x,), output_type=OutputType.LINALG_ON_TENSORS, threads=torch.get_num_threads())
        return {"x": x, "result": result, "run": run, "bound": bound, "cache": cache, "cache_file": cache_path(key),
                "shared_bytes": shared}


def test_search_finds_the_one_clearly_faster_choice(tuned_repeated_copy: dict[str, Any]) -> None:
    x, run, bound = tuned_repeated_copy["x"], tuned_repeated_copy["run"], tuned_repeated_copy["bound"]
    torch.testing.assert_close(tuned_repeated_copy["result"], x * 2.0)
    assert bound._config["repeats"] == 1  # the default does the work 64 times
    assert run.candidates >= 2 and run.timed >= 2
    assert tuned_repeated_copy["cache_file"].is_file()
    assert tuned_repeated_copy["shared_bytes"] >= run.candidates * x.nbytes  # results came in shared memory


def test_row_kernels_are_also_seeded_with_whole_reductions_and_whole_inner_tiles() -> None:
    """Shapes the uniform seeds miss: every reduction in one piece (long-row RMS norm), and a
    narrow outer tile over whole rows (two-pass softmax)."""
    rms_norm = load_example_by_name("rms_norm").KERNEL
    x = torch.randn(256, 16384)
    seeds = mlir_kernel(rms_norm.fn).bind((x, torch.randn(16384), 1e-5)).config_spec.compiler_seed_configs
    assert [dict(s.config) for s in seeds] == (
        [{"block_sizes": [tile]} for tile in SEED_TILES]
        + [{"block_sizes": [tile], "reduction_loops": [None]} for tile in SEED_TILES])
    softmax = load_example_by_name("softmax_two_pass").KERNEL
    seeds = mlir_kernel(softmax.fn).bind((torch.randn(256, 1024),)).config_spec.compiler_seed_configs
    assert helion.Config(block_sizes=[SEED_OUTER_TILE, 1024, 1024]) in seeds


def test_kernels_with_a_loop_inside_the_grid_are_seeded_with_deep_loop_tiles() -> None:
    """A matmul's K loop in big steps under 64x64 grid tiles; split-K's outer K tile, which
    only splits the inner loop's range, whole (one tile runs all of K)."""
    a, b = torch.randn(1024, 1024, dtype=torch.bfloat16), torch.randn(1024, 1024, dtype=torch.bfloat16)
    matmul = load_example_by_name("matmul_bf16").KERNEL
    seeds = mlir_kernel(matmul.fn).bind((a, b)).config_spec.compiler_seed_configs
    assert helion.Config(block_sizes=[64, 64, SEED_LOOP_TILE]) in seeds
    split_k = load_example_by_name("matmul_split_k").KERNEL
    seeds = mlir_kernel(split_k.fn).bind((torch.randn(256, 16384), torch.randn(16384, 256))).config_spec.compiler_seed_configs
    assert helion.Config(block_sizes=[64, 64, 16384, SEED_LOOP_TILE]) in seeds


def test_search_varies_only_fields_that_change_the_module(tuned_repeated_copy: dict[str, Any]) -> None:
    run, bound = tuned_repeated_copy["run"], tuned_repeated_copy["bound"]
    default = bound.config_spec.default_config().config
    varied = {key for config in run.configs for key, value in config.config.items() if default.get(key) != value}
    assert varied and varied <= TUNED_FIELDS | {"repeats"}


def test_search_starts_from_the_cpu_seeds_which_are_not_the_default(tuned_repeated_copy: dict[str, Any]) -> None:
    bound = tuned_repeated_copy["bound"]
    assert bound.config_spec.compiler_seed_configs == [helion.Config(block_sizes=[tile]) for tile in SEED_TILES]
    tried = [config["block_sizes"] for config in tuned_repeated_copy["run"].configs]
    assert all([tile] in tried for tile in SEED_TILES)
    args = (torch.randn(64, 256), torch.randn(64, 256))
    ours = mlir_kernel(tuning_kernels.add_rows).bind(args).config_spec.default_config()
    helions = helion.kernel(tuning_kernels.add_rows).bind(args).config_spec.default_config()
    assert ours["block_sizes"] == helions["block_sizes"]


def test_second_process_uses_the_cached_config_and_times_nothing(tuned_repeated_copy: dict[str, Any]) -> None:
    script = textwrap.dedent(
        """
        import json, sys, time
        sys.path.insert(0, sys.argv[1])
        import helion_mlir, helion, torch
        from helion_mlir.runtime.tuning.session import observed_sessions
        from kernels import tuning_kernels
        x = torch.randn(1 << 15, generator=torch.Generator().manual_seed(0))
        kernel = helion.kernel(tuning_kernels.repeated_copy, backend="mlir", autotune_effort="quick",
                               autotune_progress_bar=False)
        started = time.perf_counter()
        with observed_sessions() as sessions:
            out = kernel(x)
        seconds = time.perf_counter() - started
        print(json.dumps({
            "config": dict(kernel.bind((x,))._config.config), "right": bool(torch.equal(out, x * 2.0)),
            "candidates": sum(s.candidates for s in sessions), "timed": sum(s.timed for s in sessions),
            "workers": sum(s.worker.started for s in sessions), "seconds": seconds,
        }))
        """
    )
    env = {**os.environ, "HELION_CACHE_DIR": str(tuned_repeated_copy["cache"])}
    done = subprocess.run([sys.executable, "-c", script, str(TESTS_DIR)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["right"]
    assert report["config"] == dict(tuned_repeated_copy["bound"]._config.config)
    assert (report["candidates"], report["timed"], report["workers"]) == (0, 0, 0)


def test_compile_kernel_uses_the_cached_tuned_config(tuned_repeated_copy: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tuned_repeated_copy["cache"]))
    x = tuned_repeated_copy["x"]
    plain = helion.kernel(tuning_kernels.repeated_copy)  # the default backend: compile_kernel still finds it
    compiled = compiled_kernel.compile_kernel(plain, (x,))
    assert compiled.config == tuned_repeated_copy["bound"]._config
    torch.testing.assert_close(compiled(x), x * 2.0)
    untuned = compiled_kernel.compile_kernel(helion.kernel(tuning_kernels.repeated_copy), (vector(1 << 14),))
    assert untuned.config["repeats"] == 64  # other shapes were never tuned: Helion's default


def _write_cache_entry(bound: Any, args: tuple[Any, ...], config: helion.Config) -> Path:
    """The cache entry of ``bound`` on ``args``, written as a tuning run writes it."""
    key = cpu_cache_key(bound, args, output_type=OutputType.LINALG_ON_TENSORS, threads=torch.get_num_threads())
    path = cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"config": config.to_json()}))
    return path


@pytest.mark.parametrize("bad", [helion.Config(block_sizes=[16]), helion.Config(block_sizes=[16, 24])])
def test_compile_kernel_skips_an_invalid_cached_config_with_a_warning_naming_the_file(
        bad: helion.Config, caplog: pytest.LogCaptureFixture) -> None:
    module = load_example_by_name("add")
    kernel = helion.kernel(module.KERNEL.fn)  # no config of its own: compile_kernel reads the cache
    args = module.make_args("ragged")
    path = _write_cache_entry(kernel.bind(args), args, bad)
    with caplog.at_level("WARNING"):
        for _ in range(2):  # every call works, not only the first
            compiled = compiled_kernel.compile_kernel(kernel, args)
            torch.testing.assert_close(compiled(*args), module.reference(*args))
    assert compiled.config == kernel.bind(args).config_spec.default_config()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    about_cache = [w for w in warnings if str(path) in w]  # besides the hint that the default config runs
    assert len(about_cache) == 1 and "is not valid for it" in about_cache[0], warnings


def test_compile_kernel_runs_the_default_config_when_the_cached_one_does_not_compile(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    module = load_example_by_name("add")
    kernel = helion.kernel(module.KERNEL.fn)
    args = module.make_args("ragged")
    cached = helion.Config(block_sizes=[2, 64])  # valid, and (here) refused by the CPU compiler
    path = _write_cache_entry(kernel.bind(args), args, cached)
    build = CompiledKernel._build_function

    def refuse_the_cached_config(self: CompiledKernel, *options: Any) -> Any:
        if self.config["block_sizes"] == cached["block_sizes"]:
            raise ExecutionError("a pass failed")
        return build(self, *options)

    monkeypatch.setattr(CompiledKernel, "_build_function", refuse_the_cached_config)
    with caplog.at_level("WARNING"):
        compiled = compiled_kernel.compile_kernel(kernel, args)
    assert compiled.config == kernel.bind(args).config_spec.default_config()
    torch.testing.assert_close(compiled(*args), module.reference(*args))
    assert any(str(path) in r.getMessage() and "does not compile" in r.getMessage() for r in caplog.records)


def test_compile_kernel_resolves_the_cached_config() -> None:
    module = load_example_by_name("add")
    kernel = helion.kernel(module.KERNEL.fn)
    args = module.make_args("ragged")
    _write_cache_entry(kernel.bind(args), args, helion.Config(block_size=[4, 8]))  # an alias, as Helion takes it
    compiled = compiled_kernel.compile_kernel(kernel, args)
    assert compiled.config["block_sizes"] == [4, 8]
    torch.testing.assert_close(compiled(*args), module.reference(*args))


def test_a_cached_config_the_kernel_refuses_is_tuned_again_and_replaced(worker: JITWorker,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    kernel = mlir_kernel(tuning_kernels.add_rows, autotune_effort="quick")
    args = (torch.randn(2, 2), torch.randn(2, 2))  # block sizes 1 and 2 per dimension: a short search
    bound = kernel.bind(args)
    path = _write_cache_entry(bound, args, helion.Config(block_sizes=[2]))  # one block size for two dimensions
    with caplog.at_level("WARNING"):
        result, run = tune(kernel, args)
    torch.testing.assert_close(result, args[0] + args[1])
    warnings = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
    assert len(warnings) == 1 and "is not valid for it" in warnings[0], warnings
    assert run.candidates > 0  # a cache miss: tuned again
    rewritten = helion.Config.from_json(json.loads(path.read_text())["config"])
    assert resolve_config(bound, rewritten) == resolve_config(bound, bound._config)
    again = mlir_kernel(tuning_kernels.add_rows, autotune_effort="quick")
    result, run = tune(again, args)  # as the next process would: the repaired entry, nothing tuned
    torch.testing.assert_close(result, args[0] + args[1])
    assert (run.candidates, run.timed) == (0, 0)


def test_a_cached_config_that_does_not_compile_is_a_cache_miss(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    kernel = mlir_kernel(tuning_kernels.add_rows, autotune_effort="quick")
    args = (torch.randn(8, 8), torch.randn(8, 8))
    bound = kernel.bind(args)
    cached = helion.Config(block_sizes=[2, 4])
    path = _write_cache_entry(bound, args, cached)
    build = CompiledKernel._build_function

    def refuse_the_cached_config(self: CompiledKernel, *options: Any) -> Any:
        if self.config["block_sizes"] == cached["block_sizes"]:
            raise ExecutionError("a pass failed")
        return build(self, *options)

    with tuning_session.tuning(bound, args, output_type=OutputType.LINALG_ON_TENSORS, force=False):
        assert bound.settings.autotuner_fn(bound, args).get() == cached  # compiled here, in this process
        monkeypatch.setattr(CompiledKernel, "_build_function", refuse_the_cached_config)
        compiled_kernel.clear_kernel_cache()
        with caplog.at_level("WARNING"):
            assert bound.settings.autotuner_fn(bound, args).get() is None
    assert any(str(path) in r.getMessage() and "does not compile" in r.getMessage() for r in caplog.records)


def test_configs_list_runs_the_fastest(worker: JITWorker) -> None:
    slow = helion.Config(block_sizes=[256], repeats=64)
    fast = helion.Config(block_sizes=[256], repeats=1)
    kernel = mlir_kernel(tuning_kernels.repeated_copy, configs=[slow, fast])
    x = vector(1 << 14)
    result, run = tune(kernel, (x,))
    torch.testing.assert_close(result, x * 2.0)
    assert kernel.bind((x,))._config == fast and run.timed == 2  # (and the default config ran for the reference)


def _with_injected_abort(text: str, func_name: str) -> str:
    """``text`` with a failing ``cf.assert`` at the entry of ``@func_name``: native code that
    aborts its process, as a miscompiled candidate could."""
    head, sep, rest = text.partition(f"func.func @{func_name}(")
    signature, brace, body = rest.partition("{\n")
    abort = '    %injected = arith.constant false\n    cf.assert %injected, "injected abort"\n'
    return head + sep + signature + brace + abort + body


def test_candidates_that_fail_to_lower_crash_or_compute_wrong_numbers_are_skipped(
        worker: JITWorker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    crashing = helion.Config(block_sizes=[64], scale=1)
    build = CandidateKernel._build_function

    def build_with_abort(self: CandidateKernel, text: str, pipeline: str, threads: int | None) -> Any:
        if self.config["block_sizes"] == crashing["block_sizes"]:  # the candidate's config is normalized
            text = _with_injected_abort(text, self.model.name)
        return build(self, text, pipeline, threads)

    monkeypatch.setattr(CandidateKernel, "_build_function", build_with_abort)
    configs = [
        helion.Config(block_sizes=[], scale=1),  # no block size for a kernel that tiles one dimension
        helion.Config(block_sizes=[32], scale=3),  # computes x * 3: the accuracy check rejects it
        crashing,
        helion.Config(block_sizes=[128], scale=1),  # the only good candidate
    ]
    kernel = mlir_kernel(tuning_kernels.scaled_copy, configs=configs)
    x = vector(40000)  # large enough to cross in shared memory, where the accuracy check reads it
    started = worker.started
    with caplog.at_level("WARNING"):
        result, run = tune(kernel, (x,))
    torch.testing.assert_close(result, x)
    assert kernel.bind((x,))._config == configs[3]
    assert run.failures == 1 and "block size" in caplog.text  # the lowering's reason is logged
    assert run.dropped == 1 and "(worker died)" in caplog.text  # the abort, tried twice, is no compile failure
    assert worker.started > started  # the abort ended a worker, not this process


@pytest.mark.parametrize("size", [16, 256])  # 256: pickled, or in shared memory
def test_in_place_kernel_is_timed_from_fresh_copies(worker: JITWorker, size: int) -> None:
    kernel = mlir_kernel(tuning_kernels.add_in_place, configs=[helion.Config(block_sizes=[8, 8]),
                                                               helion.Config(block_sizes=[16, 16])])
    x, y = torch.ones(size, size), torch.ones(size, size)
    result, run = tune(kernel, (x, y))
    assert result is x and torch.equal(x, torch.full((size, size), 2.0))  # updated once, by the call itself
    assert run.timed == 2


def test_candidates_with_the_same_module_are_compiled_and_timed_once(worker: JITWorker) -> None:
    # A config list written for GPUs: the two differ in num_warps only, which a CPU ignores.
    configs = [helion.Config(block_sizes=[8, 8], num_warps=4), helion.Config(block_sizes=[8, 8], num_warps=8)]
    kernel = mlir_kernel(tuning_kernels.add_rows, configs=configs)
    x, y = torch.randn(32, 16), torch.randn(32, 16)
    result, run = tune(kernel, (x, y))
    torch.testing.assert_close(result, x + y)
    keys = {c.config["num_warps"]: c.module_key for c in run.kernels}
    assert keys[4] == keys[8] and run.timed == 1


# ------------------------------------------------------------------- settings and API


def test_effort_none_runs_the_default_config_without_tuning(worker: JITWorker) -> None:
    started = worker.started
    kernel = mlir_kernel(tuning_kernels.repeated_copy, autotune_effort="none")
    x = vector(100)
    torch.testing.assert_close(kernel(x), x * 2.0)
    assert kernel.bind((x,))._config["repeats"] == 64
    assert worker.started == started


def test_effort_environment_variable_is_read_when_the_kernel_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELION_AUTOTUNE_EFFORT", "none")
    kernel = mlir_kernel(tuning_kernels.repeated_copy)
    x = vector(100)
    with observed_sessions() as sessions:
        kernel(x)
    assert kernel.settings.autotune_effort == "none"
    assert sum(s.candidates for s in sessions) == 0


def test_legacy_use_default_config_variable_skips_tuning(monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(helion_backend.LEGACY_DEFAULT_CONFIG_ENV, "1")
    kernel = mlir_kernel(tuning_kernels.repeated_copy, autotune_effort="quick")
    x = vector(100)
    with caplog.at_level("WARNING"), observed_sessions() as sessions:
        torch.testing.assert_close(kernel(x), x * 2.0)
    assert sessions == [] and kernel.bind((x,))._config["repeats"] == 64
    assert "HELION_AUTOTUNE_EFFORT=none" in caplog.text


@pytest.mark.parametrize(("effort", "generations", "strategy"), [("quick", 5, "from_best_available"),
                                                                  ("full", 20, "from_random")])
def test_each_effort_configures_helions_search_with_its_profile(effort: str, generations: int,
                                                                strategy: str, worker: JITWorker) -> None:
    kernel = mlir_kernel(tuning_kernels.add_rows, autotune_effort=effort)
    args = (torch.randn(8, 8), torch.randn(8, 8))
    bound = kernel.bind(args)
    with tuning_session.tuning(bound, args, output_type=OutputType.LINALG_ON_TENSORS, force=False) as run:
        tuner = bound.settings.autotuner_fn(bound, args)
        assert bound.settings.autotune_config_overrides["num_warps"] == 4  # pinned while tuning
        budget = bound.settings.autotune_budget_seconds
    assert budget == tuning_session.DEFAULT_BUDGET_SECONDS[effort]
    search = tuner.autotuner
    assert type(search).__name__ == "LFBOTreeSearch" and type(tuner).__name__ == "CPUAutotuneCache"
    assert (search.max_generations, search.initial_population_strategy.value) == (generations, strategy)
    assert run.candidates == 0 and not bound.settings.autotune_config_overrides  # restored afterwards
    assert bound.settings.autotune_budget_seconds is None


def test_helion_autotuner_variable_chooses_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELION_AUTOTUNER", "PatternSearch")
    kernel = mlir_kernel(tuning_kernels.add_rows, autotune_effort="quick")
    args = (torch.randn(8, 8), torch.randn(8, 8))
    bound = kernel.bind(args)
    with tuning_session.tuning(bound, args, output_type=OutputType.LINALG_ON_TENSORS, force=False):
        assert type(bound.settings.autotuner_fn(bound, args).autotuner).__name__ == "PatternSearch"


def test_kernel_autotune_tunes_and_force_ignores_the_cache(worker: JITWorker) -> None:
    configs = [helion.Config(block_sizes=[256], repeats=64), helion.Config(block_sizes=[256], repeats=1)]
    kernel = mlir_kernel(tuning_kernels.repeated_copy, configs=configs)
    x = vector(1 << 14)
    with observed_sessions() as sessions:
        best = kernel.autotune((x,), force=False)
    assert best == configs[1] and sessions[0].timed == 2
    torch.testing.assert_close(kernel(x), x * 2.0)


def test_a_budget_too_short_to_time_anything_runs_the_default_config_uncached(
        worker: JITWorker, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kernel = mlir_kernel(tuning_kernels.repeated_copy, autotune_effort="quick", autotune_budget_seconds=0)
    x = vector(100)
    with caplog.at_level("WARNING"):
        result, run = tune(kernel, (x,))
    torch.testing.assert_close(result, x * 2.0)
    assert kernel.bind((x,))._config["repeats"] == 64 and run.timed == 0
    assert run.untimed == kernel.bind((x,)).config_spec.default_config()
    assert "ran out before any config was timed; " in caplog.text and ", not cached" in caplog.text
    assert not list((tmp_path / "cache").rglob("*.best_config"))  # a later run with more time tunes it


def test_a_budget_too_short_to_time_a_configs_list_runs_its_first_config(worker: JITWorker) -> None:
    configs = [helion.Config(block_sizes=[256], repeats=1), helion.Config(block_sizes=[128], repeats=64)]
    kernel = mlir_kernel(tuning_kernels.repeated_copy, configs=configs, autotune_budget_seconds=0)
    x = vector(1000)
    result, run = tune(kernel, (x,))
    torch.testing.assert_close(result, x * 2.0)
    assert run.untimed == configs[0] and kernel.bind((x,))._config == configs[0]


def test_a_search_without_a_working_config_within_its_budget_still_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def finds_nothing(search: Any, **_options: Any) -> helion.Config:
        raise helion.exc.NoConfigFound

    monkeypatch.setattr(tuning_session.LFBOTreeSearch, "autotune", finds_nothing)
    kernel = mlir_kernel(tuning_kernels.repeated_copy, autotune_effort="quick", autotune_budget_seconds=600)
    with pytest.raises(helion.exc.NoConfigFound):
        kernel(vector(100))


def test_unsupported_cache_class_names_the_setting() -> None:
    kernel = mlir_kernel(tuning_kernels.add_rows, autotune_effort="quick", autotune_cache="RemoteAutotuneCache")
    with pytest.raises(HelionMLIRError, match="HELION_AUTOTUNE_CACHE='RemoteAutotuneCache'"):
        kernel(torch.randn(8, 8), torch.randn(8, 8))


# --------------------------------------------------------------------- the worker


def _module(name: str, body: str) -> CandidateModule:
    text = f"func.func @{name}(%arg0: tensor<4xf32>) -> tensor<4xf32> {{\n{body}\n}}\n"
    return CandidateModule(text, name, OutputType.LINALG_ON_TENSORS, "fast", 1, True)


DOUBLE = _module("double", """
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.add ins(%arg0, %arg0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>""")

def _scaled(factor: int) -> CandidateModule:
    return _module(f"scaled{factor}", f"""
  %e = tensor.empty() : tensor<4xf32>
  %c = arith.constant {factor}.0 : f32
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %0 = linalg.mul ins(%arg0, %f : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>""")


def test_compiles_in_flight_are_bounded_so_the_pipe_cannot_fill_both_ways(worker: JITWorker) -> None:
    """A search may send hundreds of candidates before it reads an answer; unbounded, the
    worker and the tuning process both end up blocked writing to each other."""
    functions = []
    for factor in range(3 * MAX_PENDING_COMPILES):
        functions.append(worker.compile(_scaled(factor), wait=False))
        assert len(worker._pending) <= MAX_PENDING_COMPILES
    x = torch.arange(4, dtype=torch.float32)
    for factor, function in enumerate(functions):
        torch.testing.assert_close(function(x)[0], x * factor)


def test_more_finalists_than_the_worker_keeps_arguments_for_are_timed_together(worker: JITWorker) -> None:
    """Helion's full search re-times up to eighteen finalists at once; the worker keeps the
    arguments of fewer, and times the others on those of a candidate of the same call."""
    functions = [worker.compile(_scaled(factor)) for factor in range(WORKER_ARGUMENTS + 4)]
    x = torch.arange(4, dtype=torch.float32)
    for factor, function in enumerate(functions):
        torch.testing.assert_close(function(x)[0], x * factor)
    samples = worker.interleave(functions, repeat=2, max_total_ms=None)
    assert len(samples) == len(functions)
    assert all(s and all(t > 0 for t in s) for s in samples)


def test_a_candidate_whose_arguments_no_kept_call_matches_is_refused(worker: JITWorker) -> None:
    wide = CandidateModule("""func.func @wide(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
""", "wide", OutputType.LINALG_ON_TENSORS, "fast", 1, True)
    first = worker.compile(wide)
    first(torch.zeros(8))
    for factor in range(WORKER_ARGUMENTS):  # pushes the 8-element call out
        worker.compile(_scaled(factor))(torch.zeros(4))
    with pytest.raises(ExecutionError, match="has not run yet"):
        worker.interleave([first], repeat=1, max_total_ms=None)


def _filling(rows: int) -> CandidateModule:
    """A candidate that fills an output the host code allocated with ``rows`` elements (as
    ``cdiv(m, block_m)`` rows depend on a block size), and aborts on an output of another size."""
    text = f"""func.func @fill{rows}(%arg0: tensor<4xf32>, %out: tensor<?xf32>) -> tensor<?xf32> {{
  %c0 = arith.constant 0 : index
  %rows = arith.constant {rows} : index
  %size = tensor.dim %out, %c0 : tensor<?xf32>
  %ok = arith.cmpi eq, %size, %rows : index
  cf.assert %ok, "called with another candidate's output"
  %one = arith.constant 1.0 : f32
  %0 = linalg.fill ins(%one : f32) outs(%out : tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}}
"""
    return CandidateModule(text, f"fill{rows}", OutputType.LINALG_ON_TENSORS, "fast", 1, True)


def test_finalists_whose_arguments_went_are_timed_on_outputs_of_their_own_sizes(worker: JITWorker) -> None:
    """A candidate timed on another's arguments gets the outputs the host code allocated at
    its own sizes: its code relies on the sizes its launch checked, and writes past the end
    of a smaller output (which corrupted the worker's heap and killed it)."""
    functions = [worker.compile(_filling(rows)) for rows in range(1, WORKER_ARGUMENTS + 5)]
    x = torch.zeros(4)
    for rows, function in enumerate(functions, start=1):
        assert function.held_by == (1,)  # the result is written into the output in place
        torch.testing.assert_close(function(x, torch.empty(rows), allocated=frozenset({1}))[0], torch.ones(rows))
    samples = worker.interleave(functions, repeat=2, max_total_ms=None)
    assert len(samples) == len(functions) and all(s and all(t > 0 for t in s) for s in samples)


ABORT = _module("boom", """
  %false = arith.constant false
  cf.assert %false, "candidate aborts"
  return %arg0 : tensor<4xf32>""")

SPIN = _module("spin", """
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %r = scf.while (%t = %arg0) : (tensor<4xf32>) -> tensor<4xf32> {
    %v = tensor.extract %t[%c0] : tensor<4xf32>
    %go = arith.cmpf oge, %v, %v : f32
    scf.condition(%go) %t : tensor<4xf32>
  } do {
  ^bb0(%t: tensor<4xf32>):
    %v = tensor.extract %t[%c0] : tensor<4xf32>
    %w = arith.addf %v, %one : f32
    %n = tensor.insert %w into %t[%c0] : tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>""")


def test_worker_abort_is_tried_again_then_fails_the_run_and_a_new_worker_takes_over(worker: JITWorker) -> None:
    x = torch.arange(4.0)
    aborting = worker.compile(ABORT)
    started = worker.started
    with pytest.raises(WorkerDiedError, match="killed by SIGABRT while running @boom"):
        aborting(x)
    assert worker.started == started + 1  # tried once more in a new worker
    assert worker.dropped(aborting.key) and worker.failure(aborting.key) is None  # not a compile failure
    died = "the JIT worker was killed by SIGABRT while running @boom; "
    assert worker.deaths[-2:] == [f"{died}trying again in a new worker",
                                  f"{died}dropping @boom: its JIT worker died 2 times while running it (worker died)"]
    (doubled,) = worker.compile(DOUBLE)(x)
    assert torch.equal(doubled, x * 2) and worker.started == started + 2


def test_worker_abandons_a_run_past_its_time_limit(worker: JITWorker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "run_timeout", 2.0)
    spinning = worker.compile(SPIN)
    with pytest.raises(ExecutionError, match="running @spin took longer than 2 s"):
        spinning(torch.zeros(4))
    (doubled,) = worker.compile(DOUBLE)(torch.ones(4))
    assert torch.equal(doubled, torch.full((4,), 2.0))


def test_worker_reports_a_compile_failure_with_its_reason(worker: JITWorker) -> None:
    broken = _module("broken", "  return %undefined : tensor<4xf32>")
    with pytest.raises(ExecutionError, match="compiling @broken in the JIT worker failed: MLIRVerificationError: .* does not verify"):
        worker.compile(broken)


N = 1 << 15  # f32 elements: 128 KiB, past protocol.SHARED_MEMORY_MIN_BYTES

DOUBLE_AND_SAME = CandidateModule(f"""func.func @double_and_same(%arg0: tensor<{N}xf32>) -> (tensor<{N}xf32>, tensor<{N}xf32>) {{
  %e = tensor.empty() : tensor<{N}xf32>
  %0 = linalg.add ins(%arg0, %arg0 : tensor<{N}xf32>, tensor<{N}xf32>) outs(%e : tensor<{N}xf32>) -> tensor<{N}xf32>
  return %0, %arg0 : tensor<{N}xf32>, tensor<{N}xf32>
}}
""", "double_and_same", OutputType.LINALG_ON_TENSORS, "fast", 1, True)

PARALLEL_DOUBLE = CandidateModule(f"""func.func @parallel_double(%arg0: tensor<{N}xf32>) -> tensor<{N}xf32> {{
  %e = tensor.empty() : tensor<{N}xf32>
  %r = scf.forall (%i) in ({N}) shared_outs(%o = %e) -> tensor<{N}xf32> {{
    %v = tensor.extract %arg0[%i] : tensor<{N}xf32>
    %w = arith.addf %v, %v : f32
    %s = tensor.from_elements %w : tensor<1xf32>
    scf.forall.in_parallel {{
      tensor.parallel_insert_slice %s into %o[%i] [1] [1] : tensor<1xf32> into tensor<{N}xf32>
    }}
  }}
  return %r : tensor<{N}xf32>
}}
""", "parallel_double", OutputType.LINALG_ON_TENSORS, "fast", 2, True)


def test_large_arguments_and_results_cross_in_shared_memory_and_stay_the_callers(worker: JITWorker) -> None:
    function = worker.compile(DOUBLE_AND_SAME)
    wide = torch.randn(N, 2, generator=torch.Generator().manual_seed(1))
    x = wide[:, 1]  # strided: the worker gets the whole storage and the view
    expected = x * 2
    sent, received = copy.copy(worker.sent), copy.copy(worker.received)
    doubled, same = function(x)
    assert worker.sent.pipe_bytes - sent.pipe_bytes < 4096
    assert worker.received.pipe_bytes - received.pipe_bytes < 4096
    assert worker.sent.shared_bytes - sent.shared_bytes == wide.nbytes
    assert worker.received.shared_bytes - received.shared_bytes == 2 * x.nbytes
    assert torch.equal(doubled, expected) and torch.equal(same, x)
    later, _ = function(torch.ones(N))  # the worker's next call does not touch results already returned
    assert torch.equal(later, torch.full((N,), 2.0)) and torch.equal(doubled, expected)
    wide.zero_()  # a result that was the argument is a copy of it, not the caller's memory
    assert torch.equal(same, expected / 2)
    assert worker.time(function, warmup_ms=1.0, rep_ms=2.0)  # timed on the arguments it kept


def _names_another_live_process(name: str, dead: int) -> bool:
    return any(int(n) != dead and Path(f"/proc/{n}").exists() for n in re.findall(r"\d+", name) if int(n) > 1)


def test_a_killed_worker_leaves_nothing_in_dev_shm(worker: JITWorker) -> None:
    before = set(os.listdir("/dev/shm"))
    function = worker.compile(PARALLEL_DOUBLE)
    x = torch.randn(N)
    assert torch.equal(function(x)[0], x * 2)  # it holds x and has started its OpenMP threads
    assert worker._process is not None
    pid, started = worker._process.pid, worker.started
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert "/memfd:helion-mlir-tensor" in maps and "/dev/shm/" not in maps
    os.kill(pid, signal.SIGKILL)
    worker._process.wait()
    assert torch.equal(function(x)[0], x * 2) and worker.started == started + 1
    left = [n for n in set(os.listdir("/dev/shm")) - before if not _names_another_live_process(n, pid)]
    assert left == []


# ------------------------------------------------------------------ the command line


def test_tune_command_prints_the_best_config_times_and_cache_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "kernels_to_tune.py"
    source.write_text(textwrap.dedent(
        """
        import helion
        import helion.language as hl
        import torch


        @helion.kernel(config=helion.Config(block_sizes=[8]))  # tuning ignores the file's config
        def double(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size(0)):
                out[tile] = x[tile] * 2.0
            return out


        def reference(x: torch.Tensor) -> torch.Tensor:
            return x * 2.0
        """
    ))
    argv = ["tune", f"{source}:double", "--args", "f32[3000]"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "searched " in first and "best config: helion.Config(" in first
    rounds, _, times = first.split("times of a call (median of ")[1].splitlines()[0].partition(" interleaved")
    assert int(rounds) >= 5 and times.startswith(" calls each): tuned ") and "torch eager " in times
    assert "default config " in times or times.split(",")[0].endswith("(the default config)")
    cache_file = first.split("cached in: ")[1].split()[0]
    assert Path(cache_file).is_file()
    assert main([*argv, "--config", '{"block_sizes": [64]}']) == 0
    second = capsys.readouterr().out
    assert "cached result: nothing compiled or timed" in second
    assert re.search(r"--config \d+\.\d{3} ms \(\d+\.\d\dx the tuned time\)", second)  # timed beside the others


def test_tune_command_with_a_budget_too_short_to_time_anything_prints_the_default_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "short_budget.py"
    source.write_text(textwrap.dedent(
        """
        import helion
        import helion.language as hl
        import torch


        @helion.kernel()
        def double(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size(0)):
                out[tile] = x[tile] * 2.0
            return out
        """
    ))
    monkeypatch.setenv("HELION_AUTOTUNE_BUDGET_SECONDS", "0")
    assert main(["tune", f"{source}:double", "--args", "f32[300]"]) == 0
    out = capsys.readouterr().out
    assert "nothing was timed within the autotune budget: the default config runs, and is not cached" in out
    assert "(the default config)" in out.split("best config: ")[1].splitlines()[0]
    assert "cached in:" not in out


def test_an_interrupted_request_does_not_leave_its_answer_to_the_next(worker: JITWorker,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    doubling = worker.compile(DOUBLE)
    doubling(torch.ones(4))
    real_receive = worker_module.receive

    def interrupted(conn: Any, *rest: Any) -> Any:
        monkeypatch.setattr(worker_module, "receive", real_receive)
        raise KeyboardInterrupt

    monkeypatch.setattr(worker_module, "receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        doubling(torch.full((4,), 5.0))  # its answer is never read
    (result,) = doubling(torch.full((4,), 3.0))
    assert torch.equal(result, torch.full((4,), 6.0))
