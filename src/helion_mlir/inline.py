"""Inline the body of a function from another MLIR module into an :class:`MLIRBuilder`.

torch-mlir lowers each ATen node to a module holding one ``func.func``. To splice that
function into the kernel being emitted, its body has to be rewritten so it means the same
thing in its new home:

* the function's arguments become the caller's operands;
* every value and block label the body defines gets a name from the builder, so nothing
  clashes with the rest of the kernel or with other inlined copies;
* module-level aliases (``#map``, ``!t``, ``#loc3``) are expanded where they are used,
  because the kernel's module does not define them;
* ``dense_resource<key>`` blobs move into the builder's resources section;
* the ``return`` disappears and its operands are handed back to the caller.

All of this works on the token stream of :mod:`helion_mlir.mlir_lexer`, so string
attributes and locations are never mistaken for code.

Scoping follows MLIR's rules: a name defined in a region is visible in that region and the
regions nested in it, and may be defined again in a sibling region after its own region
ends. A definition is recognised as an op result (``%a, %b:2 = ...`` at the start of a
statement), a block argument in a label (``^bb0(%in: f32):``), or a region argument
declared in an op's custom syntax before its region (``scf.for %iv = ...
iter_args(%acc = %init)``): a name that is not visible where it appears is such a region
argument, scoped to the next region that opens. Uses of a value textually before its
definition (possible only across blocks of a multi-block region, or in graph regions) are
not supported; the common cases are reported as errors.
"""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from .builder import MLIRBuilder, format_resource_key
from .errors import MLIRSyntaxError
from .mlir_lexer import OPENERS, Token, TokenKind, find_closing, next_significant, tokenize

__all__ = ["inline_torch_mlir_output"]

log = logging.getLogger(__name__)

_RESOURCE_DIALECT = "builtin"  # the dialect of dense_resource<...> handles
_RETURN_OPS = frozenset({"return", "func.return", '"func.return"'})
_VISIBILITY = frozenset({"private", "public", "nested"})


@dataclass(frozen=True)
class _Function:
    name: str
    arg_names: tuple[str, ...]
    body_open: int  # token index of the body's '{'
    body_close: int  # token index of the matching '}'


@dataclass
class _SourceModule:
    text: str
    tokens: list[Token]
    aliases: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> token span of its value
    resources: dict[str, dict[str, str]] = field(default_factory=dict)  # dialect -> key -> blob
    functions: list[_Function] = field(default_factory=list)
    surveys: dict[str, "_Survey"] = field(default_factory=dict)  # function name -> its body's survey

    def error(self, message: str, token: Token | None = None) -> MLIRSyntaxError:
        if token is None:
            return MLIRSyntaxError(message)
        return MLIRSyntaxError(message, text=self.text, offset=token.offset)

    def closing(self, index: int) -> int:
        return find_closing(self.tokens, index, source=self.text)

    def significant(self, index: int, end: int | None = None) -> int:
        return next_significant(self.tokens, index, end)

    def is_punct_at(self, index: int, text: str) -> bool:
        return index < len(self.tokens) and self.tokens[index].is_punct(text)


def _unquote(token: Token) -> str:
    """A name written bare or as a string literal (resource keys, @"symbols"), without quotes."""
    text = token.text.lstrip("@")
    return text[1:-1] if text.startswith('"') else text


# --------------------------------------------------------------------------- module layout
@functools.lru_cache(maxsize=1024)
def _scan_module(text: str) -> _SourceModule:
    """Find the alias definitions, the resources section and the functions of a module.

    Cached: the same torch-mlir output is often inlined many times (one ATen op at several
    sites of a kernel). The result is only read afterwards, apart from the surveys of its
    function bodies, which it memoizes.
    """
    module = _SourceModule(text, tokenize(text))
    tokens = module.tokens
    brackets: list[str] = []
    statement_start = True
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.is_trivia:
            statement_start = statement_start or token.kind is TokenKind.NEWLINE
            index += 1
            continue
        starting, statement_start = statement_start, False
        if (
            starting
            and not brackets
            and token.kind in (TokenKind.HASH_ID, TokenKind.BANG_ID)
            and module.is_punct_at(module.significant(index + 1), "=")
        ):
            index = _read_alias(module, index)
            statement_start = True
        elif token.kind is TokenKind.METADATA_BEGIN:
            close = module.closing(index)
            _read_metadata(module, index, close)
            index = close + 1
        elif starting and token.kind is TokenKind.BARE_ID and token.text == "func.func":
            index = _read_function(module, index)
        else:
            if token.kind is TokenKind.PUNCT:
                if token.text in OPENERS:
                    brackets.append(token.text)
                    statement_start = token.text == "{"
                elif brackets and token.text == OPENERS[brackets[-1]]:
                    brackets.pop()
            index += 1
    return module


