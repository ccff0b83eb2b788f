"""pytest plugin the conformance runner loads into each module's process (``-p conformance_plugin``).

It makes Helion's own tests run on CPU through helion_mlir and records each test's outcome:

* ``DEVICE`` is the CPU; kernels' backend is ``mlir`` (``HELION_BACKEND``, set by the runner).
  The tests use the installed Helion's ``helion._testing`` (``code_and_output`` and
  ``output_only`` then compile through the backend); configs reach the kernel as the tests give
  them. Its helpers (skip conditions, ``onlyBackends``, ``skipIfNotTriton``) take the backend for
  Triton (``$CONFORMANCE_TESTS_BACKEND=triton``, the default: the mlir backend is Triton's front
  end with another code generator, so every test the Triton backend runs is run), or for
  ``mlir``, which ``onlyBackends`` accepts where it accepts Triton, as it accepts ``tileir``.
  Test bodies that read ``helion.runtime.settings._get_backend`` see ``mlir``.
* Assertions on generated code are skipped and counted (:mod:`conformance_guard`), and so is
  ``assertExpectedJournal``.
* ``aten::{mm,bmm,addmm,baddbmm}.dtype`` get the CPU kernels torch lacks
  (``register_cpu_matmul_dtype_overloads``: float32 accumulation, then the output dtype, as
  CUDA computes them): tests compute their own references with them
  (``torch.bmm(a, b, out_dtype=torch.float32)``), and reference mode's ``hl.dot`` calls them.
* One JSON line per event goes to ``$CONFORMANCE_RESULTS``: the collected test ids, a ``start``
  line before each test (a process that dies leaves it last, naming the test that killed it),
  and a ``result`` line with the test's kind (:mod:`conformance_classify`). A test running past
  ``$CONFORMANCE_TEST_TIMEOUT`` seconds is recorded as ``timeout`` and ends the process, which
  the runner starts again after it. Ids listed in ``$CONFORMANCE_SKIP_IDS`` (done before a
  restart) are deselected.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import conformance_classify
import conformance_guard

RESULTS_ENV = "CONFORMANCE_RESULTS"
SKIP_IDS_ENV = "CONFORMANCE_SKIP_IDS"
TIMEOUT_ENV = "CONFORMANCE_TEST_TIMEOUT"
PIPELINE_ENV = "CONFORMANCE_PIPELINE"
TESTS_BACKEND_ENV = "CONFORMANCE_TESTS_BACKEND"
TIMEOUT_EXIT_CODE = 75


class _Recorder:
    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self._lock = threading.Lock()

    def write(self, **record: Any) -> None:
        if self._file is None:
            return
        with self._lock:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()


_RECORDER = _Recorder(None)
_OUTCOMES: dict[str, dict[str, Any]] = {}


def _rewrite_test_modules() -> None:
    """Apply the code-assertion guard before pytest's own assertion rewrite, and read no cached pyc."""
    from _pytest.assertion import rewrite

    pytest_rewrite = rewrite.rewrite_asserts

    @functools.wraps(pytest_rewrite)
    def rewrite_asserts(mod: Any, source: bytes, module_path: str | None = None, config: Any = None) -> None:
        if module_path and Path(module_path).name.startswith("test_"):
            conformance_guard.guard_code_assertions(mod)
        pytest_rewrite(mod, source, module_path, config)

    rewrite.rewrite_asserts = rewrite_asserts
    rewrite._read_pyc = lambda *args, **kwargs: None


def _wrap_code_sources() -> None:
    """Text from Helion's code generators comes back as GeneratedCode."""
    import helion.experimental
    from helion.runtime.kernel import BoundKernel

    for name in ("to_code", "to_triton_code"):
        method = getattr(BoundKernel, name, None)
        if method is None:
            continue

        def wrapped(self: Any, *args: Any, _method: Any = method, **kwargs: Any) -> Any:
            return conformance_guard.remember_code(_method(self, *args, **kwargs))

        setattr(BoundKernel, name, functools.wraps(method)(wrapped))
    backward = getattr(helion.experimental, "backward", None)
    if backward is not None:
        @functools.wraps(backward)
        def backward_with_code(*args: Any, **kwargs: Any) -> Any:
            result = backward(*args, **kwargs)
            if kwargs.get("return_code") and isinstance(result, tuple):
                return (result[0], *(conformance_guard.remember_code(part) for part in result[1:]))
            return result

        helion.experimental.backward = backward_with_code


