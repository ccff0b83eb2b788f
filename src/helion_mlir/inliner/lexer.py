"""A lexer for MLIR's textual syntax that keeps every character.

The inliner rewrites MLIR text produced by torch-mlir (SSA names, block labels, alias
references, locations). Doing that on tokens instead of on raw lines is what keeps string
attributes, locations and dialect attribute bodies intact: a ``%`` inside ``"..."`` is part
of a string token and is never mistaken for a value.

Every character of the input belongs to exactly one token (whitespace, newlines and
comments included), so ``"".join(t.text for t in tokenize(text)) == text`` always holds
and rewritten text keeps the original layout.

The token classes follow the lexical rules of the MLIR language reference, with two
conveniences for the inliner:

* a value id carries its result-group suffix when it is written attached to the name:
  ``%0:2`` (a definition of two results) and ``%0#1`` (a use of result 1) are one token;
* inside a ``<...>`` body (dialect attributes and types, ``dense<...>``, ``affine_map<...>``)
  characters that only the dialect's own parser understands become ``BODY_CHAR`` tokens
  instead of errors, as MLIR's parser accepts almost anything there.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import MLIRSyntaxError

__all__ = [
    "TokenKind",
    "Token",
    "tokenize",
    "find_closing",
    "next_significant",
    "is_bare_identifier",
    "is_suffix_id",
    "strip_locations",
    "OPENERS",
    "CLOSERS",
]


class TokenKind(enum.Enum):
    """The lexical class of a token."""

    VALUE_ID = "value-id"  # %name, %0, %0:2 (result group), %0#1 (result use)
    CARET_ID = "caret-id"  # ^bb0
    HASH_ID = "hash-id"  # #map, #loc3, #dialect.attr, #1
    BANG_ID = "bang-id"  # !alias, !dialect.type
    AT_ID = "at-id"  # @sym, @"quoted"
    STRING = "string"  # "with \"escapes\""
    INTEGER = "integer"  # 42, 0xFF800000
    FLOAT = "float"  # 1.0, 0.000000e+00
    BARE_ID = "bare-id"  # keywords, types, op names: linalg.generic, x8xf32, loc
    PUNCT = "punct"  # ( ) [ ] { } < > , : = -> ... ? * + - |
    METADATA_BEGIN = "metadata-begin"  # {-#
    METADATA_END = "metadata-end"  # #-}
    BODY_CHAR = "body-char"  # any other character inside a <...> dialect body
    COMMENT = "comment"  # // to the end of the line (newline excluded)
    WHITESPACE = "whitespace"  # spaces, tabs, carriage returns
    NEWLINE = "newline"  # \n

    # Members are singletons: identity hashing in C, instead of Enum's hash of the name in
    # Python, which set lookups on every token of every inlined module would pay.
    __hash__ = object.__hash__


_TRIVIA = frozenset({TokenKind.WHITESPACE, TokenKind.NEWLINE, TokenKind.COMMENT})

OPENERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
CLOSERS = {close: open_ for open_, close in OPENERS.items()}


class Token(NamedTuple):
    """One token: its class, its exact source text and where it starts in the input."""

    kind: TokenKind
    text: str
    offset: int

    @property
    def end(self) -> int:
        """Offset just past the token."""
        return self.offset + len(self.text)

    @property
    def is_trivia(self) -> bool:
        """Whitespace, newlines and comments: tokens that carry no syntax."""
        return self.kind in _TRIVIA

    def is_punct(self, text: str) -> bool:
        """Whether this is the punctuation token ``text``."""
        return self.kind is TokenKind.PUNCT and self.text == text

    @property
    def value_name(self) -> str:
        """For a value id, the name without a ``:N`` or ``#N`` suffix (``%0:2`` -> ``%0``)."""
        return self.text[: len(self.text) - len(self.value_suffix)]

    @property
    def value_suffix(self) -> str:
        """For a value id, its result-group suffix: ``:2``, ``#1`` or ``""``."""
        if self.kind is not TokenKind.VALUE_ID:
            return ""
        for mark in ":#":
            cut = self.text.find(mark)
            if cut != -1:
                return self.text[cut:]
        return ""


# suffix-id ::= digit+ | (letter | id-punct) (letter | id-punct | digit)*
_SUFFIX = r"(?:[0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)"
# bare-id ::= (letter | '_') (letter | digit | [_$.])*
_BARE = r"[A-Za-z_][A-Za-z0-9_$.]*"
_STRING = r'"[^"\\\n]*(?:\\[^\n][^"\\\n]*)*"'  # escapes unrolled: no per-character alternation
_SUFFIX_ID = re.compile(_SUFFIX)
_BARE_ID = re.compile(_BARE)
# One alternative per token class, tried in order at each position; the first that
# matches wins, so '{-#' beats '{', '->' beats '-', and floats beat integers.
_TOKEN = re.compile(
    "|".join(
        [
            r"(?P<NEWLINE>\n)",
            r"(?P<WHITESPACE>[ \t\r\f\v]+)",
            r"(?P<COMMENT>//[^\n]*)",
            r"(?P<METADATA_BEGIN>\{-\#)",
            r"(?P<METADATA_END>\#-\})",
            rf"(?P<VALUE_ID>%{_SUFFIX}(?:[:#][0-9]+)?)",
            rf"(?P<CARET_ID>\^{_SUFFIX})",
            rf"(?P<HASH_ID>\#{_SUFFIX})",
            rf"(?P<BANG_ID>!{_SUFFIX})",
            rf"(?P<AT_ID>@(?:{_STRING}|{_SUFFIX}))",
            rf"(?P<STRING>{_STRING})",
            rf"(?P<BARE_ID>{_BARE})",
            r"(?P<FLOAT>[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?)",
            r"(?P<INTEGER>0x[0-9A-Fa-f]+|[0-9]+)",
            r"(?P<PUNCT>\.\.\.|->|[()\[\]{}<>,:=?*+\-|])",
            r"(?P<OTHER>[\s\S])",  # anything else: an error, or a BODY_CHAR inside '<...>'
        ]
    )
)
_SIGILS = frozenset("%^#!@")


