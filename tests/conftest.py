"""Shared test configuration.

Hypothesis profiles: ``ci`` (the default) is derandomized so every CI run checks the
same examples; ``explore`` runs thousands of random examples when hunting for bugs:
``scripts/test tests/test_inline_properties.py --hypothesis-profile=explore``.

The config fuzzer (tests/test_config_fuzz.py) takes ``--fuzz-configs N`` (configs per
example, 2 in CI) and ``--fuzz-seed S`` (0 in CI; another seed draws other configs).
``--iree-all`` compiles every example for every GPU target (tests/test_iree_gpu_targets.py)
and runs every 16-bit-float example and integer -> bf16 case on CPUs without native bf16
(tests/test_examples_iree.py, tests/test_cpu_portability.py; CI runs a subset of each).

Tests marked ``stress`` repeat what a default test does at full size (many rounds of
threads, say); they take minutes and run only with ``--stress``
(``scripts/test tests/test_threads.py --stress``).
"""

from __future__ import annotations

from collections.abc import Iterator
import weakref
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from examples_util import example_names
from model_counts import ModelCounts

import helion_mlir  # noqa: F401  (installs its Helion hook before any test binds a kernel)
from helion_mlir import caches
from helion_mlir.lowering import kernel_config
from helion_mlir.runtime.backend import helion_backend
from helion_mlir.runtime.kernel.compiled_kernel import clear_kernel_cache
from helion_mlir.runtime.cpu.rewrites.tensor import tile_parallel
from helion_mlir.runtime.tuning import session as tuning_session
from helion_mlir.runtime.tuning.worker import JITWorker

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore",
    max_examples=5000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("config fuzzing")
    group.addoption("--fuzz-configs", type=int, default=2, metavar="N",
                    help="random configs per example in tests/test_config_fuzz.py (default 2)")
    group.addoption("--fuzz-seed", type=int, default=0, metavar="S",
                    help="base seed of the fuzzed configs (default 0: the configs CI checks)")
    parser.addoption("--stress", action="store_true", help="also run the tests marked stress (minutes each)")
    parser.addoption("--timing", action="store_true",
                     help="also run the tests marked timing (wall-clock comparisons; on a machine running nothing else)")
    parser.addoption("--iree-all", action="store_true",
                     help="compile every example for every GPU target (tests/test_iree_gpu_targets.py, about an "
                          "hour on one core) and run every 16-bit-float example and integer -> bf16 case on CPUs "
                          "without native bf16 (tests/test_examples_iree.py, tests/test_cpu_portability.py); "
                          "CI runs a representative subset of each")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _group_by_example(items)
    for marker, option, reason in (("stress", "--stress", "a stress test: run with --stress"),
                                   ("timing", "--timing", "compares wall-clock timings: run with --timing on an idle machine")):
        if config.getoption(option):
            continue
        for item in items:
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist sends the test ids to its scheduler
def pytest_collection_finish(session: pytest.Session) -> None:
    """Keep ``--dist loadgroup``'s groups on one worker each. pytest-xdist 3.8 groups a test
    by writing ``nodeid@group`` to ``item._nodeid``, which pytest 9.2 no longer reads (the id
    is ``item._id``): the groups were split over both workers silently, each repeating the
    group's costly fixtures (child processes, the JIT worker, bound examples). A group that
    still fails to reach the id stops the run instead of costing minutes unnoticed."""
    if not getattr(session.config.option, "loadgroup", False):  # set on pytest-xdist's workers
        return
    for item in session.items:
        grouped = getattr(item, "_nodeid", None)
        if isinstance(grouped, str) and grouped != item.nodeid and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId  # pytest >= 9.2, where the id left _nodeid

            item._id = NodeId.parse(grouped)
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"--dist loadgroup: {len(lost)} grouped tests lost their xdist group, "
                                f"{lost[0]} first; this pytest-xdist does not group under this pytest")


def _group_by_example(items: list[pytest.Item]) -> None:
    """The tests of one example run in one process under ``-n N --dist loadgroup``
    (scripts/test): binding is the costly part of many example tests, and Helion reuses a
    bound kernel (as examples_util reuses reference results) within one process only."""
    examples = set(example_names())
    for item in items:
        params = getattr(item, "callspec", None)
        params = params.params if params is not None else {}
        example = next((v for k, v in params.items()
                        if k in ("name", "example") and isinstance(v, str) and v in examples), None)
        if example is not None:
            item.add_marker(pytest.mark.xdist_group(f"example-{example}"))


@pytest.fixture(scope="session", autouse=True)
def _private_autotune_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Autotuning results go to, and come from, a directory of the test session's own: the
    suite never reads or writes the user's Helion cache. The disk cache is off (a test's
    compile must compile, and linking every module would cost the suite minutes); its tests
    turn it on in directories of their own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HELION_CACHE_DIR", str(tmp_path_factory.mktemp("helion-cache")))
        patch.setenv(caches.ENABLE_VARIABLE, "0")
        yield


@pytest.fixture
def disk_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The disk cache on (the suite runs with it off), in an empty directory of the test's
    own, under its default size bound. The tests that use it clear their memory caches."""
    directory = tmp_path / "disk-cache"
    monkeypatch.setenv(caches.ENABLE_VARIABLE, "1")
    monkeypatch.setenv(caches.DIRECTORY_VARIABLE, str(directory))
    monkeypatch.delenv(caches.BYTES_VARIABLE, raising=False)
    return directory


@pytest.fixture(scope="module")
def parallel_even_when_small() -> Iterator[None]:
    """Tile loops run in parallel whenever that is legal, however small the inputs, so
    that small test inputs exercise the parallel code that large ones get."""
    saved = tile_parallel.MIN_PARALLEL_WORK
    tile_parallel.MIN_PARALLEL_WORK = 0
    clear_kernel_cache()  # compiled kernels are cached without the threshold in their key
    yield
    tile_parallel.MIN_PARALLEL_WORK = saved
    clear_kernel_cache()


@pytest.fixture(scope="session")
def tuning_worker() -> Iterator[JITWorker]:
    """One JIT worker for the tuning tests of a test process (each start costs seconds; the
    modules that use it are in one xdist group)."""
    worker = JITWorker()
    yield worker
    worker.close()


@pytest.fixture
def tuning_run_worker(tuning_worker: JITWorker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> JITWorker:
    """The test's tuning runs use :func:`tuning_worker`, a cache directory of the test's own,
    and Helion's defaults for the variables that force, skip or choose a search."""
    monkeypatch.setattr(tuning_session, "shared_worker", lambda: tuning_worker)
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("HELION_FORCE_AUTOTUNE", "HELION_SKIP_CACHE", "HELION_AUTOTUNER",
                 helion_backend.LEGACY_DEFAULT_CONFIG_ENV):
        monkeypatch.delenv(name, raising=False)
    return tuning_worker


# tests/data/conformance/ is a stand-in Helion checkout that test_conformance_runner.py runs;
# its test module is not one of this suite's.
collect_ignore_glob = ["data/*"]


@pytest.fixture
def model_counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelCounts]:
    """Counts of kernel models and config resolutions from here on, nothing compiled or
    resolved before (tests/model_counts.py)."""
    clear_kernel_cache()
    monkeypatch.setattr(kernel_config, "_RESOLVED", weakref.WeakKeyDictionary())  # nothing resolved yet
    yield ModelCounts(monkeypatch)
    clear_kernel_cache()
