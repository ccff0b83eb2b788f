"""Neutralizes the assertions of Helion's tests that are about generated Triton code.

Helion's tests check both numbers and the Triton source Helion generates. Under the
``mlir`` backend only the numbers mean anything: the Triton source is not what runs. So
every assertion whose operands are generated code is skipped and counted, and every other
assertion runs as written.

How an assertion is recognised. Each ``assert`` statement and each assertion call
statement (``self.assertIn(...)``, ``torch.testing.assert_close(...)``, any call whose name
starts with ``assert``) of a test module is rewritten at import into

    if __helion_conformance__.skips_code_assertion(locals(), globals(), NAMES, STATIC):
        pass
    else:
        <the statement, unchanged>

where ``NAMES`` are the variables its operands read (a message argument does not count)
and ``STATIC`` says whether the operands call ``to_triton_code``/``to_code`` directly. At
run time the names' values decide: generated code is a :class:`GeneratedCode` (the text
``BoundKernel.to_code``/``to_triton_code`` and ``helion.experimental.backward`` return is
wrapped in it), and what is cut from it stays one (slices, lines, ``strip``, ...; counts
and positions are :class:`CodeInt`; ``re.search``/``findall``/... over it give
:class:`CodeMatch` and generated code, :func:`mark_regex_results`). A plain string of 8 or
more characters found in a text generated during the test, a list of strings found there,
or a regex match over generated code count too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "CodeInt",
    "CodeMatch",
    "GeneratedCode",
    "MODULE_ALIAS",
    "counts",
    "guard_code_assertions",
    "is_code",
    "mark_regex_results",
    "note_neutralized",
    "remember_code",
    "reset",
    "skips_code_assertion",
]

#: The name the rewritten test modules import this module under.
MODULE_ALIAS = "__helion_conformance__"
_CODE_METHODS = frozenset({"to_triton_code", "to_code"})
_ONE_OPERAND = frozenset({"assertTrue", "assertFalse", "assertIsNone", "assertIsNotNone",
                          "assertTrueIfInNormalMode", "assertExpectedJournal"})
_NOT_GUARDED = re.compile(r"^assert(Raises|Warns|Logs|NoLogs)")
_MIN_FRAGMENT = 8


class CodeInt(int):
    """A count or position taken from generated code."""


class GeneratedCode(str):
    """Text Helion generated (Triton or Helion source); what is cut from it stays generated code."""

    def __getitem__(self, key: Any) -> GeneratedCode:
        return GeneratedCode(str.__getitem__(self, key))

    def __add__(self, other: str) -> GeneratedCode:
        return GeneratedCode(str.__add__(self, other))

    def strip(self, chars: str | None = None) -> GeneratedCode:
        return GeneratedCode(str.strip(self, chars))

    def lstrip(self, chars: str | None = None) -> GeneratedCode:
        return GeneratedCode(str.lstrip(self, chars))

    def rstrip(self, chars: str | None = None) -> GeneratedCode:
        return GeneratedCode(str.rstrip(self, chars))

    def replace(self, old: str, new: str, count: int = -1) -> GeneratedCode:  # type: ignore[override]
        return GeneratedCode(str.replace(self, old, new, count))

    def lower(self) -> GeneratedCode:
        return GeneratedCode(str.lower(self))

    def split(self, sep: str | None = None, maxsplit: int = -1) -> list[GeneratedCode]:  # type: ignore[override]
        return [GeneratedCode(part) for part in str.split(self, sep, maxsplit)]

    def rsplit(self, sep: str | None = None, maxsplit: int = -1) -> list[GeneratedCode]:  # type: ignore[override]
        return [GeneratedCode(part) for part in str.rsplit(self, sep, maxsplit)]

    def splitlines(self, keepends: bool = False) -> list[GeneratedCode]:  # type: ignore[override]
        return [GeneratedCode(line) for line in str.splitlines(self, keepends)]

    def partition(self, sep: str) -> tuple[GeneratedCode, GeneratedCode, GeneratedCode]:  # type: ignore[override]
        head, mid, tail = str.partition(self, sep)
        return GeneratedCode(head), GeneratedCode(mid), GeneratedCode(tail)

    def count(self, *args: Any) -> CodeInt:  # type: ignore[override]
        return CodeInt(str.count(self, *args))

    def find(self, *args: Any) -> CodeInt:  # type: ignore[override]
        return CodeInt(str.find(self, *args))

    def rfind(self, *args: Any) -> CodeInt:  # type: ignore[override]
        return CodeInt(str.rfind(self, *args))

    def index(self, *args: Any) -> CodeInt:  # type: ignore[override]
        return CodeInt(str.index(self, *args))


class CodeMatch:
    """A regex match over generated code, whose groups are generated code (``re.Match`` cannot be subclassed)."""

    def __init__(self, match: re.Match[str]) -> None:
        self._match = match

    def group(self, *groups: Any) -> Any:
        return remember_code(self._match.group(*groups)) if len(groups) <= 1 else tuple(
            remember_code(g) for g in self._match.group(*groups))

    def __getitem__(self, group: Any) -> Any:
        return remember_code(self._match[group])

    def groups(self, default: Any = None) -> tuple[Any, ...]:
        return tuple(remember_code(g) for g in self._match.groups(default))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._match, name)


def _over_code(search: Any) -> Any:
    """``re.search``/``match``/``fullmatch``/``findall``/``finditer`` whose results over generated code stay code."""

    def wrapped(pattern: Any, string: Any, *args: Any, **kwargs: Any) -> Any:
        result = search(pattern, string, *args, **kwargs)
        if not isinstance(string, GeneratedCode) or result is None:
            return result
        if isinstance(result, re.Match):
            return CodeMatch(result)
        if isinstance(result, list):
            return [remember_code(item) if isinstance(item, str) else item for item in result]
        return (CodeMatch(match) for match in result)  # finditer

    wrapped.__wrapped__ = search  # type: ignore[attr-defined]
    return wrapped


def mark_regex_results() -> None:
    """Route the ``re`` module's search functions through :func:`_over_code` (once)."""
    for name in ("search", "match", "fullmatch", "findall", "finditer"):
        function = getattr(re, name)
        if not hasattr(function, "__wrapped__"):
            setattr(re, name, _over_code(function))


