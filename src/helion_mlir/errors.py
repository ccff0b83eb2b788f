"""Error types raised by helion_mlir.

Every failure the tool can diagnose is a :class:`HelionMLIRError`. Errors about a
specific device-IR node name the node, its target and the kernel source line, so a
user can go straight to the Python that produced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "HelionMLIRError",
    "NodeNormalizationError",
    "UnsupportedNodeError",
    "MLIRSyntaxError",
    "MLIRVerificationError",
    "describe_target",
    "node_source_location",
    "ExecutionError",
    "RuntimeCheckError",
    "OutOfBoundsAccessError",
    "DivisionByZeroError",
    "INDEX_CHECK_PREFIX",
    "DIVISION_BY_ZERO_CHECK",
    "WorkerDiedError",
    "ArgumentError",
    "DataDependentValueError",
]


def describe_target(target: Any) -> str:
    """A readable name for an FX node target (``aten.add.Tensor``, ``helion.load``)."""
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None)
    module = getattr(target, "__module__", None) or ""
    # OpOverloads print as aten.add.Tensor; keep that form.
    if type(target) in (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator):
        return str(target)
    if name is None:
        return repr(target)
    if module.startswith("helion"):
        return f"{module.rsplit('.', 1)[-1]}.{name}"
    if module in {"_operator", "operator"}:
        return f"operator.{name}"
    return f"{module}.{name}" if module else name


def node_source_location(node: Any) -> str | None:
    """``file:line`` of the kernel source that produced an FX node, when Helion recorded it."""
    meta = getattr(node, "meta", None) or {}
    loc = meta.get("location")
    filename = getattr(loc, "filename", None)
    lineno = getattr(loc, "lineno", None)
    if filename and lineno:
        return f"{filename}:{lineno}"
    trace = meta.get("stack_trace")
    if isinstance(trace, str):
        # Last 'File "...", line N' entry is the innermost frame: the kernel line.
        frames = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith("File ")]
        if frames:
            parts = frames[-1].split('"')
            if len(parts) >= 3:
                line = parts[2].split("line", 1)[-1].split(",", 1)[0].strip()
                return f"{parts[1]}:{line}"
    return None


class HelionMLIRError(Exception):
    """Base class of every error helion_mlir raises on purpose."""


class _NodeError(HelionMLIRError):
    """An error tied to one FX node; the message always names the node, target and source line."""

    def __init__(self, node: Any, reason: str, *, hint: str | None = None) -> None:
        self.reason = reason
        self.hint = hint
        super().__init__()
        self._describe(node)

    def _describe(self, node: Any) -> None:
        self.node_name: str = getattr(node, "name", str(node))
        self.target: str = describe_target(getattr(node, "target", None))
        self.source_location: str | None = node_source_location(node)
        where = f" at {self.source_location}" if self.source_location else ""
        message = f"node '{self.node_name}' ({self.target}){where}: {self.reason}"
        if self.hint:
            message += f"\n  hint: {self.hint}"
        self.args = (message,)

    def about(self, node: Any) -> "_NodeError":
        """The same error (same class, reason and details) reported for ``node``: used when
        a stand-in node was lowered on the user's node's behalf."""
        renamed = type(self).__new__(type(self))  # no __init__: subclasses take other arguments
        renamed.__dict__.update(self.__dict__)
        renamed._describe(node)
        return renamed


class NodeNormalizationError(_NodeError):
    """A node's metadata cannot be turned into something torch-mlir can import."""


class UnsupportedNodeError(_NodeError):
    """A node the tool (or torch-mlir, for the requested output type) cannot lower."""

    def __init__(
        self,
        node: Any,
        reason: str,
        *,
        output_type: str | None = None,
        diagnostics: Sequence[str] = (),
        hint: str | None = None,
    ) -> None:
        self.output_type = output_type
        self.diagnostics: tuple[str, ...] = tuple(diagnostics)
        self.summary = reason
        full = reason
        if output_type is not None:
            full += f" (output type '{output_type}')"
        if self.diagnostics:
            full += "\n  torch-mlir diagnostics:\n" + "\n".join(
                "    " + line for d in self.diagnostics for line in d.splitlines()
            )
        super().__init__(node, full, hint=hint)


class MLIRSyntaxError(HelionMLIRError):
    """MLIR text that the tool's own lexer or inliner cannot make sense of."""

    def __init__(self, message: str, *, text: str | None = None, offset: int | None = None) -> None:
        self.text = text
        self.offset = offset
        if text is not None and offset is not None:
            line = text.count("\n", 0, offset) + 1
            col = offset - (text.rfind("\n", 0, offset) + 1) + 1
            snippet = text.splitlines()[line - 1] if text.splitlines() else ""
            message = f"{message} (line {line}, column {col}): {snippet.strip()}"
        super().__init__(message)


