"""The one MLIR context of the process, its pass managers, and diagnostics capture.

Creating an MLIR context and registering the torch and stablehlo dialects costs a few
milliseconds, and IR from two contexts must never be mixed, so the whole package shares
one context. MLIR contexts are not safe to use from several threads at once: every use
goes through :func:`mlir_session`, which holds a process-wide re-entrant lock.

MLIR reports problems as diagnostics on the C++ side (they would otherwise go to the
process's stderr and be lost to the caller); a session collects them so that errors
raised by the package can quote them. Locations are written here too: the
``loc("file.py":line:col)`` every emitted op carries, and the one a diagnostic shows.

Parsing a textual pass pipeline and initializing its passes (their pattern sets) costs
time, and a pass manager can run again on the next module, so :func:`pass_manager` keeps
one per pipeline text for the whole package.

A child made by ``fork`` has only the thread that forked: a lock another thread held at that
moment stays held in the child forever, and the child's first compile would wait for it. So
a fork waits until no other thread emits or compiles (it takes the front-end lock, then this
one, as every compile does) and both are released on each side of it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch_mlir.dialects.torch as torch_dialect  # registers torch-mlir's passes too
from torch_mlir import ir, passmanager
from torch_mlir._mlir_libs import _stablehlo

from .front_end_lock import FRONT_END_LOCK

__all__ = [
    "shared_context", "mlir_session", "format_diagnostic", "file_location", "source_location_body", "pass_manager",
]

log = logging.getLogger(__name__)

_LOCK = threading.RLock()
_CONTEXT: ir.Context | None = None
# Diagnostics of the innermost open session; sessions nest (the lock is re-entrant).
_COLLECTORS: list[list[str]] = []
_PASS_MANAGERS: dict[str, passmanager.PassManager] = {}
# Passes whose instances carry state from one run into the next, so that a pass manager
# holding one gets parsed afresh per run: convert-math-to-funcs remembers the functions it
# generated (per op and type) and would call those of a module already freed (a crash, or
# wrong code) when a second module needs the same one (a vector math.fpowi, as in tanh GELU).
_KEEP_STATE_ACROSS_RUNS = ("convert-math-to-funcs",)


def _hold_for_fork() -> None:
    FRONT_END_LOCK.acquire()
    _LOCK.acquire()


def _release_after_fork() -> None:
    _LOCK.release()
    FRONT_END_LOCK.release()


os.register_at_fork(before=_hold_for_fork, after_in_parent=_release_after_fork, after_in_child=_release_after_fork)


def format_diagnostic(diag: Any, *, with_locations: bool = True) -> str:
    """Render an MLIR diagnostic (or DiagnosticInfo) with its notes, and their locations
    unless ``with_locations`` is false."""
    severity = str(getattr(diag, "severity", "error")).rsplit(".", 1)[-1].lower()

    def line(item: Any) -> str:
        return f"{item.location}: {item.message}" if with_locations else str(item.message)

    text = f"{severity}: {line(diag)}"
    for note in getattr(diag, "notes", ()) or ():
        text += f"\n  note: {line(note)}"
    return text


def file_location(filename: str, line: int, column: int) -> str:
    """The body of an MLIR file location, ``"file.py":line:column`` (the name escaped)."""
    escaped = str(filename).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}":{int(line)}:{int(column)}'


def source_location_body(loc: Any) -> str | None:
    """The file location of a Helion SourceLocation (None when it has none); columns count from 1."""
    filename = getattr(loc, "filename", None)
    lineno = getattr(loc, "lineno", None)
    if not filename or not lineno:
        return None
    return file_location(filename, lineno, (getattr(loc, "colno", None) or 0) + 1)


def _collect(diag: Any) -> bool:
    if _COLLECTORS:
        _COLLECTORS[-1].append(format_diagnostic(diag))
    else:
        log.debug("MLIR diagnostic outside a session: %s", format_diagnostic(diag))
    return True  # handled: do not print to stderr


def shared_context() -> ir.Context:
    """The process-wide context with every upstream dialect plus torch and stablehlo."""
    global _CONTEXT
    with _LOCK:
        if _CONTEXT is None:
            ctx = ir.Context()
            torch_dialect.register_dialect(ctx)
            _stablehlo.register_dialect(ctx)
            ctx.allow_unregistered_dialects = False
            ctx.attach_diagnostic_handler(_collect)
            _load_pass_created_dialects(ctx)
            _CONTEXT = ctx
            log.debug("created the shared MLIR context")
        return _CONTEXT


def _load_pass_created_dialects(ctx: ir.Context) -> None:
    """Load ``tm_tensor`` and ``chlo``, which torch-mlir's pipelines emit but do not register.

    They are loaded only as dependencies of the passes that create their ops; running
    those passes once on an empty module makes text holding such ops parse in a fresh
    process (0.3 ms).
    """
    with ctx:
        for pipeline in ("convert-torch-to-tmtensor", "convert-torch-to-stablehlo"):
            passmanager.PassManager.parse(f"builtin.module(func.func({pipeline}))").run(
                ir.Module.parse("").operation
            )


@contextmanager
def mlir_session() -> Iterator[tuple[ir.Context, list[str]]]:
    """Hold the context lock, enter the shared context and collect diagnostics.

    Yields the context and the list that receives the session's diagnostics as text.
    """
    ctx = shared_context()
    with _LOCK:
        diagnostics: list[str] = []
        _COLLECTORS.append(diagnostics)
        try:
            with ctx:
                yield ctx, diagnostics
        finally:
            _COLLECTORS.pop()


def pass_manager(pipeline: str) -> passmanager.PassManager:
    """The pass manager of a textual pipeline (``builtin.module(...)``) in the shared context.

    Cached per text (the texts the package runs are few), except for a pipeline holding a
    pass that keeps state across runs, which is parsed afresh each time. Raises
    ``ValueError`` when the text does not parse.
    """
    with _LOCK:
        manager = _PASS_MANAGERS.get(pipeline)
        if manager is None:
            with shared_context():
                manager = passmanager.PassManager.parse(pipeline)
            if not any(name in pipeline for name in _KEEP_STATE_ACROSS_RUNS):
                _PASS_MANAGERS[pipeline] = manager
        return manager