def _prepare_helion(checkout: Path) -> None:
    """CPU device (with torch's missing CPU matmul ``.dtype`` kernels), the mlir backend accepted as a
    Triton front end, journal checks counted and skipped, and the installed ``helion._testing``
    pointed at the checkout's examples."""
    import torch

    import helion
    import helion_mlir  # noqa: F401  (registers the "mlir" backend before Helion reads HELION_BACKEND)
    from helion import _testing
    from helion_mlir.runtime.reference import register_cpu_matmul_dtype_overloads

    if Path(helion.__file__).resolve().is_relative_to(checkout):
        raise pytest.UsageError(f"helion was imported from the checkout ({helion.__file__}), not the installed one")
    # The tests import the checkout's ``examples`` package, as when run from its root; last on
    # the path, and after the installed helion is imported, so the checkout's helion/ stays unused.
    sys.path.append(str(checkout))
    if os.environ.get(TESTS_BACKEND_ENV, "triton") == "triton":
        _testing._get_backend = lambda: "triton"
    _testing.DEVICE = torch.device("cpu")
    _place_accelerator_on_cpu(torch)
    register_cpu_matmul_dtype_overloads()
    _testing.PROJECT_ROOT = checkout
    _testing.EXAMPLES_DIR = checkout / "examples"
    _testing.PRETUNED_KERNELS_DIR = checkout / "pretuned_kernels"

    def matches_backends(backends: Any) -> bool:
        backend = _testing._get_backend()
        return backend in backends or (backend in ("tileir", "mlir") and "triton" in backends)

    _testing.matchesBackends = matches_backends

    def assert_expected_journal(self: Any, value: str) -> None:
        conformance_guard.note_neutralized()

    _testing.TestCase.assertExpectedJournal = assert_expected_journal
    code_and_output = _testing.code_and_output

    @functools.wraps(code_and_output)
    def code_and_output_marked(*args: Any, **kwargs: Any) -> Any:
        code, result = code_and_output(*args, **kwargs)  # in ref mode, the kernel's source
        return conformance_guard.remember_code(code), result

    _testing.code_and_output = code_and_output_marked
    _wrap_code_sources()
    _choose_pipeline()


def _place_accelerator_on_cpu(torch: Any) -> None:
    """``torch.accelerator.current_accelerator()`` answers the CPU to the tests where torch has
    no accelerator.

    The tests take it for the kernels' device, as ``DEVICE`` is: they draw the seed a kernel's
    random ops use as Helion's backends draw it (``inductor_prims.seeds(n, <that device>)``) and
    compare the kernel's bits with Helion's Philox reference for that seed. Here kernels run on
    the CPU and draw their seeds from its generator; torch's answer, None, fails in
    ``inductor_prims.seeds`` before the kernel runs (Helion's own tests patch it so for Pallas).
    Only calls from a test module get the CPU: torch's ``torch.accelerator.is_available()`` and
    ``synchronize()``, which Helion's autotuner calls, read the same function.
    """
    current_accelerator = torch.accelerator.current_accelerator

    @functools.wraps(current_accelerator)
    def current_accelerator_or_cpu(check_available: bool = False) -> Any:
        found = current_accelerator(check_available)
        if found is None and "/test/test_" in sys._getframe(1).f_code.co_filename:
            return torch.device("cpu")
        return found

    torch.accelerator.current_accelerator = current_accelerator_or_cpu


def _choose_pipeline() -> None:
    """``$CONFORMANCE_PIPELINE=plain`` compiles the backend's kernels with the plain pipeline."""
    pipeline = os.environ.get(PIPELINE_ENV, "fast")
    if pipeline == "fast":
        return
    from helion_mlir.runtime.backend import helion_backend
    from helion_mlir.runtime.kernel import compiled_kernel

    helion_backend.compile_kernel = functools.partial(compiled_kernel.compile_kernel, pipeline=pipeline)


def pytest_configure(config: pytest.Config) -> None:
    global _RECORDER
    _RECORDER = _Recorder(os.environ.get(RESULTS_ENV))
    _rewrite_test_modules()
    conformance_guard.mark_regex_results()
    _prepare_helion(config.rootpath.resolve())


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[Any]) -> None:
    skip_file = os.environ.get(SKIP_IDS_ENV)
    done = set(Path(skip_file).read_text().split("\n")) if skip_file and Path(skip_file).exists() else set()
    if done:
        deselected = [item for item in items if item.nodeid in done]
        items[:] = [item for item in items if item.nodeid not in done]
        config.hook.pytest_deselected(items=deselected)


def pytest_collection_finish(session: pytest.Session) -> None:
    _RECORDER.write(event="collected", nodeids=[item.nodeid for item in session.items])  # after -k


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _RECORDER.write(event="collect_error", path=report.nodeid,
                        **conformance_classify.classify_collect_error(str(report.longrepr)))


def _watchdog(nodeid: str, timeout: float, finished: threading.Event) -> None:
    if not finished.wait(timeout):
        _RECORDER.write(event="result", nodeid=nodeid, kind="timeout", error_type=None, origin=None,
                        reason=f"still running after {timeout:g} s (per-test limit)", duration=timeout,
                        neutralized=conformance_guard.counts())
        os._exit(TIMEOUT_EXIT_CODE)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
    conformance_guard.reset()
    _RECORDER.write(event="start", nodeid=item.nodeid)
    _OUTCOMES[item.nodeid] = {}
    finished = threading.Event()
    timeout = float(os.environ.get(TIMEOUT_ENV, "0") or 0)
    if timeout > 0:
        threading.Thread(target=_watchdog, args=(item.nodeid, timeout, finished), daemon=True).start()
    start = time.monotonic()
    yield
    finished.set()
    outcome = _OUTCOMES.pop(item.nodeid, {}) or {"kind": "passed", "error_type": None, "origin": None,
                                                 "reason": ""}
    _RECORDER.write(event="result", nodeid=item.nodeid, duration=round(time.monotonic() - start, 3),
                    neutralized=conformance_guard.counts(), **outcome)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    result = yield
    report = result.get_result()
    recorded = _OUTCOMES.get(item.nodeid)
    if recorded is None or recorded.get("kind") not in (None, "passed"):
        return  # the first phase that did not pass decides
    outcome = conformance_classify.classify_report(report, call)
    if outcome is not None:
        _OUTCOMES[item.nodeid] = outcome
