"""Parse and verify MLIR text in-process with torch-mlir's bundled MLIR.

Everything the package returns goes through :func:`verify_module_text` first, so a
caller never receives text that another MLIR tool would reject as malformed.
"""

from __future__ import annotations

from torch_mlir import ir

from .errors import MLIRVerificationError
from .mlir_context import format_diagnostic, mlir_session

__all__ = ["parse_module", "verify_module_text"]


def parse_module(text: str, *, what: str = "module") -> ir.Module:
    """Parse (which also verifies) ``text`` in the shared context.

    The caller must hold :func:`mlir_session` for as long as it uses the returned module.
    Unregistered dialects are rejected, so opaque placeholder ops cannot slip through.
    """
    with mlir_session() as (_ctx, diagnostics):
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as err:
            found = [format_diagnostic(d) for d in err.error_diagnostics] or [str(err)]
            raise MLIRVerificationError(what, diagnostics + found, text) from None
        if not module.operation.verify():
            raise MLIRVerificationError(what, diagnostics or ["verifier failed"], text)
        return module


def verify_module_text(text: str, *, what: str = "module") -> str:
    """Raise :class:`MLIRVerificationError` unless ``text`` parses and verifies; return it."""
    with mlir_session():
        parse_module(text, what=what)
    return text
