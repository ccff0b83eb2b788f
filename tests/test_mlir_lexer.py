"""Tokens of MLIR's textual syntax: tricky token classes, exact round-trips, error offsets."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helion_mlir.errors import MLIRSyntaxError
from helion_mlir.inliner.lexer import (
    Token,
    TokenKind,
    find_closing,
    is_bare_identifier,
    is_suffix_id,
    next_significant,
    strip_locations,
    tokenize,
)

DATA = Path(__file__).parent / "data"
SAMPLES = sorted(p for p in DATA.glob("*.mlir"))


def significant(text: str) -> list[tuple[TokenKind, str]]:
    return [(t.kind, t.text) for t in tokenize(text) if not t.is_trivia]


def test_samples_are_checked_in() -> None:
    assert len(SAMPLES) >= 4


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_torch_mlir_output_round_trips_exactly(path: Path) -> None:
    text = path.read_text()
    tokens = tokenize(text)
    assert "".join(t.text for t in tokens) == text
    # Offsets are contiguous: each token starts where the previous one ended.
    assert [t.offset for t in tokens] == [0] + [t.end for t in tokens[:-1]]
    assert all(text[t.offset : t.end] == t.text for t in tokens)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%0", [(TokenKind.VALUE_ID, "%0")]),
        ("%in_0", [(TokenKind.VALUE_ID, "%in_0")]),
        ("%float1.000000e00", [(TokenKind.VALUE_ID, "%float1.000000e00")]),
        ("%a-b$c", [(TokenKind.VALUE_ID, "%a-b$c")]),
        # A numeric name stops at the first non-digit, as in MLIR.
        ("%0x", [(TokenKind.VALUE_ID, "%0"), (TokenKind.BARE_ID, "x")]),
        ("%4:2 =", [(TokenKind.VALUE_ID, "%4:2"), (TokenKind.PUNCT, "=")]),
        ("%4#1,", [(TokenKind.VALUE_ID, "%4#1"), (TokenKind.PUNCT, ",")]),
        # A colon followed by a type is not a result group.
        ("%in: f32", [(TokenKind.VALUE_ID, "%in"), (TokenKind.PUNCT, ":"), (TokenKind.BARE_ID, "f32")]),
        ("%x:f32", [(TokenKind.VALUE_ID, "%x"), (TokenKind.PUNCT, ":"), (TokenKind.BARE_ID, "f32")]),
        ("^bb0(", [(TokenKind.CARET_ID, "^bb0"), (TokenKind.PUNCT, "(")]),
        ("#map1", [(TokenKind.HASH_ID, "#map1")]),
        ("#loc3)", [(TokenKind.HASH_ID, "#loc3"), (TokenKind.PUNCT, ")")]),
        ("!torch.vtensor", [(TokenKind.BANG_ID, "!torch.vtensor")]),
        ("!alias", [(TokenKind.BANG_ID, "!alias")]),
        ("@sym", [(TokenKind.AT_ID, "@sym")]),
        ('@"a \\" b"', [(TokenKind.AT_ID, '@"a \\" b"')]),
        ("0xFF800000", [(TokenKind.INTEGER, "0xFF800000")]),
        ("42", [(TokenKind.INTEGER, "42")]),
        ("0.000000e+00", [(TokenKind.FLOAT, "0.000000e+00")]),
        ("1.5E-3", [(TokenKind.FLOAT, "1.5E-3")]),
        ("-1.0", [(TokenKind.PUNCT, "-"), (TokenKind.FLOAT, "1.0")]),
        ("linalg.generic", [(TokenKind.BARE_ID, "linalg.generic")]),
        ("4x8xf32", [(TokenKind.INTEGER, "4"), (TokenKind.BARE_ID, "x8xf32")]),
        ("?x4xf32", [(TokenKind.PUNCT, "?"), (TokenKind.BARE_ID, "x4xf32")]),
        ("->...", [(TokenKind.PUNCT, "->"), (TokenKind.PUNCT, "...")]),
        ("{-# #-}", [(TokenKind.METADATA_BEGIN, "{-#"), (TokenKind.METADATA_END, "#-}")]),
    ],
)
def test_token_classes(text: str, expected: list[tuple[TokenKind, str]]) -> None:
    assert significant(text) == expected


def test_string_literal_swallows_sigils_braces_and_escaped_quotes() -> None:
    text = r'{note = "%x #map ^bb0 {} \"q\" \\ // loc(#loc) {-#"} // real comment'
    kinds = significant(text)
    assert kinds == [
        (TokenKind.PUNCT, "{"),
        (TokenKind.BARE_ID, "note"),
        (TokenKind.PUNCT, "="),
        (TokenKind.STRING, r'"%x #map ^bb0 {} \"q\" \\ // loc(#loc) {-#"'),
        (TokenKind.PUNCT, "}"),
    ]
    assert tokenize(text)[-1] == Token(TokenKind.COMMENT, "// real comment", text.index("// real"))


def test_string_ending_in_escaped_backslash() -> None:
    assert significant(r'"a\\" b') == [(TokenKind.STRING, r'"a\\"'), (TokenKind.BARE_ID, "b")]


def test_comment_stops_before_newline() -> None:
    tokens = tokenize("a // c\nb")
    assert [(t.kind, t.text) for t in tokens] == [
        (TokenKind.BARE_ID, "a"),
        (TokenKind.WHITESPACE, " "),
        (TokenKind.COMMENT, "// c"),
        (TokenKind.NEWLINE, "\n"),
        (TokenKind.BARE_ID, "b"),
    ]


def test_crlf_line_endings_round_trip() -> None:
    text = "%0 = arith.constant 1 : i32\r\nreturn\r\n"
    tokens = tokenize(text)
    assert "".join(t.text for t in tokens) == text
    assert sum(t.kind is TokenKind.NEWLINE for t in tokens) == 2


def test_value_name_and_suffix() -> None:
    group, use, plain, dotted = (tokenize(s)[0] for s in ("%4:2", "%4#1", "%x", "%a.b"))
    assert (group.value_name, group.value_suffix) == ("%4", ":2")
    assert (use.value_name, use.value_suffix) == ("%4", "#1")
    assert (plain.value_name, plain.value_suffix) == ("%x", "")
    assert (dotted.value_name, dotted.value_suffix) == ("%a.b", "")
    assert tokenize("#map")[0].value_suffix == ""


def test_affine_map_arrow_does_not_close_the_angle_bracket() -> None:
    text = "#map = affine_map<(d0, d1) -> (d0 + d1 * 2, d1 floordiv 4)> next"
    tokens = tokenize(text)
    open_index = next(i for i, t in enumerate(tokens) if t.is_punct("<"))
    close = find_closing(tokens, open_index, source=text)
    assert tokens[close].offset == text.index("> next")


def test_affine_set_greater_equal_inside_parentheses_is_not_a_closer() -> None:
    text = "affine_set<(d0)[s0] : (d0 - s0 >= 0, d0 == 0)> tail"
    tokens = tokenize(text)
    close = find_closing(tokens, 1, source=text)
    assert tokens[close].offset == text.index("> tail")


def test_dialect_body_tolerates_foreign_characters_but_top_level_does_not() -> None:
    text = '!llvm.struct<"x", (i32 & $ ; `k`)> %v'
    tokens = tokenize(text)
    assert "".join(t.text for t in tokens) == text
    odd = [t.text for t in tokens if t.kind is TokenKind.BODY_CHAR]
    assert odd == ["&", "$", ";", "`", "`"]
    assert tokens[-1].kind is TokenKind.VALUE_ID
    with pytest.raises(MLIRSyntaxError) as err:
        tokenize("%a = foo & bar")
    assert err.value.offset == 9


def test_nested_dialect_bodies_find_their_extent() -> None:
    text = "#a = #foo.bar<#baz<[1, 2], {k = \">\"}, dense<[1.0, -2.5]> : tensor<2xf32>>, affine_map<(d0) -> (d0)>>\n#b = 1"
    tokens = tokenize(text)
    open_index = next(i for i, t in enumerate(tokens) if t.is_punct("<"))
    close = find_closing(tokens, open_index, source=text)
    assert tokens[close].end == text.index("\n")


def test_find_closing_metadata_block() -> None:
    text = '{-# dialect_resources: { builtin: { k: "0x04000000" } } #-}'
    tokens = tokenize(text)
    assert tokens[find_closing(tokens, 0)].kind is TokenKind.METADATA_END


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ('%0 = "abc', 5, "unterminated string"),
        ('x "abc\n"', 2, "unterminated string"),
        ('"abc\\', 0, "unterminated string"),
        ("a ` b", 2, "unexpected character"),
        ("%0 = é", 5, "unexpected character"),
        ("%: i32", 0, "expected a name"),
        ("^ bb", 0, "expected a name"),
    ],
)
def test_errors_point_at_the_offset(text: str, offset: int, message: str) -> None:
    with pytest.raises(MLIRSyntaxError, match=message) as err:
        tokenize(text)
    assert err.value.offset == offset
    assert err.value.text == text


@pytest.mark.parametrize(
    ("text", "message"),
    [("( ]", "does not match"), ("( [ )", "does not match"), ("{ (", "never closed"), ("{-# x", "never closed")],
)
def test_find_closing_rejects_unbalanced_brackets(text: str, message: str) -> None:
    with pytest.raises(MLIRSyntaxError, match=message):
        find_closing(tokenize(text), 0, source=text)


def test_strip_locations_drops_every_location_group_and_keeps_the_rest_byte_for_byte() -> None:
    located = textwrap.dedent('''\
        func.func @k(%x: f32 loc("k.py":1:1)) -> f32 {
          %0 = "test.op"() {note = "a loc(\\"s\\":1:2) in a string)"} : () -> f32 loc(callsite("f"("a.py":3:4) at fused["b.py":5:6, "c)(.py":7:8]))
          ^bb1(%in: f32 loc("k.py":2:1), %out: f32 loc(unknown)): // loc("comment":1:1) stays
          return %0 : f32 loc("k.py":9:1)
        } loc("k.py":1:1)
        ''')
    assert strip_locations(located) == textwrap.dedent('''\
        func.func @k(%x: f32) -> f32 {
          %0 = "test.op"() {note = "a loc(\\"s\\":1:2) in a string)"} : () -> f32
          ^bb1(%in: f32, %out: f32): // loc("comment":1:1) stays
          return %0 : f32
        }
        ''')
    with pytest.raises(MLIRSyntaxError, match="never closed"):
        strip_locations('%0 = arith.constant 0 : i32 loc("k.py":1:1')


def test_next_significant_skips_trivia() -> None:
    tokens = tokenize("a  // c\n  b")
    assert tokens[next_significant(tokens, 1)].text == "b"
    assert next_significant(tokens, 1, end=3) == 3


def test_identifier_predicates() -> None:
    assert is_bare_identifier("torch_tensor_4_torch.float32")
    assert not is_bare_identifier("4abc")
    assert not is_bare_identifier("a-b")
    assert is_suffix_id("0") and is_suffix_id("-x") and is_suffix_id("a$b.c")
    assert not is_suffix_id("0x") and not is_suffix_id("") and not is_suffix_id("a b")


_MLIR_CHARS = st.sampled_from(
    list("%^#!@\"\\{}()[]<>,:=-.*?+|/ \n\tax0_9$") + ["->", "{-#", "#-}", "//", "0x1F", "1.5e+3", '"s"']
)


@settings(max_examples=max(300, settings.default.max_examples))  # explore profile: more
@given(st.lists(_MLIR_CHARS, max_size=40).map("".join))
def test_any_text_either_round_trips_or_raises_with_an_offset(text: str) -> None:
    try:
        tokens = tokenize(text)
    except MLIRSyntaxError as err:
        assert err.offset is not None and 0 <= err.offset < len(text)
        return
    assert "".join(t.text for t in tokens) == text
    assert all(t.text for t in tokens)
