"""scripts/helion_conformance: Helion's test modules run through helion_mlir, each test classified.

The end-to-end test runs the runner over a stand-in checkout (tests/data/conformance/, one
test of each kind of outcome, one of them aborting its process); the others check in-process
how assertions on generated code are neutralized, how exceptions are classified and how the
reports are written.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import conformance_classify as kinds  # noqa: E402
import conformance_guard as guard  # noqa: E402
import conformance_report  # noqa: E402
from helion_conformance import ModuleRun  # noqa: E402

import helion_mlir  # noqa: E402,F401
from helion_mlir.errors import HelionMLIRError  # noqa: E402

STAND_IN = Path(__file__).resolve().parent / "data" / "conformance"


# ------------------------------------------------------------------------------ end to end
@pytest.mark.slow
def test_runner_classifies_each_outcome_of_a_stand_in_checkout_and_goes_on_after_a_crash(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# Intro kept\n\n{conformance_report.BEGIN}\nold results\n{conformance_report.END}\n\nOutro kept\n")
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "helion_conformance.py"), str(STAND_IN), "--modules", "x", "--no-ref",
         "--report", str(report_path), "--markdown", str(page), "--work-dir", str(tmp_path / "work"),
         "--helion-commit", "0123abcd"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    outcome = {test["id"].rsplit("::", 1)[-1]: test["mlir"] for test in report["tests"]}
    expected = {
        "test_a_passes_with_code_assertions": kinds.PASSED,
        "test_b_wrong_numbers": kinds.WRONG_NUMBERS,
        "test_c_typed_refusal": kinds.TYPED_REFUSAL,
        "test_d_crash": kinds.CRASH,
        "test_e_expected_error_not_raised": kinds.ASSERTION_FAILED,
        "test_f_needs_newer_helion": kinds.VERSION_SKEW,
        "test_g_skipped": kinds.SKIPPED,
        "test_h_after_the_crash": kinds.PASSED,
    }
    assert {name: o["kind"] for name, o in outcome.items()} == expected
    assert outcome["test_a_passes_with_code_assertions"]["neutralized"] == 3
    assert outcome["test_c_typed_refusal"]["error_type"] == "UnsupportedNodeError"
    assert outcome["test_c_typed_refusal"]["origin"] == "helion_mlir"
    assert "SIGABRT" in outcome["test_d_crash"]["reason"]
    assert "Mismatched elements: 20 / 20" in outcome["test_b_wrong_numbers"]["reason"]
    assert outcome["test_g_skipped"]["reason"] == "needs an accelerator"
    assert report["modules"][0]["restarts"] == {"mlir": 1}
    assert report["totals"]["mlir"]["neutralized"] == 3
    assert report["environment"]["helion_commit"] == "0123abcd"
    text = page.read_text()
    assert text.startswith("# Intro kept\n") and text.endswith("\n\nOutro kept\n") and "old results" not in text
    assert "| x | 8 | 2 | 1 | 1 | 1 |" in text
    assert "- `TestX::test_d_crash`: crash: process killed by SIGABRT" in text


# ---------------------------------------------------------------------- code assertions
GUARDED_SOURCE = '''
def check(code, out, ref, flag):
    assert "tl.load" in code
    lines = code.splitlines()
    assert len([line for line in lines if "tl.store" in line]) == 7
    case.assertIn("tl.dot", code[: code.index("def")])
    case.assertEqual(code.count("x"), 12)
    case.assertTrue(flag, f"not in {code}")
    assert out == ref
'''


class _Case:
    def assertIn(self, member: Any, container: Any) -> None:  # noqa: N802
        assert member in container

    def assertEqual(self, first: Any, second: Any) -> None:  # noqa: N802
        assert first == second

    def assertTrue(self, expr: Any, msg: str = "") -> None:  # noqa: N802
        assert expr, msg


def _guarded_check() -> types.FunctionType:
    tree = ast.parse(GUARDED_SOURCE)
    guard.guard_code_assertions(tree)
    namespace: dict[str, Any] = {"case": _Case()}
    exec(compile(tree, "<guarded>", "exec"), namespace)
    return namespace["check"]


def test_assertions_on_generated_code_are_skipped_and_counted_while_the_others_still_run() -> None:
    check = _guarded_check()
    guard.reset()
    code = guard.remember_code("def kernel():\n    pass\n")
    check(code, 1, 1, True)
    assert guard.counts() == 4
    guard.reset()
    with pytest.raises(AssertionError):  # a numeric assertion is not neutralized
        check(guard.remember_code("def k(): pass"), 1, 2, True)
    guard.reset()
    with pytest.raises(AssertionError, match="not in def"):  # code in the message only does not count
        check(guard.remember_code("def k(): pass"), 1, 1, False)


def test_text_cut_from_generated_code_counts_as_code_and_unrelated_text_does_not() -> None:
    guard.reset()
    code = guard.remember_code("@triton.jit\ndef _helion_add(x, out):\n    tl.store(out, tl.load(x))\n")
    assert isinstance(code, guard.GeneratedCode)
    assert guard.is_code(code[5:40]) and guard.is_code(code.splitlines()) and guard.is_code(code.count("tl."))
    assert guard.is_code(str(code).split("\n")[1])  # a plain string found in the generated text
    import re

    assert guard.is_code(re.search(r"tl\.\w+", code))
    assert not guard.is_code("an unrelated message") and not guard.is_code(3) and not guard.is_code(torch.ones(2))
    assert not guard.is_code((code, torch.ones(2)))  # code_and_output's pair is not code as a whole


# ---------------------------------------------------------------------------- classification
def _raised(fn: Any) -> tuple[BaseException, types.TracebackType | None]:
    try:
        fn()
    except BaseException as err:  # noqa: BLE001
        return err, err.__traceback__
    raise AssertionError("did not raise")


def _kind(fn: Any) -> dict[str, Any]:
    return kinds.classify_exception(*_raised(fn))


def test_exceptions_are_classified_by_what_failed() -> None:
    def mismatch() -> None:
        torch.testing.assert_close(torch.zeros(3), torch.ones(3))

    def refusal() -> None:
        raise HelionMLIRError("no lowering for this node")

    def not_raised() -> None:
        raise AssertionError("ValueError not raised")

    def missing_name() -> None:
        from helion.language import a_name_no_helion_defines  # noqa: F401

    def untyped() -> None:
        raise ValueError("broken")

    def no_gpu() -> None:
        raise AssertionError("Torch not compiled with CUDA enabled")

    assert _kind(mismatch)["kind"] == kinds.WRONG_NUMBERS
    assert _kind(refusal) == {"kind": kinds.TYPED_REFUSAL, "reason": "no lowering for this node",
                              "error_type": "HelionMLIRError", "origin": "helion_mlir"}
    assert _kind(not_raised)["kind"] == kinds.ASSERTION_FAILED
    assert _kind(missing_name)["kind"] == kinds.VERSION_SKEW
    assert _kind(untyped) == {"kind": kinds.OTHER_ERROR, "reason": "ValueError: broken", "error_type": "ValueError",
                              "origin": "other"}
    assert _kind(no_gpu)["kind"] == kinds.ACCELERATOR_ONLY


def test_helion_reading_what_a_tests_stand_in_for_its_object_lacks_is_version_skew() -> None:
    """A test shaped after a newer Helion fakes one of its objects; the installed Helion reads an
    attribute the fake lacks. Helion's own AttributeError on its own objects stays an error."""
    from helion.runtime.ref_mode import is_ref_mode_enabled

    def fake_settings() -> None:
        is_ref_mode_enabled(types.SimpleNamespace(backend="triton"))  # type: ignore[arg-type]

    def real_object() -> None:
        is_ref_mode_enabled(torch.zeros(1))  # type: ignore[arg-type]

    assert _kind(fake_settings)["kind"] == kinds.VERSION_SKEW
    assert _kind(real_object)["kind"] == kinds.OTHER_ERROR


