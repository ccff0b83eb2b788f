"""Each of Helion's warnings once per kernel, with every line it concerns.

Helion prints a warning (``WARNING[TensorOperationInWrapper]: ...``, three lines of text
and the source line) each time its type propagation meets the construct, so a kernel with
five tensor operations in its host code prints five near-identical blocks, and again at
every bind (new argument shapes, the reference-mode twin of ``helion-mlir run``). Importing
``helion_mlir`` routes Helion's ``warning`` through :func:`_collect`: during a bind the
warnings are gathered, and when the bind ends each type is printed once for the kernel,
with the lines it was raised at; a line already reported in this process is not reported
again. Outside a bind (code generation) a warning prints as Helion prints it, once per line.
Helion's ``ignore_warnings`` setting is honoured as before.
"""

from __future__ import annotations

import functools
import linecache
import sys
import threading
from collections.abc import Callable
from typing import Any

from helion import exc
from helion._compiler import compile_environment, indexing_strategy, type_info, type_propagation
from helion.runtime.kernel import BoundKernel

__all__ = ["install"]

# Helion's modules that call ``warning`` (each imported the name itself).
_CALLERS = (compile_environment, indexing_strategy, type_info, type_propagation)
_REPORTED: set[tuple[str, Any]] = set()  # (warning type, source location) printed in this process
_PENDING = threading.local()  # .stack: one list of warnings per bind in progress
_INSTALLED = False


def _where(warning: exc.BaseWarning) -> Any:
    location = getattr(warning, "location", None)
    return (location.filename, location.lineno, location.colno) if location else None


def _collect(warning: exc.BaseWarning | type[exc.BaseWarning]) -> None:
    """Helion's ``warning``: ignored as the kernel's settings say, else kept for the end of
    the bind in progress (or printed now, once per line, outside a bind)."""
    env = compile_environment.CompileEnvironment.current()
    if callable(warning):
        warning = warning()
    if isinstance(warning, tuple(env.settings.ignore_warnings)):
        return
    stack = getattr(_PENDING, "stack", None)
    if stack:
        stack[-1].append(warning)
    elif (type(warning).__name__, _where(warning)) not in _REPORTED:
        _REPORTED.add((type(warning).__name__, _where(warning)))
        print(warning.report(), file=sys.stderr)


def _report(kernel_name: str, warnings: list[exc.BaseWarning]) -> None:
    """Print each type of ``warnings`` once: its message, then every new line it concerns."""
    by_type: dict[str, list[exc.BaseWarning]] = {}
    for warning in warnings:
        key = (type(warning).__name__, _where(warning))
        if key not in _REPORTED:
            _REPORTED.add(key)
            by_type.setdefault(key[0], []).append(warning)
    for name, found in by_type.items():
        message = str(found[0])[: getattr(found[0], "base_msg_len", None)]
        lines = [f"WARNING[{name}]: {message}"]
        places = [_where(w) for w in found if _where(w) is not None]
        if places:
            lines.append(f"In kernel '{kernel_name}' ({places[0][0]}), at:")
            for filename, lineno, _col in sorted(set(places)):
                lines.append(f"  line {lineno}: {linecache.getline(filename, lineno).strip()}")
        print("\n".join(lines), file=sys.stderr)


def _reporting_bind(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def bind(self: BoundKernel[Any], kernel: Any, *args: Any, **kwargs: Any) -> None:
        stack = _PENDING.__dict__.setdefault("stack", [])
        stack.append([])
        try:
            init(self, kernel, *args, **kwargs)
        finally:
            _report(getattr(getattr(kernel, "fn", None), "__name__", "kernel"), stack.pop())

    return bind


def install() -> None:
    """Route Helion's warnings through :func:`_collect` and report them per bind (once)."""
    global _INSTALLED
    if _INSTALLED:
        return
    for module in _CALLERS:
        module.warning = _collect  # type: ignore[attr-defined]
    BoundKernel.__init__ = _reporting_bind(BoundKernel.__init__)  # type: ignore[method-assign]
    _INSTALLED = True