class MLIRVerificationError(HelionMLIRError):
    """Emitted MLIR that does not parse or verify with torch-mlir's bundled MLIR."""

    def __init__(self, what: str, diagnostics: Sequence[str], text: str) -> None:
        self.diagnostics: tuple[str, ...] = tuple(diagnostics)
        self.text = text
        details = "\n".join("  " + line for d in self.diagnostics for line in d.splitlines())
        super().__init__(
            f"{what} does not verify:\n{details}\n"
            "  hint: this is a helion_mlir bug; please report it with the kernel and this message."
        )


class ExecutionError(HelionMLIRError):
    """An MLIR module that cannot be lowered to LLVM, JIT-compiled or run on CPU.

    ``pass_name`` names the pass (or pipeline step) that failed, when one did;
    ``diagnostics`` holds the MLIR diagnostics it reported.
    """

    def __init__(
        self,
        message: str,
        *,
        func_name: str | None = None,
        output_type: str | None = None,
        pass_name: str | None = None,
        diagnostics: Sequence[str] = (),
    ) -> None:
        self.func_name = func_name
        self.output_type = output_type
        self.pass_name = pass_name
        self.diagnostics: tuple[str, ...] = tuple(diagnostics)
        where = []
        if func_name is not None:
            where.append(f"@{func_name}")
        if output_type is not None:
            where.append(f"output type '{output_type}'")
        if pass_name is not None:
            where.append(f"pass '{pass_name}'")
        full = f"{' '.join(where)}: {message}" if where else message
        if self.diagnostics:
            full += "\n  MLIR diagnostics:\n" + "\n".join(
                "    " + line for d in self.diagnostics for line in d.splitlines()
            )
        super().__init__(full)


class RuntimeCheckError(ExecutionError):
    """A run-time check of a kernel compiled in checked mode failed: the call stopped
    before the failing operation ran, and nothing it computed is returned.

    ``check`` says what failed (as MLIR's runtime verification words it),
    ``source_location`` is the kernel's ``file:line`` (None when the failing operation
    carries no location), ``source_line`` that line's text when the file can be read.
    """

    summary = "run-time check failed"

    def __init__(self, check: str, *, func_name: str, source_location: str | None,
                 source_line: str | None = None, hint: str | None = None) -> None:
        self.check = check
        self.source_location = source_location
        self.source_line = source_line
        message = f"{self.summary} at {source_location or 'an unknown location'}"
        if source_line:
            message += f": {source_line}"
        hint = hint or ("if the kernel and its arguments are right, this is a helion_mlir bug: please report it "
                        "with the kernel and this message.")
        super().__init__(f"{message}\n  check: {check}\n  hint: the call stopped before this operation ran; {hint}",
                         func_name=func_name)


#: How the checks of positions a kernel computes word their failures (checked mode): the
#: check is ``out-of-bounds index into dimension 0 of 'x' (size 37)``.
INDEX_CHECK_PREFIX = "out-of-bounds index"


class OutOfBoundsAccessError(RuntimeCheckError):
    """A load, store or slice of a kernel compiled in checked mode would have accessed
    memory outside its tensor."""

    summary = "out-of-bounds access"


#: The check of an integer divisor in checked mode, which fails as :class:`DivisionByZeroError`.
DIVISION_BY_ZERO_CHECK = "integer division by zero"


class DivisionByZeroError(RuntimeCheckError):
    """An integer division or remainder of a kernel compiled in checked mode would have
    divided by zero: a device scalar, or a lane of a tile value the kernel computes (unchecked
    it gives a defined value: docs/abi.md, "Integer division by zero")."""

    summary = "integer division by zero"


class WorkerDiedError(ExecutionError):
    """The autotuner's JIT worker process died (a signal, an abort, killed from outside)
    while it served a request; the request did not complete. The candidate it served may be
    at fault or not: the tuner tries it once more in a new worker before dropping it.

    ``summary`` says how it died and while doing what, ``output`` holds the last lines it
    wrote to stderr."""

    def __init__(self, summary: str, output: str = "") -> None:
        self.summary = summary
        self.output = output
        super().__init__(summary + (f"; its last output:\n{output}" if output else ""))


class ArgumentError(HelionMLIRError):
    """Arguments that do not match the signature of the compiled function they are passed to.

    ``position`` is the index of the offending argument of the compiled function, when the
    error is about one, and ``problem`` what is wrong with it (the message without the
    argument's name), so that a caller that knows the arguments better can name it.
    """

    def __init__(self, message: str, *, position: int | None = None, problem: str | None = None) -> None:
        super().__init__(message)
        self.position = position
        self.problem = problem if problem is not None else message


class DataDependentValueError(HelionMLIRError):
    """A value the kernel's host code reads from tensor data (``offsets[-1].item()``) that
    the trace Helion made of the kernel does not follow from call to call; the message names
    the host source line."""

    def __init__(self, reason: str, *, hint: str | None = None) -> None:
        self.reason = reason
        self.hint = hint
        super().__init__(reason + (f"\n  hint: {hint}" if hint else ""))