def test_a_module_that_cannot_be_imported_is_classified_from_pytest_report() -> None:
    text = "test/test_y.py:3: in <module>\n    from helion.foo import bar\nE   ImportError: cannot import name 'bar' from 'helion.foo'\n"
    assert kinds.classify_collect_error(text)["kind"] == kinds.VERSION_SKEW
    assert kinds.classify_collect_error("E   ModuleNotFoundError: No module named 'expecttest'\n")["kind"] == (
        kinds.OTHER_ERROR)


# ------------------------------------------------------------------------------------ reports
def _run(column: str, outcomes: dict[str, str]) -> ModuleRun:
    run = ModuleRun("y", column, order=list(outcomes), elapsed_s=2.0)
    for nodeid, kind in outcomes.items():
        run.outcomes[nodeid] = {"kind": kind, "reason": f"{kind} | why", "error_type": None, "origin": None,
                                "neutralized": 1}
    return run


def test_report_counts_each_column_and_lists_failures_with_the_control_outcome() -> None:
    ids = ["test/test_y.py::T::test_1", "test/test_y.py::T::test_2", "test/test_y.py::T::test_3"]
    runs = [_run("mlir", dict(zip(ids, (kinds.PASSED, kinds.WRONG_NUMBERS, kinds.SKIPPED)))),
            _run("ref", dict(zip(ids, (kinds.PASSED, kinds.PASSED, kinds.SKIPPED))))]
    env = {"started": "now", "elapsed_s": 60.0, "jobs": 1, "helion_commit": "abc", "helion_installed": "1.5.1",
           "output_type": "linalg-on-tensors", "pipeline": "fast", "autotune_effort": "none",
           "tests_backend": "triton"}
    report = conformance_report.build_report(runs, ["y"], ("mlir", "ref"), env)
    assert report["totals"]["mlir"][kinds.WRONG_NUMBERS] == 1 and report["totals"]["ref"][kinds.PASSED] == 2
    assert report["totals"]["mlir"]["neutralized"] == 3
    text = conformance_report.markdown(report)
    assert "| y | 3 | 1 | 1 | 0 | 0 | 0 | 1 | 3 | 2 | 2 | 0 | 1 |" in text
    assert "- `T::test_2`: wrong numbers: wrong_numbers \\| why [ref: passed]" in text
    assert "- 1 x skipped \\| why" in text