def _read_alias(module: _SourceModule, index: int) -> int:
    """Record ``#name = value``; the value ends at the first newline outside brackets."""
    tokens = module.tokens
    name = tokens[index]
    if name.text in module.aliases:
        raise module.error(f"alias {name.text} is defined twice", name)
    start = module.significant(module.significant(index + 1) + 1)
    cursor = start
    while cursor < len(tokens):
        token = tokens[cursor]
        if token.kind in (TokenKind.NEWLINE, TokenKind.METADATA_BEGIN):
            break
        if token.kind is TokenKind.PUNCT and token.text in OPENERS:
            cursor = module.closing(cursor)
        cursor += 1
    end = cursor
    while end > start and tokens[end - 1].is_trivia:
        end -= 1
    if end == start:
        raise module.error(f"alias {name.text} has no value", name)
    module.aliases[name.text] = (start, end)
    return cursor


def _entries(module: _SourceModule, start: int, end: int) -> list[tuple[Token, int, int]]:
    """Split ``key: value, key: value`` (tokens start..end) into (key, value start, value end)."""
    tokens = module.tokens
    entries = []
    cursor = module.significant(start, end)
    while cursor < end:
        key = tokens[cursor]
        if key.kind not in (TokenKind.BARE_ID, TokenKind.STRING):
            raise module.error(f"expected an entry name in the resources section, found {key.text!r}", key)
        colon = module.significant(cursor + 1, end)
        if not module.is_punct_at(colon, ":") or colon >= end:
            raise module.error(f"expected ':' after {key.text!r} in the resources section", key)
        value_start = module.significant(colon + 1, end)
        value_end = value_start
        while value_end < end and not tokens[value_end].is_punct(","):
            if tokens[value_end].kind is TokenKind.PUNCT and tokens[value_end].text in OPENERS:
                value_end = module.closing(value_end)
            value_end += 1
        if value_start >= value_end:
            raise module.error(f"entry {key.text!r} of the resources section has no value", key)
        entries.append((key, value_start, value_end))
        cursor = module.significant(value_end + 1, end)
    return entries


def _read_metadata(module: _SourceModule, open_index: int, close: int) -> None:
    """Collect ``dialect_resources`` string entries from a ``{-# ... #-}`` section."""
    tokens = module.tokens
    for section, start, _end in _entries(module, open_index + 1, close):
        if not tokens[start].is_punct("{"):
            raise module.error(f"expected '{{' after {section.text}:", tokens[start])
        if section.text != "dialect_resources":
            log.debug("ignoring the %s section of an inlined module", section.text)
            continue
        for dialect, d_start, _d_end in _entries(module, start + 1, module.closing(start)):
            if not tokens[d_start].is_punct("{"):
                raise module.error(f"expected '{{' after {dialect.text}:", tokens[d_start])
            entries = module.resources.setdefault(_unquote(dialect), {})
            for key, v_start, v_end in _entries(module, d_start + 1, module.closing(d_start)):
                value = tokens[v_start]
                if value.kind is TokenKind.STRING and module.significant(v_start + 1, v_end) == v_end:
                    entries[_unquote(key)] = value.text[1:-1]
                else:
                    log.debug("ignoring non-blob resource %s:%s", dialect.text, key.text)


