"""MLIRBuilder: unique names, indentation, module sections, a render that MLIR parses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helion_mlir.errors import MLIRSyntaxError
from helion_mlir.inliner.builder import MLIRBuilder, format_resource_key
from helion_mlir.inliner.lexer import TokenKind, tokenize
from helion_mlir.mlir_context import mlir_session
from helion_mlir.verify import parse_module


def test_fresh_names_are_unique_and_use_the_hint() -> None:
    b = MLIRBuilder()
    names = [b.fresh() for _ in range(3)] + [b.fresh("acc"), b.fresh("acc"), b.fresh("%cst")]
    assert names == ["%v0", "%v1", "%v2", "%acc0", "%acc1", "%cst0"]
    view = b.names
    assert view == set(names)
    b.reserve("%late")
    assert "%late" in view  # the view is live
    assert not hasattr(view, "add")


def test_fresh_skips_reserved_names_and_never_repeats() -> None:
    b = MLIRBuilder()
    b.reserve("%v0")
    b.reserve("%v2")
    assert [b.fresh() for _ in range(3)] == ["%v1", "%v3", "%v4"]


def test_hint_ending_in_digit_gets_separator_so_names_do_not_collide() -> None:
    b = MLIRBuilder()
    assert b.fresh("x1") == "%x1_0"
    assert [b.fresh("x") for _ in range(12)][-1] == "%x11"
    assert b.fresh("x1") == "%x1_1"


@pytest.mark.parametrize(
    ("hint", "expected"),
    [("", "%v0"), ("a b", "%ab0"), ("%in", "%in0"), ("7", "%v7_0"), ("7up", "%v7up0"), ("é", "%v0"), ("a.b-c$", "%a.b-c$0")],
)
def test_hints_are_sanitized_to_valid_names(hint: str, expected: str) -> None:
    name = MLIRBuilder().fresh(hint)
    assert name == expected
    (token,) = tokenize(name)
    assert token.kind is TokenKind.VALUE_ID and token.text == name


def test_reserve_rejects_taken_and_malformed_names() -> None:
    b = MLIRBuilder()
    b.reserve("%x")
    with pytest.raises(MLIRSyntaxError, match="already taken"):
        b.reserve("%x")
    taken = b.fresh()
    with pytest.raises(MLIRSyntaxError, match="already taken"):
        b.reserve(taken)
    for bad in ("x", "%", "%a b", "%0x", "%x#1", "#x"):
        with pytest.raises(MLIRSyntaxError, match="not an SSA name"):
            b.reserve(bad)


def test_block_labels_have_their_own_namespace() -> None:
    b = MLIRBuilder()
    b.reserve("^bb0")
    assert b.fresh_block() == "^bb1"
    assert b.fresh_block("exit") == "^exit0"
    assert b.is_taken("^bb0") and b.is_taken("^bb1")
    assert b.fresh("bb") == "%bb0"  # SSA names and labels do not share counters
    assert "^bb1" not in b.names
    with pytest.raises(MLIRSyntaxError, match="already taken"):
        b.reserve("^exit0")


def test_is_taken() -> None:
    b = MLIRBuilder()
    assert not b.is_taken("%v0")
    b.fresh()
    assert b.is_taken("%v0")


@settings(max_examples=max(200, settings.default.max_examples))  # explore profile: more
@given(st.lists(st.one_of(st.text(max_size=6), st.sampled_from(["v", "v1", "1", "%v", "x_0"])), max_size=40))
def test_fresh_never_repeats_for_any_hints(hints: list[str]) -> None:
    b = MLIRBuilder()
    names = [b.fresh(h) for h in hints]
    assert len(set(names)) == len(names)
    for name in names:
        (token,) = tokenize(name)
        assert token.kind is TokenKind.VALUE_ID and not token.value_suffix


def test_emit_indents_blocks_and_reindents_multiline_text() -> None:
    b = MLIRBuilder()
    with b.block("func.func @f() {"):
        b.emit("%0 = arith.constant 1 : i32")
        with b.block("scf.execute_region {", "} loc(unknown)"):
            b.emit("        op.a {\n          op.b   \n        }\n\n        op.c\n")
        b.emit("return")
    assert b.render() == (
        "module {\n"
        "  func.func @f() {\n"
        "    %0 = arith.constant 1 : i32\n"
        "    scf.execute_region {\n"
        "      op.a {\n"
        "        op.b\n"
        "      }\n"
        "\n"
        "      op.c\n"
        "    } loc(unknown)\n"
        "    return\n"
        "  }\n"
        "}\n"
    )


def test_emit_of_an_empty_string_adds_a_blank_line() -> None:
    b = MLIRBuilder()
    with b.indented():
        b.emit("")
    assert b.render() == "module {\n\n}\n"


def test_indentation_is_restored_after_an_exception() -> None:
    b = MLIRBuilder()
    with pytest.raises(RuntimeError), b.block("a {"):
        raise RuntimeError
    b.emit("b")
    assert b.render().splitlines()[-2:] == ["  b", "}"]


def test_aliases_are_idempotent_and_conflicts_raise() -> None:
    b = MLIRBuilder()
    assert b.add_alias("#map", "affine_map<(d0) -> (d0)>") == "#map"
    assert b.add_alias("#map", " affine_map<(d0) -> (d0)> ") == "#map"
    with pytest.raises(MLIRSyntaxError, match="already defined"):
        b.add_alias("#map", "affine_map<(d0) -> (0)>")
    for bad in ("map", "#a.b", "%x", "#1a", "#"):
        with pytest.raises(MLIRSyntaxError, match="not an alias name"):
            b.add_alias(bad, "i32")
    with pytest.raises(MLIRSyntaxError, match="one non-empty line"):
        b.add_alias("!t", "")
    assert dict(b.aliases) == {"#map": "affine_map<(d0) -> (d0)>"}


def test_resources_rename_only_on_a_real_clash() -> None:
    b = MLIRBuilder()
    assert b.add_resource("builtin", "w", "0x0400000001") == "w"
    assert b.add_resource("builtin", "w", "0x0400000001") == "w"
    assert b.add_resource("builtin", "w", "0x0400000002") == "w_1"
    assert b.add_resource("builtin", "w", "0x0400000002") == "w_1"
    assert b.add_resource("builtin", "w", "0x0400000003") == "w_2"
    assert b.add_resource("other", "w", "0x0400000003") == "w"
    assert {d: dict(e) for d, e in b.resources.items()} == {
        "builtin": {"w": "0x0400000001", "w_1": "0x0400000002", "w_2": "0x0400000003"},
        "other": {"w": "0x0400000003"},
    }


def test_resource_arguments_are_validated() -> None:
    b = MLIRBuilder()
    with pytest.raises(MLIRSyntaxError, match="dialect name"):
        b.add_resource("2x", "k", "0x00")
    with pytest.raises(MLIRSyntaxError, match="resource blob"):
        b.add_resource("builtin", "k", 'a"b')
    with pytest.raises(MLIRSyntaxError, match="must not be empty"):
        b.add_resource("builtin", "", "0x00")


def test_format_resource_key() -> None:
    assert format_resource_key("torch_tensor_4_torch.float32") == "torch_tensor_4_torch.float32"
    assert format_resource_key("a key") == '"a key"'


def _small_module() -> MLIRBuilder:
    b = MLIRBuilder()
    b.add_alias("#map", "affine_map<(d0) -> (d0)>")
    b.add_alias("!t", "tensor<4xf32>")
    key = b.add_resource("builtin", "weights", "0x04000000" + "0000803F" * 4)
    x = "%x"
    b.reserve(x)
    with b.block(f"func.func @f({x}: !t) -> !t {{"):
        w, empty, out = b.fresh("w"), b.fresh("empty"), b.fresh()
        b.emit(f"{w} = arith.constant dense_resource<{key}> : !t")
        b.emit(f"{empty} = tensor.empty() : !t")
        block = b.fresh_block()
        a, c, d = b.fresh("in"), b.fresh("in"), b.fresh("out")
        header = (
            f"{out} = linalg.generic {{indexing_maps = [#map, #map, #map], iterator_types = [\"parallel\"]}} "
            f"ins({x}, {w} : !t, !t) outs({empty} : !t) {{"
        )
        with b.block(header, "} -> !t"):
            b.emit(f"{block}({a}: f32, {c}: f32, {d}: f32):")
            s = b.fresh("sum")
            with b.indented():
                b.emit(f"{s} = arith.addf {a}, {c} : f32")
                b.emit(f"linalg.yield {s} : f32")
        b.emit(f"return {out} : !t")
    return b


def test_render_is_deterministic_and_parses() -> None:
    text = _small_module().render()
    assert text == _small_module().render()
    assert text.startswith("#map = affine_map<(d0) -> (d0)>\n!t = tensor<4xf32>\nmodule {\n")
    assert text.endswith(
        "{-#\n  dialect_resources: {\n    builtin: {\n"
        '      weights: "0x040000000000803F0000803F0000803F0000803F"\n'
        "    }\n  }\n#-}\n"
    )
    with mlir_session():
        module = parse_module(text, what="builder test module")
        assert "dense_resource<weights>" in str(module)


def test_render_lists_several_dialects_and_entries_with_commas() -> None:
    b = MLIRBuilder()
    b.add_resource("builtin", "a", "0x04000000")
    b.add_resource("builtin", "b c", "0x04000000")
    b.add_resource("other", "k", "0x08000000")
    tail = b.render().split("module {\n}\n", 1)[1]
    assert tail == (
        "\n{-#\n  dialect_resources: {\n"
        "    builtin: {\n"
        '      a: "0x04000000",\n'
        '      "b c": "0x04000000"\n'
        "    },\n"
        "    other: {\n"
        '      k: "0x08000000"\n'
        "    }\n"
        "  }\n#-}\n"
    )


def test_empty_builder_renders_an_empty_module_that_parses() -> None:
    text = MLIRBuilder().render()
    assert text == "module {\n}\n"
    with mlir_session():
        parse_module(text)


def test_slot_keeps_its_place_and_indentation_for_text_written_later() -> None:
    b = MLIRBuilder()
    with b.block("func.func @f(%x: f32) -> f32 {"):
        slot = b.slot()
        b.emit("return %y : f32")
    assert b.open_slots == 1
    with b.filling(slot):
        b.emit("%y = arith.addf %x, %x : f32")
    assert b.open_slots == 0
    text = b.render()
    assert "    %y = arith.addf %x, %x : f32\n    return %y : f32" in text
    with mlir_session():
        parse_module(text)


def test_slots_are_filled_once_and_must_all_be_filled() -> None:
    b = MLIRBuilder()
    slot = b.slot()
    with pytest.raises(MLIRSyntaxError, match="never filled"):
        b.render()
    with b.filling(slot):
        with pytest.raises(MLIRSyntaxError, match="one slot at a time"):
            with b.filling(slot):
                pass
        with pytest.raises(MLIRSyntaxError, match="while another slot is being filled"):
            b.slot()
    with pytest.raises(MLIRSyntaxError, match="filled once"):
        with b.filling(slot):
            pass
    assert b.render() == "module {\n}\n"
