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
from dataclasses import dataclass

from .errors import MLIRSyntaxError

__all__ = [
    "TokenKind",
    "Token",
    "tokenize",
    "find_closing",
    "next_significant",
    "is_bare_identifier",
    "is_suffix_id",
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


_TRIVIA = frozenset({TokenKind.WHITESPACE, TokenKind.NEWLINE, TokenKind.COMMENT})

OPENERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
CLOSERS = {close: open_ for open_, close in OPENERS.items()}


@dataclass(frozen=True, slots=True)
class Token:
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
_SUFFIX_ID = re.compile(r"[0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*")
# bare-id ::= (letter | '_') (letter | digit | [_$.])*
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_NUMBER = re.compile(r"0x[0-9A-Fa-f]+|[0-9]+(\.[0-9]*([eE][-+]?[0-9]+)?)?")
_DIGITS = re.compile(r"[0-9]+")
_WHITESPACE = re.compile(r"[ \t\r\f\v]+")
_PUNCT = ("...", "->", "(", ")", "[", "]", "{", "}", "<", ">", ",", ":", "=", "?", "*", "+", "-", "|")
_PUNCT_BY_FIRST_CHAR: dict[str, tuple[str, ...]] = {}
for _punct in _PUNCT:  # longest spellings first, as listed
    _PUNCT_BY_FIRST_CHAR[_punct[0]] = (*_PUNCT_BY_FIRST_CHAR.get(_punct[0], ()), _punct)
_SIGILS = {
    "%": TokenKind.VALUE_ID,
    "^": TokenKind.CARET_ID,
    "#": TokenKind.HASH_ID,
    "!": TokenKind.BANG_ID,
    "@": TokenKind.AT_ID,
}


def is_suffix_id(text: str) -> bool:
    """Whether ``text`` may follow a sigil (``%``, ``^``, ``#``, ``!``, ``@``) as a name."""
    return _SUFFIX_ID.fullmatch(text) is not None


def is_bare_identifier(text: str) -> bool:
    """Whether ``text`` is a bare identifier (usable unquoted, e.g. as a resource key)."""
    return _BARE_ID.fullmatch(text) is not None


def _string_end(text: str, start: int) -> int:
    """Offset just past the string literal that opens at ``start``."""
    pos = start + 1
    while pos < len(text):
        char = text[pos]
        if char == '"':
            return pos + 1
        if char == "\\":
            pos += 1  # the escaped character (checked below: a newline still ends the line)
            if pos == len(text):
                break
            char = text[pos]
        if char == "\n":
            break
        pos += 1
    raise MLIRSyntaxError("unterminated string literal", text=text, offset=start)


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.tokens: list[Token] = []
        # Open brackets, so that '>' only closes a '<' and stray characters are
        # tolerated inside dialect bodies.
        self.brackets: list[str] = []
        self.open_angles = 0

    def add(self, kind: TokenKind, end: int) -> None:
        self.tokens.append(Token(kind, self.text[self.pos : end], self.pos))
        self.pos = end

    def track(self, punct: str) -> None:
        if punct in OPENERS:
            self.brackets.append(punct)
            self.open_angles += punct == "<"
        elif punct in CLOSERS and self.brackets and self.brackets[-1] == CLOSERS[punct]:
            self.open_angles -= self.brackets.pop() == "<"

    def stray(self, what: str) -> None:
        if self.open_angles:
            self.add(TokenKind.BODY_CHAR, self.pos + 1)
            return
        raise MLIRSyntaxError(what, text=self.text, offset=self.pos)

    def run(self) -> list[Token]:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\n":
                self.add(TokenKind.NEWLINE, self.pos + 1)
            elif (match := _WHITESPACE.match(text, self.pos)) is not None:
                self.add(TokenKind.WHITESPACE, match.end())
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.add(TokenKind.COMMENT, len(text) if end == -1 else end)
            elif char == '"':
                self.add(TokenKind.STRING, _string_end(text, self.pos))
            elif text.startswith("{-#", self.pos):
                self.add(TokenKind.METADATA_BEGIN, self.pos + 3)
            elif text.startswith("#-}", self.pos):
                self.add(TokenKind.METADATA_END, self.pos + 3)
            elif char in _SIGILS:
                self.sigil_id(char)
            elif char.isascii() and (char.isalpha() or char == "_"):
                self.add(TokenKind.BARE_ID, _BARE_ID.match(text, self.pos).end())  # type: ignore[union-attr]
            elif char.isascii() and char.isdigit():
                match = _NUMBER.match(text, self.pos)
                assert match is not None
                kind = TokenKind.FLOAT if match.group(1) else TokenKind.INTEGER
                self.add(kind, match.end())
            else:
                candidates = _PUNCT_BY_FIRST_CHAR.get(char, ())
                punct = next((p for p in candidates if text.startswith(p, self.pos)), None)
                if punct is None:
                    self.stray(f"unexpected character {char!r}")
                else:
                    self.track(punct)
                    self.add(TokenKind.PUNCT, self.pos + len(punct))
        return self.tokens

    def sigil_id(self, sigil: str) -> None:
        text = self.text
        start = self.pos + 1
        if sigil == "@" and text.startswith('"', start):
            self.add(TokenKind.AT_ID, _string_end(text, start))
            return
        match = _SUFFIX_ID.match(text, start)
        if match is None:
            self.stray(f"expected a name after {sigil!r}")
            return
        end = match.end()
        if sigil == "%" and end < len(text) and text[end] in ":#":
            group = _DIGITS.match(text, end + 1)
            if group is not None:
                end = group.end()
        self.add(_SIGILS[sigil], end)


def tokenize(text: str) -> list[Token]:
    """Split MLIR text into tokens whose texts concatenate back to ``text``.

    Raises :class:`MLIRSyntaxError` (with the offending offset) on an unterminated string
    or a character that cannot start any token outside a ``<...>`` dialect body.
    """
    return _Lexer(text).run()


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