def _argument_names(module: _SourceModule, open_index: int, close: int, name: str) -> tuple[str, ...]:
    """The ``%names`` of a function signature's arguments, in order."""
    tokens = module.tokens
    names: list[str] = []
    cursor = module.significant(open_index + 1, close)
    while cursor < close:
        token = tokens[cursor]
        if token.kind is not TokenKind.VALUE_ID or token.value_suffix:
            raise module.error(f"argument {len(names)} of @{name} has no name", token)
        names.append(token.text)
        while cursor < close and not tokens[cursor].is_punct(","):
            if tokens[cursor].kind is TokenKind.PUNCT and tokens[cursor].text in OPENERS:
                cursor = module.closing(cursor)
            cursor += 1
        cursor = module.significant(cursor + 1, close)
    return tuple(names)


def _read_function(module: _SourceModule, index: int) -> int:
    """Record a ``func.func`` with a body; return the index just past it."""
    tokens = module.tokens
    cursor = module.significant(index + 1)
    if cursor < len(tokens) and tokens[cursor].kind is TokenKind.BARE_ID and tokens[cursor].text in _VISIBILITY:
        cursor = module.significant(cursor + 1)
    if cursor >= len(tokens) or tokens[cursor].kind is not TokenKind.AT_ID:
        raise module.error("expected a symbol name after func.func", tokens[index])
    name = _unquote(tokens[cursor])
    args_open = module.significant(cursor + 1)
    if not module.is_punct_at(args_open, "("):
        raise module.error(f"expected '(' after @{name}", tokens[cursor])
    args_close = module.closing(args_open)
    # Past the arguments: '-> results', 'attributes {...}', then the body '{' -- unless
    # this is a declaration, in which case the next statement starts on a new line.
    previous = tokens[args_close]
    new_line = False
    cursor = signature_end = args_close + 1
    while cursor < len(tokens):
        token = tokens[cursor]
        if token.is_trivia:
            new_line = new_line or token.kind is TokenKind.NEWLINE
            cursor += 1
            continue
        continues_signature = token.text in ("->", "{", "attributes", "loc") or previous.is_punct("->")
        if token.is_punct("}") or token.kind is TokenKind.METADATA_BEGIN or (new_line and not continues_signature):
            break  # a declaration
        if token.is_punct("{") and not (previous.kind is TokenKind.BARE_ID and previous.text == "attributes"):
            body_close = module.closing(cursor)
            arg_names = _argument_names(module, args_open, args_close, name)
            module.functions.append(_Function(name, arg_names, cursor, body_close))
            return body_close + 1
        if token.kind is TokenKind.PUNCT and token.text in OPENERS:
            cursor = module.closing(cursor)
        previous, new_line = token, False
        cursor = signature_end = cursor + 1
    return signature_end


def _select_function(module: _SourceModule, func_name: str | None) -> _Function:
    names = ", ".join(f"@{f.name}" for f in module.functions) or "none"
    if func_name is not None:
        chosen = [f for f in module.functions if f.name == func_name]
        if not chosen:
            raise MLIRSyntaxError(f"no function @{func_name} with a body; the module defines {names}")
        if len(chosen) > 1:
            raise MLIRSyntaxError(f"the module defines @{func_name} more than once")
        return chosen[0]
    if len(module.functions) != 1:
        raise MLIRSyntaxError(
            f"the module defines {len(module.functions)} functions with a body ({names}); "
            "pass func_name to choose one"
        )
    return module.functions[0]


# ----------------------------------------------------------------------------- the body
@dataclass
class _Survey:
    """What the body's syntax says before any renaming (labels may be used before defined)."""

    value_defs: set[int] = field(default_factory=set)  # op results and label arguments
    sole_results: dict[str, int] = field(default_factory=dict)  # top-level op with one result: name -> token
    labels_by_region: dict[int, list[int]] = field(default_factory=dict)  # '{' index -> label tokens
    root_labels: list[int] = field(default_factory=list)
    return_start: int = -1
    return_end: int = -1  # the newline (or body end) that ends the return op


