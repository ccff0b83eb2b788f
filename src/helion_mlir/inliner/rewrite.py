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

All of this works on the token stream of :mod:`helion_mlir.inliner.lexer`, so string
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
from dataclasses import dataclass

from ..errors import MLIRSyntaxError
from .builder import MLIRBuilder, format_resource_key
from .lexer import TokenKind, find_closing, tokenize
from .survey import (
    SourceModule,
    SurveyedFunction,
    scan_module,
    select_function,
    survey_function,
    unquote,
)

__all__ = ["inline_torch_mlir_output"]

log = logging.getLogger(__name__)

_RESOURCE_DIALECT = "builtin"  # the dialect of dense_resource<...> handles


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
        module: SourceModule,
        function: SurveyedFunction,
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
            function.name, survey_function(module, function)
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
        the name its caller chose: a result of a top-level op with a name of its own (not a
        member of a result group), returned once."""
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
                or token.value_name not in survey.named_results
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
            if len(self.scopes) == 1 and self.survey.named_results.get(name) == index and name in self.preset:
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
        self.pieces.append(_ResourceKey(unquote(self.tokens[key_index])))
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
    that is a result of a top-level op with a name of its own (``%a`` in ``%a = ...`` or
    ``%a, %b = ...``) and returned once is defined under its name. The others (a function
    argument, a member of a result group such as ``%g#0``, a value returned twice) keep
    their own names, so compare the returned names with the wanted ones and bind what
    differs.

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
    module = scan_module(mlir_text)
    function = select_function(module, func_name)
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
