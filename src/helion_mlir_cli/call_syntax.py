"""The syntax of ``--args``: the argument list of a Python call, checked without running it.

``--args 'f32[64,512], f32[512], eps=1e-5, mode="mean"'`` is read as the inside of a call
``kernel(...)``; :func:`parse_call` only parses it (``ast``), so a syntax error is reported
before the command imports torch. :mod:`helion_mlir.cli.arguments` evaluates the parsed
expressions against the kernel's signature.

``--args 'rms_norm: f32[64,512], f32[512]'`` gives the arguments of the kernel named before
the colon (for a file with several kernels). A call's argument list never starts with
``NAME:``, so the prefix cannot be mistaken for an argument.
"""

from __future__ import annotations

import ast
import dataclasses
import keyword
import re

__all__ = ["DTYPE_NAMES", "INT_RANGE", "CallArguments", "CallSyntaxError", "parse_call"]

# The tensor shorthands of --args (``f32[128,256]``), in the order help and errors list
# them; helion_mlir.cli.arguments maps each to its torch dtype.
DTYPE_NAMES = ("f32", "f64", "bf16", "f16", "f8e4m3fn", "f8e5m2", "i64", "i32", "i16", "i8", "u8", "bool")

# Random integer tensors hold values in [low, high): small and non-negative, so that they
# are valid indices and divisors in typical kernels.
INT_RANGE = (0, 16)

# ``KERNEL:`` before the arguments (not ``NAME:=``, an assignment expression).
_KERNEL_PREFIX = re.compile(r"\s*([A-Za-z_]\w*)\s*:(?!=)")

# ``f32[]`` (a 0-d tensor) is not Python; it is read as ``f32[()]``.
_ZERO_DIM = re.compile(rf"\b({'|'.join(DTYPE_NAMES)})\[\s*\]")


def _spell_zero_dim(text: str) -> tuple[str, list[int]]:
    """``text`` with ``f32[]`` written ``f32[()]``, and for each of its characters the
    column of ``text`` it comes from (to point at errors in what the user wrote)."""
    pieces, columns, kept = [], [], 0
    for match in _ZERO_DIM.finditer(text):
        pieces.append(text[kept : match.start()])
        columns.extend(range(kept, match.start()))
        replacement = f"{match.group(1)}[()]"
        pieces.append(replacement)
        columns.extend([match.start()] * len(replacement))
        kept = match.end()
    pieces.append(text[kept:])
    columns.extend(range(kept, len(text)))
    return "".join(pieces), columns


class CallSyntaxError(ValueError):
    """``--args`` text that is not the argument list of a Python call."""


@dataclasses.dataclass(frozen=True)
class CallArguments:
    """The parsed ``--args``: positional expressions, then ``(name, expression)`` pairs, and
    the kernel they are for when the text starts with ``KERNEL:`` (else None: any kernel)."""

    text: str
    positional: tuple[ast.expr, ...]
    keywords: tuple[tuple[str, ast.expr], ...]
    kernel: str | None = None

    def source(self, expression: ast.expr) -> str:
        """How the user wrote ``expression`` (for messages)."""
        return ast.unparse(expression)


def parse_call(text: str) -> CallArguments:
    """Parse ``text`` as the arguments of a call, optionally after ``KERNEL:``; raise
    :class:`CallSyntaxError` otherwise."""
    prefix = _KERNEL_PREFIX.match(text)
    kernel = prefix.group(1) if prefix is not None and not keyword.iskeyword(prefix.group(1)) else None
    start = prefix.end() if kernel is not None else 0  # ``lambda: 0`` is an argument, not a kernel
    source, columns = _spell_zero_dim(text[start:])
    columns = [start + column for column in columns]
    wrapped = f"_({source}\n)"  # the newline lets a trailing comment end before ')'
    try:
        tree = ast.parse(wrapped, mode="eval")
    except SyntaxError as err:
        at = (err.offset or 0) - 3  # 0-based, in ``source``
        pointer = f"\n  {' ' * columns[at]}^" if err.lineno == 1 and 0 <= at < len(source) else ""
        unclosed = re.search(r"opening parenthesis '(.)'", err.msg or "")
        message = f"'{unclosed.group(1)}' was never closed" if err.lineno == 2 and unclosed else err.msg
        raise CallSyntaxError(f"{message}\n  {text}{pointer}") from None
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.col_offset == 0
            and call.end_lineno == wrapped.count("\n") + 1 and call.end_col_offset == 1):
        raise CallSyntaxError(f"not an argument list (unbalanced parentheses?): {text}")
    for expression in call.args:
        if isinstance(expression, ast.Starred):
            raise CallSyntaxError(f"'*' unpacking is not supported: {ast.unparse(expression)}")
    names = [k.arg for k in call.keywords if k.arg is not None]
    for name in names:
        if names.count(name) > 1:
            raise CallSyntaxError(f"keyword argument repeated: {name}")
    for given in call.keywords:
        if given.arg is None:
            raise CallSyntaxError(f"'**' unpacking is not supported: **{ast.unparse(given.value)}")
    return CallArguments(text, tuple(call.args), tuple((k.arg, k.value) for k in call.keywords), kernel)