def _result_list(module: _SourceModule, index: int, end: int) -> list[int]:
    """Token indices of ``%a, %b:2 =`` starting at ``index``; empty if it is not a result list."""
    tokens = module.tokens
    found: list[int] = []
    cursor = index
    while cursor < end and tokens[cursor].kind is TokenKind.VALUE_ID:
        found.append(cursor)
        cursor = module.significant(cursor + 1, end)
        if module.is_punct_at(cursor, ":"):  # '%0 : 2', a result group written apart
            count = module.significant(cursor + 1, end)
            if count >= end or tokens[count].kind is not TokenKind.INTEGER:
                return []
            cursor = module.significant(count + 1, end)
        if module.is_punct_at(cursor, "="):
            return found
        if not module.is_punct_at(cursor, ","):
            return []
        cursor = module.significant(cursor + 1, end)
    return []


def _survey(module: _SourceModule, function: _Function) -> _Survey:
    tokens = module.tokens
    survey = _Survey()
    start, end = function.body_open + 1, function.body_close
    brackets: list[int] = []  # token indices of the open brackets
    statement_start = True
    index = start
    while index < end:
        token = tokens[index]
        if token.is_trivia:
            statement_start = statement_start or token.kind is TokenKind.NEWLINE
            index += 1
            continue
        in_region = not brackets or tokens[brackets[-1]].text == "{"
        starting, statement_start = statement_start and in_region, False
        if starting and token.kind is TokenKind.CARET_ID:
            after = module.significant(index + 1, end)
            if module.is_punct_at(after, "("):
                close = module.closing(after)
                survey.value_defs.update(
                    i for i in range(after + 1, close) if tokens[i].kind is TokenKind.VALUE_ID
                )
                after = module.significant(close + 1, end)
            if module.is_punct_at(after, ":"):
                if brackets:
                    survey.labels_by_region.setdefault(brackets[-1], []).append(index)
                else:
                    survey.root_labels.append(index)
                index, statement_start = after + 1, True
                continue
        if starting and token.kind is TokenKind.VALUE_ID:
            defined = _result_list(module, index, end)
            survey.value_defs.update(defined)
            if not brackets and len(defined) == 1 and _is_sole_result(module, defined[0], end):
                survey.sole_results[tokens[defined[0]].value_name] = defined[0]
        if not brackets and token.text in _RETURN_OPS and survey.return_start < 0:
            survey.return_start = index
            survey.return_end = _statement_end(module, index, end)
        if token.kind is TokenKind.PUNCT:
            if token.text in OPENERS:
                brackets.append(index)
                statement_start = token.text == "{"
            elif brackets and token.text == OPENERS[tokens[brackets[-1]].text]:
                brackets.pop()
        index += 1
    _check_single_block(module, function, survey)
    return survey


def _is_sole_result(module: _SourceModule, index: int, end: int) -> bool:
    """Whether the result token at ``index`` names one value (not a group such as ``%0:2``)."""
    return not module.tokens[index].value_suffix and not module.is_punct_at(module.significant(index + 1, end), ":")


def _statement_end(module: _SourceModule, index: int, end: int) -> int:
    """The first newline outside brackets after ``index`` (or ``end``)."""
    tokens = module.tokens
    while index < end and tokens[index].kind is not TokenKind.NEWLINE:
        if tokens[index].kind is TokenKind.PUNCT and tokens[index].text in OPENERS:
            index = module.closing(index)
        index += 1
    return min(index, end)


def _check_single_block(module: _SourceModule, function: _Function, survey: _Survey) -> None:
    tokens = module.tokens
    if survey.root_labels:
        first_op = module.significant(function.body_open + 1, function.body_close)
        blocks = len(survey.root_labels) + (first_op not in survey.root_labels)
        raise module.error(
            f"the body of @{function.name} has {blocks} blocks; only a single-block body can be "
            "inlined into a single-block region",
            tokens[survey.root_labels[0]],
        )
    if survey.return_start < 0:
        raise module.error(f"the body of @{function.name} has no return op", tokens[function.body_open])
    after = module.significant(survey.return_end, function.body_close)
    if after < function.body_close:
        raise module.error(f"the body of @{function.name} continues after its return op", tokens[after])


@dataclass(frozen=True)
class _ResourceKey:
    """Placeholder for a resource key; the builder decides its final spelling."""

    key: str


_Piece = str | _ResourceKey


@dataclass
class _Scope:
    values: dict[str, str]
    labels: dict[str, str]