def is_suffix_id(text: str) -> bool:
    """Whether ``text`` may follow a sigil (``%``, ``^``, ``#``, ``!``, ``@``) as a name."""
    return _SUFFIX_ID.fullmatch(text) is not None


def is_bare_identifier(text: str) -> bool:
    """Whether ``text`` is a bare identifier (usable unquoted, e.g. as a resource key)."""
    return _BARE_ID.fullmatch(text) is not None


# What strip_locations looks at: string literals and comments (skipped whole, so a
# "loc(" inside them stays), a plain file location, and the start of any other one.
_LOCATION_START = re.compile(rf"{_STRING}|//[^\n]*|(?P<file> loc\({_STRING}:[0-9]+:[0-9]+\))|(?P<location> loc\()")
_PAREN_OR_STRING = re.compile(rf"{_STRING}|[()]")


def strip_locations(text: str) -> str:
    """``text`` without its trailing `` loc(...)`` locations, everything else byte for byte.

    This is the text MLIR's printer gives without ``--mlir-print-debuginfo``. The module
    builder writes locations inline (no ``#loc`` aliases), so dropping each group is the
    whole job; a regular-expression scan instead of :func:`tokenize` keeps it cheap.
    """
    pieces: list[str] = []
    kept = position = 0
    while (match := _LOCATION_START.search(text, position)) is not None:
        position = match.end()
        if match.group("file") is None and match.group("location") is None:
            continue
        depth = 0 if match.group("file") else 1
        while depth:
            inner = _PAREN_OR_STRING.search(text, position)
            if inner is None:
                raise MLIRSyntaxError("'loc(' is never closed", text=text, offset=match.start() + 1)
            depth += {"(": 1, ")": -1}.get(inner.group(), 0)
            position = inner.end()
        pieces.append(text[kept : match.start()])
        kept = position
    pieces.append(text[kept:])
    return "".join(pieces)


def _lex(text: str) -> list[Token]:
    tokens: list[Token] = []
    # Open brackets, so that '>' only closes a '<' and stray characters are tolerated
    # inside dialect bodies ('<...>'), where only the dialect's parser gives them meaning.
    brackets: list[str] = []
    open_angles = 0
    kinds = TokenKind.__members__
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        token_text = match.group()
        pos = match.start()
        if kind == "PUNCT":
            if token_text in OPENERS:
                brackets.append(token_text)
                open_angles += token_text == "<"
            elif token_text in CLOSERS and brackets and brackets[-1] == CLOSERS[token_text]:
                open_angles -= brackets.pop() == "<"
        elif kind == "OTHER":
            if token_text == '"' or (token_text == "@" and text.startswith('"', pos + 1)):
                raise MLIRSyntaxError("unterminated string literal", text=text, offset=text.index('"', pos))
            if not open_angles:
                what = "expected a name after" if token_text in _SIGILS else "unexpected character"
                raise MLIRSyntaxError(f"{what} {token_text!r}", text=text, offset=pos)
            kind = "BODY_CHAR"
        tokens.append(Token(kinds[kind], token_text, pos))  # type: ignore[index]
    return tokens


def tokenize(text: str) -> list[Token]:
    """Split MLIR text into tokens whose texts concatenate back to ``text``.

    Raises :class:`MLIRSyntaxError` (with the offending offset) on an unterminated string
    or a character that cannot start any token outside a ``<...>`` dialect body.
    """
    return _lex(text)


def next_significant(tokens: Sequence[Token], index: int, end: int | None = None) -> int:
    """Index of the first non-trivia token at or after ``index`` (``end`` if there is none)."""
    stop = len(tokens) if end is None else end
    while index < stop and tokens[index].is_trivia:
        index += 1
    return index


def find_closing(tokens: Sequence[Token], open_index: int, *, source: str | None = None) -> int:
    """Index of the token that closes the bracket (or ``{-#``) at ``open_index``.

    Brackets nest; a ``>`` only closes a ``<`` (so ``->`` and the ``>=`` of affine
    constraints inside parentheses do not end a ``<...>`` body). Mismatched or unclosed
    brackets raise :class:`MLIRSyntaxError`; ``source`` (the lexed text) improves the message.
    """
    opener = tokens[open_index]
    if opener.kind is TokenKind.METADATA_BEGIN:
        for index in range(open_index + 1, len(tokens)):
            if tokens[index].kind is TokenKind.METADATA_END:
                return index
        raise MLIRSyntaxError("'{-#' is never closed by '#-}'", text=source, offset=opener.offset)
    if opener.kind is not TokenKind.PUNCT or opener.text not in OPENERS:
        raise ValueError(f"token {opener.text!r} at offset {opener.offset} is not an opening bracket")
    stack = [opener]
    for index in range(open_index + 1, len(tokens)):
        token = tokens[index]
        if token.kind is not TokenKind.PUNCT:
            continue
        if token.text in OPENERS:
            stack.append(token)
        elif token.text in CLOSERS:
            expected = OPENERS[stack[-1].text]
            if token.text == expected:
                stack.pop()
                if not stack:
                    return index
            elif token.text != ">":
                raise MLIRSyntaxError(
                    f"'{token.text}' does not match '{stack[-1].text}'", text=source, offset=token.offset
                )
    raise MLIRSyntaxError(f"'{opener.text}' is never closed", text=source, offset=opener.offset)