def test_the_plain_pipeline_option_reaches_the_backends_compilations(monkeypatch: pytest.MonkeyPatch) -> None:
    import conformance_plugin
    from helion_mlir.runtime.backend import helion_backend

    monkeypatch.setattr(helion_backend, "compile_kernel", helion_backend.compile_kernel)  # restored afterwards
    monkeypatch.setenv(conformance_plugin.PIPELINE_ENV, "plain")
    conformance_plugin._choose_pipeline()
    assert helion_backend.compile_kernel.keywords == {"pipeline": "plain"}


def test_regex_results_over_generated_code_are_code() -> None:
    import re

    guard.mark_regex_results()
    guard.reset()
    code = guard.remember_code("_launcher(_kernel, (triton.cdiv(n, 64),), x)")
    match = re.search(r"_launcher\([^,]+,\s*\((.+?)\)\s*,", code)
    assert guard.is_code(match) and guard.is_code(match.group(1)) and guard.is_code(match.group(1).rstrip(","))
    assert all(guard.is_code(found) for found in re.findall(r"\w+", code))
    assert not guard.is_code(re.search("a", "plain text"))


COUNTS_AND_TENSORS = """
import unittest
import torch

case = unittest.TestCase()


def compare_counts():
    case.assertGreater(len([]), 0)


def compare_tensors():
    case.assertTrue(
        torch.equal(torch.zeros(2), torch.ones(2))
    )
"""


def test_a_failed_comparison_of_counts_is_not_wrong_numbers_but_of_tensors_is(tmp_path: Path) -> None:
    import importlib.util

    path = tmp_path / "test" / "test_counts.py"  # where Helion's test modules live
    path.parent.mkdir()
    path.write_text(COUNTS_AND_TENSORS)
    spec = importlib.util.spec_from_file_location("test_counts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert _kind(module.compare_counts)["kind"] == kinds.ASSERTION_FAILED
    assert _kind(module.compare_tensors)["kind"] == kinds.WRONG_NUMBERS  # the statement spans lines


def test_a_module_run_again_replaces_its_results_in_an_earlier_report() -> None:
    env = {"started": "then", "elapsed_s": 60.0, "jobs": 1, "helion_commit": "abc", "helion_installed": "1.5.1",
           "output_type": "linalg-on-tensors", "pipeline": "fast", "autotune_effort": "none",
           "tests_backend": "triton"}
    first = conformance_report.build_report([_run("mlir", {"test/test_y.py::T::test_1": kinds.CRASH})], ["y"],
                                            ("mlir",), env)
    again = conformance_report.build_report([_run("mlir", {"test/test_y.py::T::test_1": kinds.PASSED})], ["y"],
                                            ("mlir",), {**env, "started": "now", "memory_limit_gb": 16.0})
    merged = conformance_report.merge_reports(first, again)
    assert merged["totals"]["mlir"][kinds.PASSED] == 1 and merged["totals"]["mlir"][kinds.CRASH] == 0
    assert merged["environment"]["rerun"][0]["modules"] == ["y"]
    assert "Modules y run again at now" in conformance_report.markdown(merged)
