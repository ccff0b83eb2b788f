"""What kind of outcome a Helion test had under the ``mlir`` backend (see docs/conformance.md).

Kinds, in the order the reports list them:

``passed``; ``wrong_numbers`` (a numeric assertion failed: ``torch.testing.assert_close``, an
``assertEqual``/``assertTrue`` over tensors or floats, an assertion whose statement reads
``torch.``, ``allclose``, ``.item()``...; a comparison of plain ints, such as a count of
config entries, is ``assertion_failed``);
``assertion_failed`` (any other assertion that is not about generated code, e.g. an expected
error not raised); ``typed_refusal`` (a ``HelionMLIRError`` subclass, or Helion's own typed
error ``helion.exc.Base`` other than ``InternalError``); ``other_error`` (any other exception,
with its type and where it was raised); ``accelerator_only`` (the test reaches for CUDA with no
skip condition of its own); ``version_skew`` (the test needs a name or argument the installed
Helion lacks, or the installed Helion reads an attribute that the test's stand-in for one of
its objects, shaped after the checkout's Helion, lacks); ``crash`` (the process died in the test); ``timeout``; ``not_run`` (the module's
time ran out first); ``skipped`` (the test's own skip condition or expected failure, with its
reason).
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any

PASSED = "passed"
WRONG_NUMBERS = "wrong_numbers"
ASSERTION_FAILED = "assertion_failed"
TYPED_REFUSAL = "typed_refusal"
OTHER_ERROR = "other_error"
ACCELERATOR_ONLY = "accelerator_only"
VERSION_SKEW = "version_skew"
CRASH = "crash"
TIMEOUT = "timeout"
NOT_RUN = "not_run"
SKIPPED = "skipped"
FAILURE_KINDS = (WRONG_NUMBERS, ASSERTION_FAILED, TYPED_REFUSAL, OTHER_ERROR, ACCELERATOR_ONLY,
                 VERSION_SKEW, CRASH, TIMEOUT, NOT_RUN)
KINDS = (PASSED, *FAILURE_KINDS, SKIPPED)

_ACCELERATOR = re.compile(r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs"
                          r"|CUDA driver|torch\.cuda\.|device type cuda|Expected a 'cuda' device"
                          r"|Torch not compiled with XPU|requires a GPU|No module named 'triton'"
                          r"|Cannot access accelerator device")
_NUMERIC_SOURCE = re.compile(r"allclose|isclose|assert_close|torch\.equal|\.all\(\)|\.any\(\)|torch\."
                             r"|\.item\(\)|abs\(|tensor\(")
_SIGNATURE_SKEW = re.compile(r"unexpected keyword argument|takes \d+ positional argument"
                             r"|missing \d+ required (positional|keyword)")
_MAX_REASON = 300


def _outcome(kind: str, reason: str, error_type: str | None = None, origin: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "reason": reason[:_MAX_REASON], "error_type": error_type, "origin": origin}


def first_line(text: str) -> str:
    """The first non-empty line of an error message (with the next one when it ends in a colon)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"
    return lines[0] if lines else ""


def _frames(tb: types.TracebackType | None) -> list[types.FrameType]:
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _place(path: str) -> str:
    """Which package a source path belongs to."""
    for marker, name in (("/helion_mlir/", "helion_mlir"), ("/torch_mlir/", "torch_mlir"),
                         ("/site-packages/helion/", "helion"), ("/torch/", "torch"), ("/test/test_", "test"),
                         ("/_pytest/", "pytest"), ("/unittest/", "unittest")):
        if marker in path:
            return name
    return "other"


def origin_of(frames: list[types.FrameType]) -> str:
    """``helion_mlir`` when the exception came out of helion_mlir, else the package of the innermost frame."""
    places = [_place(frame.f_code.co_filename) for frame in frames]
    if "helion_mlir" in places:
        return "helion_mlir"
    return places[-1] if places else "other"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _is_numeric_value(value: Any) -> bool:
    """Tensors and floats (or sequences holding some): a kernel's results. Ints alone are counts."""
    import torch

    if isinstance(value, (float, complex, torch.Tensor)):
        return True
    return isinstance(value, (list, tuple)) and any(_is_numeric_value(v) for v in value)


def _is_numeric(exc: AssertionError, frames: list[types.FrameType]) -> bool:
    """Whether a failed assertion compared numbers (see the module docstring)."""
    if any("/torch/testing/" in frame.f_code.co_filename for frame in frames):
        return True
    for frame in frames:
        if "/unittest/" in frame.f_code.co_filename and frame.f_code.co_name.startswith("assert"):
            operands = [frame.f_locals.get(name) for name in ("first", "second", "a", "b", "member", "container")]
            if any(_is_numeric_value(value) for value in operands):
                return True
            break
    message = first_line(str(exc))
    test_frames = [frame for frame in frames if _place(frame.f_code.co_filename) == "test"]
    source = _statement_source(test_frames[-1]) if test_frames else ""
    return bool(_NUMERIC_SOURCE.search(source) or "tensor(" in message)


