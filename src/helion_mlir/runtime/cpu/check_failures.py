"""Checked mode on the Python side: the callback a failed run-time check calls, and the
error the call then raises.

The compiled code of a checked function calls ``_mlir_ciface_helion_mlir_check_failed``
with the number of the check that failed and returns at once
(:mod:`.rewrites.llvm.failed_checks`); :class:`CheckFailures` provides that symbol to the JIT,
records the number for the calling thread, and after the call raises an
:class:`~helion_mlir.errors.OutOfBoundsAccessError` (or another
:class:`~helion_mlir.errors.RuntimeCheckError`) naming the kernel source line.
"""

from __future__ import annotations

import ctypes
import linecache
import threading
from collections.abc import Sequence

from torch_mlir.execution_engine import ExecutionEngine

from ...errors import (
    DIVISION_BY_ZERO_CHECK,
    INDEX_CHECK_PREFIX,
    DivisionByZeroError,
    OutOfBoundsAccessError,
    RuntimeCheckError,
)
from .rewrites.llvm.failed_checks import CALLBACK, Check

__all__ = ["CheckFailures", "check_error"]

_CALLBACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64)


def check_error(check: Check, func_name: str) -> RuntimeCheckError:
    """The error for a failed ``check`` of ``@func_name``, quoting its source line."""
    line = None
    if check.source_location is not None:
        filename, _, number = check.source_location.rpartition(":")
        line = linecache.getline(filename, int(number)).strip() or None
    kind = (OutOfBoundsAccessError if "out-of-bounds" in check.description
            else DivisionByZeroError if check.description == DIVISION_BY_ZERO_CHECK else RuntimeCheckError)
    hint = None
    if check.description.startswith(INDEX_CHECK_PREFIX):  # an index the kernel computed, not a lowering bug
        hint = ("the kernel computed a position outside the tensor, where Helion's own code would read or write "
                "outside it; unchecked, the read gives 0 and the write does nothing (docs/abi.md, \"Indices out of "
                "range\"). Fix the index, or mask the access with extra_mask.")
    elif kind is DivisionByZeroError:
        hint = ("the kernel divided by zero, where torch raises ZeroDivisionError; unchecked, the division gives -1 "
                "and the remainder the dividend (docs/abi.md, \"Integer division by zero\").")
    return kind(check.description, func_name=func_name, source_location=check.source_location, source_line=line,
                hint=hint)


class CheckFailures:
    """The run-time checks of one compiled function and the callback its code calls when
    one fails. The failure is kept per thread, so concurrent calls do not mix them up."""

    def __init__(self, checks: Sequence[Check], func_name: str) -> None:
        self.checks = tuple(checks)
        self.func_name = func_name
        self._local = threading.local()
        # Kept alive as long as the compiled code that may call it.
        self._callback = _CALLBACK_TYPE(self._record)

    def _record(self, number: int) -> None:
        self._local.failed = number

    def register(self, engine: ExecutionEngine) -> None:
        """Provide the callback to ``engine``'s code (before its first symbol lookup)."""
        engine.register_runtime(CALLBACK, self._callback)

    def raise_failure(self) -> None:
        """Raise the error of the check that failed during this thread's last call, if one did."""
        number = self._local.__dict__.pop("failed", None)
        if number is not None:
            raise check_error(self.checks[number], self.func_name)