def _name_hint(name: str) -> str:
    """The leading letters of a source name (``%in_0`` -> ``in``), so output stays readable."""
    body = name[1:]
    letters = len(body) - len(body.lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    hint = body[:letters]
    return "v" if not hint or hint == "arg" else hint


# Tokens of the body copied as they are (outside aliases, which collapse whitespace).
_VERBATIM = frozenset(
    {TokenKind.WHITESPACE, TokenKind.NEWLINE, TokenKind.INTEGER, TokenKind.FLOAT, TokenKind.STRING,
     TokenKind.AT_ID, TokenKind.BODY_CHAR}
)
_REGION_BRACES = frozenset({"{", "}"})
_REWRITTEN_WORDS = frozenset({"loc", "dense_resource"})


class _Inliner:
    """Rewrites one function body into pieces of text for the builder."""

    def __init__(
        self,
        module: _SourceModule,
        function: _Function,
        operands: Sequence[str],
        builder: MLIRBuilder,
        location: str | None,
        result_names: Sequence[str] | None = None,
    ) -> None:
        self.module = module
        self.tokens = module.tokens
        self.function = function
        self.builder = builder
        self.location = location
        self.survey = module.surveys.get(function.name) or module.surveys.setdefault(
            function.name, _survey(module, function)
        )
        self.preset = self.preset_names(result_names) if result_names is not None else {}
        self.scopes = [_Scope(dict(zip(function.arg_names, operands)), {})]
        self.pending: dict[str, str] = {}  # region arguments declared before their region opens
        self.pieces: list[_Piece] = []
        self.results: list[str] = []
        self.alias_cache: dict[tuple[str, bool], list[_Piece]] = {}
        self.expanding: list[str] = []

    # ------------------------------------------------------------------ names
    def preset_names(self, result_names: Sequence[str]) -> dict[str, str]:
        """Source name -> wanted name, for each returned value that can simply be defined under
        the name its caller chose: the sole result of a top-level op, returned once."""
        survey, tokens = self.survey, self.tokens
        returned = [i for i in range(survey.return_start, survey.return_end) if tokens[i].kind is TokenKind.VALUE_ID]
        if len(returned) != len(result_names):
            raise MLIRSyntaxError(
                f"@{self.function.name} returns {len(returned)} values but {len(result_names)} result names were given"
            )
        times_returned = collections.Counter(tokens[i].value_name for i in returned)
        preset: dict[str, str] = {}
        for index, wanted in zip(returned, result_names):
            token = tokens[index]
            after = self.module.significant(index + 1)
            if (
                token.value_suffix
                or tokens[after].kind is TokenKind.HASH_ID
                or times_returned[token.value_name] > 1
                or token.value_name not in survey.sole_results
            ):
                continue
            preset[token.value_name] = wanted
        return preset

    def lookup_value(self, name: str) -> str | None:
        if name in self.pending:
            return self.pending[name]
        for scope in reversed(self.scopes):
            if name in scope.values:
                return scope.values[name]
        return None

    def value(self, index: int) -> str:
        token = self.tokens[index]
        name = token.value_name
        renamed = self.lookup_value(name)
        if index in self.survey.value_defs:
            if renamed is not None:
                raise self.module.error(
                    f"{name} is defined while a value of that name is visible (defined twice, or "
                    "used before its definition, which inlining does not support)",
                    token,
                )
            if len(self.scopes) == 1 and self.survey.sole_results.get(name) == index and name in self.preset:
                renamed = self.preset[name]
            else:
                renamed = self.builder.fresh(_name_hint(name))
            self.scopes[-1].values[name] = renamed
        elif renamed is None:
            renamed = self.pending[name] = self.builder.fresh(_name_hint(name))
        return renamed + token.value_suffix

    def label(self, index: int) -> str:
        token = self.tokens[index]
        for scope in reversed(self.scopes):
            if token.text in scope.labels:
                return scope.labels[token.text]
        raise self.module.error(f"{token.text} is not a block of the enclosing region", token)

    def open_region(self, index: int) -> None:
        labels = {
            self.tokens[i].text: self.builder.fresh_block()
            for i in self.survey.labels_by_region.get(index, [])
        }
        self.scopes.append(_Scope(self.pending, labels))
        self.pending = {}

    # ----------------------------------------------------- attributes, aliases
    def reference(self, index: int, in_location: bool) -> None:
        token = self.tokens[index]
        if token.text in self.module.aliases:
            self.pieces.extend(self.expand_alias(token.text, in_location))
            return
        body = token.text[1:]
        opaque_dialect_form = index + 1 < len(self.tokens) and self.tokens[index + 1].is_punct("<")
        if not (body.isdigit() or "." in body or opaque_dialect_form):
            raise self.module.error(f"{token.text} refers to an alias the module does not define", token)
        self.pieces.append(token.text)

    def expand_alias(self, name: str, in_location: bool) -> list[_Piece]:
        """The alias's value, itself expanded; in a location, ``loc(X)`` contributes ``X``."""
        cached = self.alias_cache.get((name, in_location))
        if cached is not None:
            return cached
        if name in self.expanding:
            cycle = " -> ".join([*self.expanding[self.expanding.index(name) :], name])
            raise self.module.error(f"alias {name} is defined in terms of itself ({cycle})")
        start, end = self.module.aliases[name]
        inner = self.location_body(start, end) if in_location else None
        outer_pieces, self.pieces = self.pieces, []
        self.expanding.append(name)
        try:
            if inner is not None:
                self.span(*inner, in_location=True, in_alias=True)
            else:
                self.span(start, end, in_location=False, in_alias=True)
            expanded = self.pieces
        finally:
            self.expanding.pop()
            self.pieces = outer_pieces
        collapsed: list[_Piece] = []
        for piece in expanded:  # one space for each run of whitespace, none at the ends
            if piece != " " or (collapsed and collapsed[-1] != " "):
                collapsed.append(piece)
        while collapsed and collapsed[-1] == " ":
            collapsed.pop()
        self.alias_cache[(name, in_location)] = collapsed
        return collapsed

    def location_body(self, start: int, end: int) -> tuple[int, int] | None:
        """If tokens start..end are exactly ``loc(X)``, the span of X."""
        first = self.module.significant(start, end)
        if first >= end or self.tokens[first].text != "loc":
            return None
        paren = self.module.significant(first + 1, end)
        if not self.module.is_punct_at(paren, "(") or paren >= end:
            return None
        close = self.module.closing(paren)
        return (paren + 1, close) if self.module.significant(close + 1, end) == end else None

    def span(self, start: int, end: int, *, in_location: bool, in_alias: bool) -> None:
        index = start
        while index < end:
            index = self.attribute_token(index, in_location=in_location, in_alias=in_alias)

    def attribute_token(self, index: int, *, in_location: bool, in_alias: bool) -> int:
        """Rewrite the token at ``index`` outside SSA syntax; return the next index to visit."""
        token = self.tokens[index]
        kind = token.kind
        if kind is TokenKind.COMMENT:
            return index + 1
        if in_alias and kind in (TokenKind.WHITESPACE, TokenKind.NEWLINE):
            self.pieces.append(" ")
            return index + 1
        if kind in (TokenKind.HASH_ID, TokenKind.BANG_ID):
            self.reference(index, in_location)
            return index + 1
        if kind in (TokenKind.VALUE_ID, TokenKind.CARET_ID):
            raise self.module.error(f"unexpected {token.text} inside an attribute or location", token)
        if kind is TokenKind.BARE_ID and token.text in ("loc", "dense_resource"):
            opener = self.module.significant(index + 1)
            if token.text == "loc" and self.module.is_punct_at(opener, "("):
                return self.location_group(index, opener, in_alias=in_alias)
            if token.text == "dense_resource" and self.module.is_punct_at(opener, "<"):
                return self.resource_handle(index, opener)
        if in_location and token.is_punct("<"):  # fused<metadata>: an attribute, not a location
            close = self.module.closing(index)
            self.pieces.append("<")
            self.span(index + 1, close, in_location=False, in_alias=in_alias)
            self.pieces.append(">")
            return close + 1
        self.pieces.append(token.text)
        return index + 1

    def location_group(self, index: int, opener: int, *, in_alias: bool) -> int:
        """``loc(...)``: replaced by the caller's location in the body, else expanded."""
        close = self.module.closing(opener)
        if self.location is not None and not in_alias:
            self.pieces.append(f"loc({self.location})")
        else:
            self.pieces.extend(t.text for t in self.tokens[index : opener + 1])
            self.span(opener + 1, close, in_location=True, in_alias=in_alias)
            self.pieces.append(")")
        return close + 1

    def resource_handle(self, index: int, opener: int) -> int:
        """``dense_resource<key>``: the key becomes a placeholder until the builder names it."""
        key_index = self.module.significant(opener + 1)
        closer = self.module.significant(key_index + 1)
        if not (
            key_index < len(self.tokens)
            and self.tokens[key_index].kind in (TokenKind.BARE_ID, TokenKind.STRING)
            and self.module.is_punct_at(closer, ">")
        ):
            raise self.module.error("expected dense_resource<key>", self.tokens[index])
        self.pieces.extend(t.text for t in self.tokens[index:key_index])
        self.pieces.append(_ResourceKey(_unquote(self.tokens[key_index])))
        self.pieces.extend(t.text for t in self.tokens[key_index + 1 : closer + 1])
        return closer + 1

    # ------------------------------------------------------------------- body
    def run(self) -> None:
        survey, tokens, pieces = self.survey, self.tokens, self.pieces
        index, end = self.function.body_open + 1, self.function.body_close
        while index < end:
            token = tokens[index]
            kind = token.kind
            if (
                kind in _VERBATIM
                or (kind is TokenKind.PUNCT and token.text not in _REGION_BRACES)
                or (kind is TokenKind.BARE_ID and token.text not in _REWRITTEN_WORDS)
            ) and index != survey.return_start:
                pieces.append(token.text)  # the common case, kept out of the calls below
                index += 1
            elif index == survey.return_start:
                self.results = [
                    self.returned(i)
                    for i in range(index, survey.return_end)
                    if self.tokens[i].kind is TokenKind.VALUE_ID
                ]
                index = survey.return_end
            elif token.kind is TokenKind.VALUE_ID:
                self.pieces.append(self.value(index))
                index += 1
            elif token.kind is TokenKind.CARET_ID:
                self.pieces.append(self.label(index))
                index += 1
            elif token.is_punct("{"):
                self.open_region(index)
                self.pieces.append("{")
                index += 1
            elif token.is_punct("}"):
                self.scopes.pop()
                self.pieces.append("}")
                index += 1
            else:
                index = self.attribute_token(index, in_location=False, in_alias=False)

    def returned(self, index: int) -> str:
        """The new name of a returned value, with its result number (``%r#1``, or ``%r #1``)."""
        token = self.tokens[index]
        renamed = self.lookup_value(token.value_name)
        if renamed is None:
            raise self.module.error(f"@{self.function.name} returns {token.text}, which it never defines", token)
        suffix = token.value_suffix
        after = self.module.significant(index + 1)
        if not suffix and self.tokens[after].kind is TokenKind.HASH_ID and self.tokens[after].text[1:].isdigit():
            suffix = self.tokens[after].text
        return renamed + suffix

    def text(self) -> str:
        """The rewritten body with resources registered in the builder; blank lines dropped."""
        blobs = self.module.resources.get(_RESOURCE_DIALECT, {})
        keys: dict[str, str] = {}
        for piece in self.pieces:
            if isinstance(piece, _ResourceKey) and piece.key not in keys:
                if piece.key not in blobs:
                    raise MLIRSyntaxError(
                        f"dense_resource<{piece.key}> in @{self.function.name} has no blob in the "
                        "module's dialect_resources section"
                    )
                keys[piece.key] = ""
        for key in keys:
            keys[key] = self.builder.add_resource(_RESOURCE_DIALECT, key, blobs[key])
            if keys[key] != key:
                log.debug("resource %s of @%s is %s in the emitted module", key, self.function.name, keys[key])
        text = "".join(
            piece if isinstance(piece, str) else format_resource_key(keys[piece.key]) for piece in self.pieces
        )
        return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def _check_operand(operand: str) -> None:
    if not _is_operand(operand):
        raise MLIRSyntaxError(f"operand {operand!r} is not an SSA value (%name or %name#N)")


@functools.lru_cache(maxsize=4096)
def _is_operand(text: str) -> bool:
    try:
        tokens = tokenize(text)
    except MLIRSyntaxError:
        return False
    return len(tokens) == 1 and tokens[0].kind is TokenKind.VALUE_ID and not tokens[0].value_suffix.startswith(":")


def _check_location(location: str, builder: MLIRBuilder) -> None:
    for alias in _location_aliases(location):
        if alias not in builder.aliases:
            raise MLIRSyntaxError(f"location {location!r} uses {alias}, which the builder does not define")


@functools.lru_cache(maxsize=1024)
def _location_aliases(location: str) -> tuple[str, ...]:
    """The aliases a location body refers to; raises if it is not a location body."""
    if not location.strip():
        raise MLIRSyntaxError("the location must not be empty")
    wrapped = f"loc({location})"
    try:
        tokens = tokenize(wrapped)
        closes_at_end = find_closing(tokens, 1, source=wrapped) == len(tokens) - 1
    except MLIRSyntaxError as err:
        raise MLIRSyntaxError(f"location {location!r} is not a location body: {err}") from None
    if not closes_at_end or any(t.kind in (TokenKind.NEWLINE, TokenKind.COMMENT) for t in tokens):
        raise MLIRSyntaxError(f"location {location!r} is not a location body")
    aliases = []
    for token in tokens:
        if token.kind in (TokenKind.VALUE_ID, TokenKind.CARET_ID):
            raise MLIRSyntaxError(f"location {location!r} contains {token.text}")
        if token.kind in (TokenKind.HASH_ID, TokenKind.BANG_ID) and "." not in token.text:
            aliases.append(token.text)
    return tuple(aliases)


def inline_torch_mlir_output(
    mlir_text: str,
    operands: Sequence[str],
    builder: MLIRBuilder,
    *,
    func_name: str | None = None,
    location: str | None = None,
    result_names: Sequence[str] | None = None,
) -> list[str]:
    """Emit the body of a module's function into ``builder``; return the SSA names it returns.

    ``mlir_text`` is a module such as torch-mlir prints (with or without debug info). The
    function is the only one with a body, or the one named ``func_name`` (without ``@``).
    Its arguments stand for ``operands`` (SSA values of the builder's module, one per
    argument); every value and block the body defines is renamed with the builder's fresh
    names; aliases are expanded; ``dense_resource`` blobs are added to the builder. When
    ``location`` (a location body such as ``"kernel.py":12:8``) is given, it replaces every
    location in the body. The returned names follow the order of the ``return`` operands
    (``%r#1`` for a result of a multi-result op).

    ``result_names`` (one per returned value; names the builder handed out and nothing
    defines yet) lets a caller name results before the text exists: each returned value
    that is the sole result of a top-level op and returned once is defined under its
    name. The others (a function argument, one result of a multi-result op, a value
    returned twice) keep their own names, so compare the returned names with the wanted
    ones and bind what differs.

    Raises :class:`MLIRSyntaxError` if the text cannot be inlined: no such function, wrong
    operand count, a body with several blocks, an undefined alias or resource.
    """
    for operand in operands:
        _check_operand(operand)
    for name in result_names or ():
        _check_operand(name)
        if "#" in name or not builder.is_taken(name):
            raise MLIRSyntaxError(f"result name {name!r} must be a plain SSA name the builder handed out")
    if location is not None:
        _check_location(location, builder)
    module = _scan_module(mlir_text)
    function = _select_function(module, func_name)
    if len(operands) != len(function.arg_names):
        raise MLIRSyntaxError(
            f"@{function.name} takes {len(function.arg_names)} arguments but {len(operands)} operands were given"
        )
    inliner = _Inliner(module, function, operands, builder, location, result_names)
    inliner.run()
    body = inliner.text()
    if body:
        builder.emit(body)
    log.debug(
        "inlined @%s: %d lines, results %s", function.name, body.count("\n") + bool(body), inliner.results
    )
    return inliner.results
