"""Survey of a torch-mlir module before inlining: its functions, aliases (``#map``,
``!type``, ``#loc``), resources and, for the function to inline, where each result is
defined and which names its body binds. Surveys are cached per module text: a kernel
inlines the same text many times."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..errors import MLIRSyntaxError
from ..caches import LRUCache
from .lexer import OPENERS, Token, TokenKind, find_closing, next_significant, tokenize

log = logging.getLogger(__name__)

_VISIBILITY = frozenset({"private", "public", "nested"})
_RETURN_OPS = frozenset({"return", "func.return", '"func.return"'})


@dataclass(frozen=True)
class SurveyedFunction:
    name: str
    arg_names: tuple[str, ...]
    body_open: int  # token index just before the body: its '{', or the ':' ending the entry label
    body_close: int  # token index of the matching '}'


@dataclass
class SourceModule:
    text: str
    tokens: list[Token]
    aliases: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> token span of its value
    resources: dict[str, dict[str, str]] = field(default_factory=dict)  # dialect -> key -> blob
    functions: list[SurveyedFunction] = field(default_factory=list)
    surveys: dict[str, "Survey"] = field(default_factory=dict)  # function name -> its body's survey

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


def unquote(token: Token) -> str:
    """A name written bare or as a string literal (resource keys, @"symbols"), without quotes."""
    text = token.text.lstrip("@")
    return text[1:-1] if text.startswith('"') else text


# --------------------------------------------------------------------------- module layout
# A scanned module holds a token per word of its text: about 52 bytes per character of
# text with its function surveys (tracemalloc over the examples' imports), plus the module.
SCANNED_BYTES_PER_CHAR = 52
SCANNED_MODULES_BYTES = 16 * 2**20
_SCANNED: "LRUCache[SourceModule]" = LRUCache(
    SCANNED_MODULES_BYTES, weigh=lambda module: 1024 + SCANNED_BYTES_PER_CHAR * len(module.text))


def scan_module(text: str) -> SourceModule:
    """Find the alias definitions, the resources section and the functions of a module.

    Cached (the most recently used, up to :data:`SCANNED_MODULES_BYTES` of estimated
    memory): the same torch-mlir output is often inlined many times (one ATen op at several
    sites of a kernel). The result is only read afterwards, apart from the surveys of its
    function bodies, which it memoizes.
    """
    found = _SCANNED.get(text)
    if found is None:
        found = _scan(text)
        _SCANNED.put(text, found)
    return found


def _scan(text: str) -> SourceModule:
    module = SourceModule(text, tokenize(text))
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
        elif starting and token.kind is TokenKind.STRING and token.text == '"func.func"':
            index = _read_generic_function(module, index)
        else:
            if token.kind is TokenKind.PUNCT:
                if token.text in OPENERS:
                    brackets.append(token.text)
                    statement_start = token.text == "{"
                elif brackets and token.text == OPENERS[brackets[-1]]:
                    brackets.pop()
            index += 1
    return module


def _read_alias(module: SourceModule, index: int) -> int:
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


def _entries(module: SourceModule, start: int, end: int) -> list[tuple[Token, int, int]]:
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


def _read_metadata(module: SourceModule, open_index: int, close: int) -> None:
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
            entries = module.resources.setdefault(unquote(dialect), {})
            for key, v_start, v_end in _entries(module, d_start + 1, module.closing(d_start)):
                value = tokens[v_start]
                if value.kind is TokenKind.STRING and module.significant(v_start + 1, v_end) == v_end:
                    entries[unquote(key)] = value.text[1:-1]
                else:
                    log.debug("ignoring non-blob resource %s:%s", dialect.text, key.text)


def _argument_names(module: SourceModule, open_index: int, close: int, name: str) -> tuple[str, ...]:
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


def _read_function(module: SourceModule, index: int) -> int:
    """Record a ``func.func`` with a body; return the index just past it."""
    tokens = module.tokens
    cursor = module.significant(index + 1)
    if cursor < len(tokens) and tokens[cursor].kind is TokenKind.BARE_ID and tokens[cursor].text in _VISIBILITY:
        cursor = module.significant(cursor + 1)
    if cursor >= len(tokens) or tokens[cursor].kind is not TokenKind.AT_ID:
        raise module.error("expected a symbol name after func.func", tokens[index])
    name = unquote(tokens[cursor])
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
            module.functions.append(SurveyedFunction(name, arg_names, cursor, body_close))
            return body_close + 1
        if token.kind is TokenKind.PUNCT and token.text in OPENERS:
            cursor = module.closing(cursor)
        previous, new_line = token, False
        cursor = signature_end = cursor + 1
    return signature_end


def _read_generic_function(module: SourceModule, index: int) -> int:
    """Record a ``func.func`` printed in generic form, ``"func.func"() <{..., sym_name =
    "f"}> ({ ^bb0(%arg0: T, ...): ... }) : () -> ()``; return the index just past it.

    Its body starts after the entry block's label, whose arguments are the function's
    (a function without arguments may have no label).
    """
    tokens = module.tokens
    cursor = module.significant(index + 1)
    if not module.is_punct_at(cursor, "("):
        raise module.error("expected '(' after \"func.func\"", tokens[index])
    cursor = module.significant(module.closing(cursor) + 1)
    name = None
    if module.is_punct_at(cursor, "<"):
        close = module.closing(cursor)
        name = _string_property(module, cursor, close, "sym_name")
        cursor = module.significant(close + 1)
    if name is None or not module.is_punct_at(cursor, "("):
        raise module.error("expected a function with a sym_name property and a region", tokens[index])
    region_end = module.closing(cursor)
    region_open = module.significant(cursor + 1, region_end)
    if not module.is_punct_at(region_open, "{"):
        raise module.error(f"expected the body of @{name}", tokens[cursor])
    body_close = module.closing(region_open)
    first = module.significant(region_open + 1, body_close)
    if first >= body_close:
        return region_end + 1  # a declaration: an empty region
    body_open, arg_names = region_open, ()
    if tokens[first].kind is TokenKind.CARET_ID:  # the entry block's label holds the arguments
        args_open = module.significant(first + 1, body_close)
        if module.is_punct_at(args_open, "("):
            arg_names = _argument_names(module, args_open, module.closing(args_open), name)
            body_open = module.significant(module.closing(args_open) + 1, body_close)
        else:
            body_open = args_open
        if not module.is_punct_at(body_open, ":"):
            raise module.error(f"expected ':' after the entry block label of @{name}", tokens[first])
    module.functions.append(SurveyedFunction(name, arg_names, body_open, body_close))
    return region_end + 1


def _string_property(module: SourceModule, start: int, end: int, key: str) -> str | None:
    """The value of ``key = "..."`` between tokens ``start`` and ``end``, if it is there."""
    tokens = module.tokens
    for cursor in range(start, end):
        if tokens[cursor].kind is TokenKind.BARE_ID and tokens[cursor].text == key:
            equals = module.significant(cursor + 1, end)
            value = module.significant(equals + 1, end)
            if module.is_punct_at(equals, "=") and value < end and tokens[value].kind is TokenKind.STRING:
                return unquote(tokens[value])
    return None


def select_function(module: SourceModule, func_name: str | None) -> SurveyedFunction:
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
class Survey:
    """What the body's syntax says before any renaming (labels may be used before defined)."""

    value_defs: set[int] = field(default_factory=set)  # op results and label arguments
    # Results of top-level ops that have a name of their own (``%a`` in ``%a = ...`` or in
    # ``%a, %b = ...``, not a group member such as ``%g#0`` of ``%g:2 = ...``): name -> token.
    named_results: dict[str, int] = field(default_factory=dict)
    labels_by_region: dict[int, list[int]] = field(default_factory=dict)  # '{' index -> label tokens
    root_labels: list[int] = field(default_factory=list)
    return_start: int = -1
    return_end: int = -1  # the newline (or body end) that ends the return op


def _result_list(module: SourceModule, index: int, end: int) -> list[int]:
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


def survey_function(module: SourceModule, function: SurveyedFunction) -> Survey:
    tokens = module.tokens
    survey = Survey()
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
            if not brackets:
                for result in defined:
                    if _names_one_value(module, result, end):
                        survey.named_results[tokens[result].value_name] = result
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


def _names_one_value(module: SourceModule, index: int, end: int) -> bool:
    """Whether the result token at ``index`` names one value (not a group such as ``%0:2``)."""
    return not module.tokens[index].value_suffix and not module.is_punct_at(module.significant(index + 1, end), ":")


def _statement_end(module: SourceModule, index: int, end: int) -> int:
    """The first newline outside brackets after ``index`` (or ``end``)."""
    tokens = module.tokens
    while index < end and tokens[index].kind is not TokenKind.NEWLINE:
        if tokens[index].kind is TokenKind.PUNCT and tokens[index].text in OPENERS:
            index = module.closing(index)
        index += 1
    return min(index, end)


def _check_single_block(module: SourceModule, function: SurveyedFunction, survey: Survey) -> None:
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