def _statement_source(frame: types.FrameType) -> str:
    """The source of the statement a frame is at, over as many lines as its brackets span."""
    import linecache

    lines, depth, number = [], 0, frame.f_lineno
    while len(lines) < 12:
        line = linecache.getline(frame.f_code.co_filename, number)
        if not line:
            break
        lines.append(line)
        depth += sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
        if depth <= 0:
            break
        number += 1
    return "".join(lines)


def _assertion_reason(message: str) -> str:
    """The first line, with torch's mismatch counts and largest differences when it has them."""
    details = [line.strip() for line in message.splitlines()
               if line.strip().startswith(("Mismatched elements", "Greatest absolute", "Greatest relative"))]
    return " ".join([first_line(message) or "AssertionError", *details])


def _is_stand_in(obj: object) -> bool:
    """An object a test builds in place of one of Helion's: a ``SimpleNamespace`` or an instance
    of a class the test module defines."""
    if isinstance(obj, types.SimpleNamespace):
        return True
    module = sys.modules.get(type(obj).__module__)
    return _place(getattr(module, "__file__", None) or "") == "test"


def _is_version_skew(exc: BaseException, frames: list[types.FrameType]) -> bool:
    """A name or argument the test takes from Helion that the installed Helion lacks."""
    innermost = _place(frames[-1].f_code.co_filename) if frames else "other"
    in_test = innermost == "test" or (frames and frames[-1].f_code.co_filename.endswith("/helion/_testing.py"))
    if isinstance(exc, ImportError):
        name = exc.name or ""
        return name.startswith("helion") and not name.startswith("helion_mlir") or (
            "from 'helion" in str(exc))
    if isinstance(exc, AttributeError) and innermost == "helion" and _is_stand_in(getattr(exc, "obj", None)):
        return True  # the test's stand-in for a Helion object lacks what the installed Helion reads
    if isinstance(exc, AttributeError) and in_test:
        obj = getattr(exc, "obj", None)
        module = obj.__name__ if isinstance(obj, types.ModuleType) else type(obj).__module__
        if isinstance(obj, type):
            module = obj.__module__
        return module.startswith("helion") and not module.startswith("helion_mlir")
    return isinstance(exc, TypeError) and bool(in_test) and bool(_SIGNATURE_SKEW.search(str(exc)))


def classify_exception(exc: BaseException, tb: types.TracebackType | None) -> dict[str, Any]:
    """The kind, type, origin and reason of a test's exception."""
    from helion import exc as helion_exc

    from helion_mlir.errors import HelionMLIRError

    frames = _frames(tb)
    origin = origin_of(frames)
    for err in _chain(exc):
        if isinstance(err, HelionMLIRError):
            return _outcome(TYPED_REFUSAL, first_line(str(err)) or type(err).__name__, type(err).__name__,
                            "helion_mlir")
    if any(_ACCELERATOR.search(str(err)) for err in _chain(exc)):
        return _outcome(ACCELERATOR_ONLY, first_line(str(exc)), type(exc).__name__, origin)
    if _is_version_skew(exc, frames):
        return _outcome(VERSION_SKEW, first_line(str(exc)), type(exc).__name__, origin)
    if isinstance(exc, helion_exc.Base) and not isinstance(exc, helion_exc.InternalError):
        return _outcome(TYPED_REFUSAL, first_line(str(exc)) or type(exc).__name__, type(exc).__name__,
                        "helion_mlir" if origin == "helion_mlir" else "helion")
    if isinstance(exc, AssertionError):
        kind = WRONG_NUMBERS if _is_numeric(exc, frames) else ASSERTION_FAILED
        return _outcome(kind, _assertion_reason(str(exc)), type(exc).__name__, origin)
    name = type(exc).__name__
    return _outcome(OTHER_ERROR, f"{name}: {first_line(str(exc))}", name, origin)


def _skip_reason(report: Any) -> str:
    if hasattr(report, "wasxfail"):
        return f"expected failure: {report.wasxfail}".rstrip(": ")
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def classify_report(report: Any, call: Any) -> dict[str, Any] | None:
    """The outcome a phase's report gives, or None when the phase passed."""
    if report.skipped:
        return _outcome(SKIPPED, _skip_reason(report))
    if not report.failed:
        return None
    excinfo = call.excinfo
    if excinfo is None:
        text = first_line(str(report.longrepr)) or "failed"
        return _outcome(ASSERTION_FAILED, text)
    return classify_exception(excinfo.value, excinfo.tb)


def classify_collect_error(text: str) -> dict[str, Any]:
    """A module that could not be imported, classified from pytest's report text."""
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    last = errors[-1] if errors else first_line(text)
    match = re.match(r"(\w+(?:\.\w+)*):", last)
    error_type = match.group(1).rsplit(".", 1)[-1] if match else None
    if _ACCELERATOR.search(text):
        kind = ACCELERATOR_ONLY
    elif error_type in ("ImportError", "ModuleNotFoundError") and "helion" in last:
        kind = VERSION_SKEW
    else:
        kind = OTHER_ERROR
    return _outcome(kind, last, error_type, "test")
