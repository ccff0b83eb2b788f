"""The lock of the front end: everything between a Helion kernel and the text of its module.

Emitting a module reads and extends state that other threads share and that is not safe
to use from two of them at once:

* a bound kernel's compile environment and its ``FakeTensorMode``, one per bound kernel and
  shared by every thread that emits it. The mode keeps its dispatch state on the object
  (``in_kernel_invocation``, ``enter_stack``), so two threads computing with one kernel's
  fake tensors at once fail torch's check in ``in_kernel_invocation_manager``
  (``AssertionError: False, True``); the importer also keeps a fake mode for all static
  shapes;
* Helion's ``bind``, which traces with torch.fx's process-wide ``current_meta`` (and
  replaces ``torch.matmul`` process-wide while it traces): two binds at once leave nodes
  without their source location (``KeyError: 'location'``) or with the other kernel's
  (docs/architecture.md, "Threads");
* CPython 3.11's parser, which counts the recursion depth of AST construction per
  interpreter: ``ast.parse`` in two threads at once can fail with ``SystemError: AST
  constructor recursion depth mismatch`` (Helion's code generator parses its templates,
  the host code parses Helion's generated source).

So binding, emission, Helion's code generation and torch-mlir's imports run under
:data:`FRONT_END_LOCK`, one re-entrant lock for the process: on the two or so cores such
work gets, and with the GIL, running it in several threads at once would gain little. What
follows the text (verification, lowering to LLVM, JIT compilation) holds the MLIR
context's lock only, so one thread can emit while another compiles, and calls of compiled
code hold neither.

Lock order: this lock before the MLIR context's (:func:`~helion_mlir.mlir_context.mlir_session`),
and before the locks Helion keeps per kernel; never take it while holding the MLIR lock.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["FRONT_END_LOCK", "under_front_end_lock"]

FRONT_END_LOCK = threading.RLock()

F = TypeVar("F", bound=Callable[..., Any])


def under_front_end_lock(fn: F) -> F:
    """``fn`` run under :data:`FRONT_END_LOCK` (for entry points that also serve callers outside emission)."""

    @functools.wraps(fn)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with FRONT_END_LOCK:
            return fn(*args, **kwargs)

    return locked  # type: ignore[return-value]