class _State:
    """Per test: the texts generated so far and the assertions skipped."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.neutralized = 0


_STATE = _State()


def reset() -> None:
    """Start a new test: forget generated texts, zero the count."""
    _STATE.texts.clear()
    _STATE.neutralized = 0


def counts() -> int:
    """Assertions on generated code skipped (or noted by :func:`note_neutralized`) since :func:`reset`."""
    return _STATE.neutralized


def note_neutralized() -> None:
    """Count one assertion skipped elsewhere (``assertExpectedJournal``)."""
    _STATE.neutralized += 1


def remember_code(text: Any) -> Any:
    """``text`` as :class:`GeneratedCode` (remembered for this test); other values unchanged."""
    if not isinstance(text, str):
        return text
    _STATE.texts.append(str(text))
    return text if isinstance(text, GeneratedCode) else GeneratedCode(text)


def _is_fragment(value: str) -> bool:
    return len(value) >= _MIN_FRAGMENT and any(value in text for text in _STATE.texts)


def is_code(value: Any) -> bool:
    """Whether ``value`` is generated code or was cut from it."""
    if isinstance(value, (GeneratedCode, CodeInt, CodeMatch)):
        return True
    if isinstance(value, str):
        return _is_fragment(value)
    if isinstance(value, re.Match):
        return isinstance(value.string, str) and (isinstance(value.string, GeneratedCode)
                                                  or _is_fragment(value.string))
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, str) for item in value):
        found = all(isinstance(item, GeneratedCode) or any(item in text for text in _STATE.texts)
                    for item in value)
        return found and sum(len(item) for item in value) >= _MIN_FRAGMENT
    return False


def skips_code_assertion(local: Mapping[str, Any], glob: Mapping[str, Any], names: Iterable[str],
                         static: bool) -> bool:
    """True (and counted) when an assertion's operands are generated code: the caller skips it."""
    missing = object()
    if static or any(is_code(local.get(name, glob.get(name, missing))) for name in names):
        _STATE.neutralized += 1
        return True
    return False


# -- the rewrite ---------------------------------------------------------------------------------

def _operands(call: ast.Call) -> list[ast.expr]:
    """The compared operands of an assertion call: positional ones before the message, and keywords but ``msg``."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    take = 1 if name in _ONE_OPERAND else 2
    return [*call.args[:take], *(kw.value for kw in call.keywords if kw.arg != "msg")]


def _is_assertion_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    return name.startswith("assert") and not _NOT_GUARDED.match(name)


class _BoundInside(ast.NodeVisitor):
    """Names an expression binds for itself (comprehension targets, lambda parameters)."""

    def __init__(self) -> None:
        self.bound: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.bound.add(node.id)

    def visit_arg(self, node: ast.arg) -> None:
        self.bound.add(node.arg)


def _read_names(exprs: Iterable[ast.expr]) -> tuple[list[str], bool]:
    """Variables the expressions read (minus names bound inside them), and whether they call a code method."""
    reads: list[str] = []
    bound = _BoundInside()
    static = False
    for expr in exprs:
        bound.visit(expr)
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in reads:
                reads.append(node.id)
            if isinstance(node, ast.Attribute) and node.attr in _CODE_METHODS:
                static = True
    return [name for name in reads if name not in bound.bound], static


class _Guard(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        return _guarded(node, *_read_names([node.test]))

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        if _is_assertion_call(node.value):
            assert isinstance(node.value, ast.Call)
            return _guarded(node, *_read_names(_operands(node.value)))
        return node


def _guarded(node: ast.stmt, names: list[str], static: bool) -> ast.stmt:
    check = ast.Call(
        func=ast.Attribute(value=ast.Name(id=MODULE_ALIAS, ctx=ast.Load()), attr="skips_code_assertion",
                           ctx=ast.Load()),
        args=[ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]),
              ast.Call(func=ast.Name(id="globals", ctx=ast.Load()), args=[], keywords=[]),
              ast.Tuple(elts=[ast.Constant(value=name) for name in names], ctx=ast.Load()),
              ast.Constant(value=static)],
        keywords=[])
    guarded = ast.If(test=check, body=[ast.Pass()], orelse=[node])
    return ast.fix_missing_locations(ast.copy_location(guarded, node))


def guard_code_assertions(tree: ast.Module) -> None:
    """Rewrite a test module's assertions in place (see the module docstring)."""
    _Guard().visit(tree)
    position = 0
    while position < len(tree.body) and _is_preamble(tree.body[position], position):
        position += 1
    alias = ast.Import(names=[ast.alias(name=__name__, asname=MODULE_ALIAS)])
    tree.body.insert(position, ast.fix_missing_locations(alias))


def _is_preamble(stmt: ast.stmt, position: int) -> bool:
    """The module docstring and ``from __future__`` imports, which must stay first."""
    if position == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
