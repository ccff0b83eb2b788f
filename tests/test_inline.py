"""Inlining torch-mlir's output into a builder, checked with FileCheck and MLIR's verifier."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from filecheck_util import run_filecheck

from helion_mlir.errors import MLIRSyntaxError
from helion_mlir.inliner.builder import MLIRBuilder
from helion_mlir.inliner.lexer import TokenKind, tokenize
from helion_mlir.inliner.rewrite import inline_torch_mlir_output
from helion_mlir.mlir_context import mlir_session
from helion_mlir.verify import parse_module, verify_module_text

DATA = Path(__file__).parent / "data"


def wrap(
    source: str,
    arg_types: Sequence[str],
    result_types: Sequence[str],
    *,
    copies: int = 1,
    names: Sequence[str] | None = None,
    **kwargs: str,
) -> tuple[str, list[list[str]], MLIRBuilder]:
    """Inline ``source`` ``copies`` times into ``@wrapper`` and return the rendered module.

    The wrapper returns the results of the last copy; the render is verified.
    """
    builder = MLIRBuilder()
    names = list(names or [f"%p{i}" for i in range(len(arg_types))])
    for name in names:
        builder.reserve(name)
    params = ", ".join(f"{n}: {t}" for n, t in zip(names, arg_types))
    results: list[list[str]] = []
    with builder.block(f"func.func @wrapper({params}) -> ({', '.join(result_types)}) {{"):
        for _ in range(copies):
            results.append(inline_torch_mlir_output(source, names, builder, **kwargs))
        returned = results[-1]
        builder.emit(f"return {', '.join(returned)} : {', '.join(result_types)}" if returned else "return")
    text = builder.render()
    verify_module_text(text)
    return text, results, builder


def value_tokens(text: str) -> list[str]:
    return [t.text for t in tokenize(text) if t.kind is TokenKind.VALUE_ID]


# --------------------------------------------------------------------- real torch-mlir output
def test_linalg_amax_from_torch_mlir() -> None:
    text, (results,), _ = wrap((DATA / "linalg_amax.mlir").read_text(), ["tensor<4x8xf32>"], ["tensor<4x1xf32>"])
    run_filecheck(
        text,
        """
        // CHECK-NOT: #map
        // CHECK-LABEL: func.func @wrapper(%p0: tensor<4x8xf32>)
        // CHECK-NEXT:    %[[C0:[A-Za-z0-9_.$-]+]] = arith.constant 0 : i64 loc(unknown)
        // CHECK-NEXT:    %[[CST:[A-Za-z0-9_.$-]+]] = arith.constant 0xFF800000 : f32 loc(unknown)
        // CHECK-NEXT:    %[[E0:[A-Za-z0-9_.$-]+]] = tensor.empty() : tensor<4xi64>
        // CHECK-NEXT:    %[[F0:[A-Za-z0-9_.$-]+]] = linalg.fill ins(%[[C0]] : i64) outs(%[[E0]] : tensor<4xi64>)
        // CHECK-NEXT:    %[[E1:[A-Za-z0-9_.$-]+]] = tensor.empty() : tensor<4xf32>
        // CHECK-NEXT:    %[[F1:[A-Za-z0-9_.$-]+]] = linalg.fill ins(%[[CST]] : f32) outs(%[[E1]] : tensor<4xf32>)
        // CHECK-NEXT:    %[[G:[A-Za-z0-9_.$-]+]]:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%p0 : tensor<4x8xf32>) outs(%[[F1]], %[[F0]] : tensor<4xf32>, tensor<4xi64>) {
        // CHECK-NEXT:    ^[[BB:[A-Za-z0-9_.$-]+]](%[[IN:[A-Za-z0-9_.$-]+]]: f32 loc(unknown), %[[OUT:[A-Za-z0-9_.$-]+]]: f32 loc(unknown), %[[OUT0:[A-Za-z0-9_.$-]+]]: i64 loc(unknown)):
        // CHECK-NEXT:      %[[IDX:[A-Za-z0-9_.$-]+]] = linalg.index 1 : index
        // CHECK-NEXT:      %[[CAST:[A-Za-z0-9_.$-]+]] = arith.index_cast %[[IDX]] : index to i64
        // CHECK-NEXT:      %[[MAX:[A-Za-z0-9_.$-]+]] = arith.maximumf %[[IN]], %[[OUT]] : f32
        // CHECK-NEXT:      %[[CMP:[A-Za-z0-9_.$-]+]] = arith.cmpf ogt, %[[IN]], %[[OUT]] : f32
        // CHECK-NEXT:      %[[SEL:[A-Za-z0-9_.$-]+]] = arith.select %[[CMP]], %[[CAST]], %[[OUT0]] : i64
        // CHECK-NEXT:      linalg.yield %[[MAX]], %[[SEL]] : f32, i64 loc(unknown)
        // CHECK-NEXT:    } -> (tensor<4xf32>, tensor<4xi64>) loc(unknown)
        // CHECK-NEXT:    %[[EXP:[A-Za-z0-9_.$-]+]] = tensor.expand_shape %[[G]]#0 {{\\[\\[}}0, 1]] output_shape [4, 1]
        // CHECK-NEXT:    return %[[EXP]] : tensor<4x1xf32>
        // CHECK-NOT: %arg
        """,
    )
    assert results[0].startswith("%expanded")


def test_multi_result_function_returns_group_uses() -> None:
    text, (results,), _ = wrap(
        (DATA / "linalg_max_dim.mlir").read_text(), ["tensor<4x8xf32>"], ["tensor<4xf32>", "tensor<4xi64>"]
    )
    generic = next(line for line in text.splitlines() if "linalg.generic" in line)
    base = generic.split(":2 =", 1)[0].strip()
    assert results == [f"{base}#0", f"{base}#1"]
    run_filecheck(text, f"// CHECK: return {base}#0, {base}#1 : tensor<4xf32>, tensor<4xi64>")


def test_result_list_with_several_names_from_the_torch_dialect() -> None:
    vt = "!torch.vtensor<[4,8],f32>"
    text, (results,), _ = wrap(
        (DATA / "raw_max_dim.mlir").read_text(), [vt], ["!torch.vtensor<[4],f32>", "!torch.vtensor<[4],si64>"]
    )
    assert results == ["%values0", "%indices0"]
    run_filecheck(
        text,
        """
        // CHECK: %[[ONE:int[0-9]+]] = torch.constant.int 1
        // CHECK: %[[F:false[0-9]+]] = torch.constant.bool false
        // CHECK: %values0, %indices0 = torch.aten.max.dim %p0, %[[ONE]], %[[F]] :
        // CHECK: return %values0, %indices0
        """,
    )


@pytest.mark.slow
def test_live_torch_mlir_import_of_add_and_mm() -> None:
    torch = pytest.importorskip("torch")
    from torch import fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch_mlir import passmanager
    from torch_mlir.extras.fx_importer import FxImporter

    from helion_mlir.output_type import TORCH_BACKEND_PIPELINE, OutputType

    def import_node(target: object, shapes: list[tuple[int, ...]]) -> str:
        mode = FakeTensorMode()
        graph = fx.Graph()
        placeholders = []
        for i, shape in enumerate(shapes):
            node = graph.placeholder(f"in{i}")
            with mode:
                node.meta["val"] = torch.empty(shape)
            placeholders.append(node)
        call = graph.call_function(target, tuple(placeholders))
        with mode:
            call.meta["val"] = target(*(p.meta["val"] for p in placeholders))  # type: ignore[operator]
        graph.output(call)
        with mlir_session() as (ctx, _diagnostics):
            importer = FxImporter(context=ctx)
            importer.import_stateless_graph(graph, func_name="aten_op")
            module = importer.module
            passmanager.PassManager.parse(TORCH_BACKEND_PIPELINE).run(module.operation)
            passmanager.PassManager.parse(OutputType.LINALG_ON_TENSORS.backend_pipeline).run(module.operation)
            return module.operation.get_asm(enable_debug_info=True)

    add = import_node(torch.ops.aten.add.Tensor, [(4, 8), (4, 8)])
    mm = import_node(torch.ops.aten.mm.default, [(4, 8), (8, 3)])
    assert "".join(t.text for t in tokenize(add)) == add
    builder = MLIRBuilder()
    for name in ("%a", "%b", "%w"):
        builder.reserve(name)
    with builder.block("func.func @k(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {"):
        (summed,) = inline_torch_mlir_output(add, ["%a", "%b"], builder, location='"k.py":3:4')
        (product,) = inline_torch_mlir_output(mm, [summed, "%w"], builder, location='"k.py":4:4')
        builder.emit(f"return {product} : tensor<4x3xf32>")
    text = verify_module_text(builder.render())
    run_filecheck(
        text,
        f"""
        // CHECK: {summed} = linalg.generic {{{{.*}}}} ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>)
        // CHECK: linalg.matmul ins({summed}, %w : tensor<4x8xf32>, tensor<8x3xf32>)
        // CHECK-SAME: loc("k.py":4:4)
        // CHECK: return {product}
        """,
    )


# ------------------------------------------------------------------------------ aliases
ALIASED = """\
#loc = loc(unknown)
#id = affine_map<(d0) -> (d0)>
#map = #id
#map1 = affine_map<(d0) -> ()>
!t = tensor<4xf32>
!s = !t
module attributes {torch.debug_module_name = "M"} {
  func.func @aten_op(%arg0: !s loc(unknown), %arg1: tensor<f32>) -> tensor<f32> attributes {note = "#map !t"} {
    %0 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["reduction"], tag = #id} ins(%arg0 : !s) outs(%arg1 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %1 = arith.addf %in, %out : f32 loc(#loc2)
      linalg.yield %1 : f32 loc(#loc)
    } -> tensor<f32> loc(#loc3)
    return %0 : tensor<f32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc1 = loc("model.py":7:9)
#loc2 = loc(callsite(#loc1 at "lib.py":1:2))
#loc3 = loc(fused<#id>[#loc1, #loc2])
"""


def test_aliases_are_expanded_including_aliases_of_aliases() -> None:
    text, _, _ = wrap(ALIASED, ["tensor<4xf32>", "tensor<f32>"], ["tensor<f32>"])
    run_filecheck(
        text,
        """
        // CHECK-NOT: {{^[#!]}}
        // CHECK: linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"], tag = affine_map<(d0) -> (d0)>} ins(%p0 : tensor<4xf32>) outs(%p1 : tensor<f32>) {
        // CHECK: arith.addf {{.*}} loc(callsite("model.py":7:9 at "lib.py":1:2))
        // CHECK: linalg.yield {{.*}} loc(unknown)
        // CHECK: } -> tensor<f32> loc(fused<affine_map<(d0) -> (d0)>>["model.py":7:9, callsite("model.py":7:9 at "lib.py":1:2)])
        """,
    )
    assert not [t.text for t in tokenize(text) if t.kind in (TokenKind.HASH_ID, TokenKind.BANG_ID)]


def test_location_alias_used_as_an_attribute_keeps_its_loc_wrapper() -> None:
    source = """\
#loc1 = loc("a.py":1:2)
module {
  func.func @f(%arg0: f32) -> f32 {
    %0 = arith.addf %arg0, %arg0 {where = #loc1} : f32 loc(#loc1)
    return %0 : f32
  }
}
"""
    text, _, _ = wrap(source, ["f32"], ["f32"])
    run_filecheck(text, '// CHECK: arith.addf %p0, %p0 {where = loc("a.py":1:2)} : f32 loc("a.py":1:2)')


def test_dialect_attributes_and_types_are_not_aliases() -> None:
    source = """\
module {
  func.func @f(%arg0: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
    %0 = torch.aten.neg %arg0 : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
    return %0 : !torch.vtensor<[4],f32>
  }
}
"""
    vt = "!torch.vtensor<[4],f32>"
    text, _, _ = wrap(source, [vt], [vt])
    run_filecheck(text, f"// CHECK: torch.aten.neg %p0 : {vt} -> {vt}")


# -------------------------------------------------------------------- regions and blocks
NESTED = """\
#map = affine_map<(d0) -> (d0)>
module {
  func.func @f(%arg0: tensor<4xf32>, %arg1: f32) -> (f32, tensor<4xf32>) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    %0:2 = scf.for %arg2 = %c0 to %c4 step %c1 iter_args(%arg3 = %arg1, %arg4 = %arg0) -> (f32, tensor<4xf32>) {
      %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg4 : tensor<4xf32>) outs(%arg4 : tensor<4xf32>) {
      ^bb0(%in: f32, %out: f32):
        %2 = arith.addf %in, %arg3 : f32
        linalg.yield %2 : f32
      } -> tensor<4xf32>
      %3 = scf.for %arg5 = %c0 to %c4 step %c1 iter_args(%arg6 = %arg3) -> (f32) {
        %4 = arith.mulf %arg6, %arg6 : f32
        scf.yield %4 : f32
      }
      scf.yield %3, %1 : f32, tensor<4xf32>
    }
    %5 = scf.for %arg2 = %c0 to %c4 step %c1 iter_args(%arg3 = %0#0) -> (f32) {
      %6 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%0#1 : tensor<4xf32>) outs(%0#1 : tensor<4xf32>) {
      ^bb0(%in: f32, %out: f32):
        linalg.yield %in : f32
      } -> tensor<4xf32>
      scf.yield %arg3 : f32
    }
    return %5, %0#1 : f32, tensor<4xf32>
  }
}
"""


def test_nested_regions_get_fresh_block_arguments_and_sibling_reuse_is_split() -> None:
    text, (results,), builder = wrap(NESTED, ["tensor<4xf32>", "f32"], ["f32", "tensor<4xf32>"], names=["%t", "%s"])
    run_filecheck(
        text,
        """
        // CHECK: %[[R:[A-Za-z0-9_.$-]+]]:2 = scf.for %[[IV:[A-Za-z0-9_.$-]+]] = %[[C0:[A-Za-z0-9_.$-]+]] to %[[C4:[A-Za-z0-9_.$-]+]] step %[[C1:[A-Za-z0-9_.$-]+]] iter_args(%[[ACC:[A-Za-z0-9_.$-]+]] = %s, %[[T:[A-Za-z0-9_.$-]+]] = %t) -> (f32, tensor<4xf32>) {
        // CHECK-NEXT: %[[G:[A-Za-z0-9_.$-]+]] = linalg.generic {{.*}} ins(%[[T]] : tensor<4xf32>) outs(%[[T]] : tensor<4xf32>) {
        // CHECK-NEXT: ^{{[A-Za-z0-9_.$-]+}}(%[[IN:[A-Za-z0-9_.$-]+]]: f32, %{{[A-Za-z0-9_.$-]+}}: f32):
        // CHECK-NEXT: %[[SUM:[A-Za-z0-9_.$-]+]] = arith.addf %[[IN]], %[[ACC]] : f32
        // CHECK-NEXT: linalg.yield %[[SUM]] : f32
        // CHECK: scf.for %{{[A-Za-z0-9_.$-]+}} = %[[C0]] to %[[C4]] step %[[C1]] iter_args(%[[INNER:[A-Za-z0-9_.$-]+]] = %[[ACC]]) -> (f32) {
        // CHECK-NEXT: arith.mulf %[[INNER]], %[[INNER]] : f32
        // CHECK: scf.yield %{{[A-Za-z0-9_.$-]+}}, %[[G]] : f32, tensor<4xf32>
        // CHECK: %[[R2:[A-Za-z0-9_.$-]+]] = scf.for %[[IV2:[A-Za-z0-9_.$-]+]] = %[[C0]] to %[[C4]] step %[[C1]] iter_args(%[[ACC2:[A-Za-z0-9_.$-]+]] = %[[R]]#0) -> (f32) {
        // CHECK-NEXT: linalg.generic {{.*}} ins(%[[R]]#1 : tensor<4xf32>) outs(%[[R]]#1 : tensor<4xf32>) {
        // CHECK: scf.yield %[[ACC2]] : f32
        // CHECK: return %[[R2]], %[[R]]#1 : f32, tensor<4xf32>
        """,
    )
    # %arg2, %arg3, %in and %out are each defined twice in sibling regions of the source;
    # every definition gets its own name.
    lines = [line.strip() for line in text.splitlines()]
    loop_ivs = [line.split("scf.for ", 1)[1].split(" =", 1)[0] for line in lines if "scf.for" in line]
    block_args = [line.split("(", 1)[1].split(":", 1)[0] for line in lines if line.startswith("^")]
    assert len(loop_ivs) == 3 and len(set(loop_ivs)) == 3
    assert len(block_args) == 2 and len(set(block_args)) == 2
    assert results[1].endswith("#1")
    assert not any(v.startswith("%arg") for v in value_tokens(text))


MULTI_BLOCK_REGION = """\
module {
  func.func @f(%arg0: i1, %arg1: f32) -> f32 {
    %0 = scf.execute_region -> f32 {
      cf.cond_br %arg0, ^bb2(%arg1 : f32), ^bb1
    ^bb1:  // pred: ^bb0
      %1 = arith.addf %arg1, %arg1 : f32
      cf.br ^bb2(%1 : f32)
    ^bb2(%2: f32):  // 2 preds: ^bb0, ^bb1
      scf.yield %2 : f32
    }
    return %0 : f32
  }
}
"""


def test_blocks_of_nested_regions_are_relabelled_including_forward_references() -> None:
    builder_names = ["%c", "%x"]
    text, _, builder = wrap(MULTI_BLOCK_REGION, ["i1", "f32"], ["f32"], names=builder_names)
    run_filecheck(
        text,
        """
        // CHECK: scf.execute_region -> f32 {
        // CHECK-NEXT: cf.cond_br %c, ^[[JOIN:[A-Za-z0-9_.$-]+]](%x : f32), ^[[OTHER:[A-Za-z0-9_.$-]+]]{{$}}
        // CHECK-NEXT: ^[[OTHER]]:{{$}}
        // CHECK-NEXT: %[[S:[A-Za-z0-9_.$-]+]] = arith.addf %x, %x : f32
        // CHECK-NEXT: cf.br ^[[JOIN]](%[[S]] : f32)
        // CHECK-NEXT: ^[[JOIN]](%[[V:[A-Za-z0-9_.$-]+]]: f32):
        // CHECK-NEXT: scf.yield %[[V]] : f32
        """,
    )
    assert "//" not in text  # comments from the source are dropped


def test_several_inlines_into_one_builder_never_reuse_a_name() -> None:
    text, results, builder = wrap(NESTED, ["tensor<4xf32>", "f32"], ["f32", "tensor<4xf32>"], copies=3)
    run_filecheck(
        text,
        """
        // CHECK-COUNT-3: %{{[A-Za-z0-9_.$-]+}}:2 = scf.for %{{[A-Za-z0-9_.$-]+}} = {{.*}} iter_args(%{{[A-Za-z0-9_.$-]+}} = %p1, %{{[A-Za-z0-9_.$-]+}} = %p0)
        // CHECK-NOT: %arg
        // CHECK: return
        """,
    )
    assert len({tuple(r) for r in results}) == 3
    first_lines = [line for line in text.splitlines() if "scf.for" in line and ":2 =" in line]
    assert len(first_lines) == 3
    defined = [line.split("=", 1)[0].strip() for line in text.splitlines() if " = " in line and line.strip().startswith("%")]
    assert len(defined) == len(set(defined))


def test_string_attributes_with_sigils_are_left_alone() -> None:
    source = r"""
module {
  func.func @f(%arg0: f32) -> f32 {
    %0 = arith.addf %arg0, %arg0 {note = "%arg0 %0 #map ^bb0 {} \"}\" loc(#loc) {-# #-}"} : f32
    %1 = "arith.mulf"(%0, %arg0) <{fastmath = #arith.fastmath<fast>}> {n = "%1"} : (f32, f32) -> f32
    "func.return"(%1) : (f32) -> ()
  }
}
"""
    text, (results,), _ = wrap(source, ["f32"], ["f32"])
    run_filecheck(
        text,
        r"""
        // CHECK: %[[A:[A-Za-z0-9_.$-]+]] = arith.addf %p0, %p0 {note = "%arg0 %0 #map ^bb0 {} \"}\" loc(#loc) {-# #-}"} : f32
        // CHECK-NEXT: %[[B:[A-Za-z0-9_.$-]+]] = "arith.mulf"(%[[A]], %p0) <{fastmath = #arith.fastmath<fast>}> {n = "%1"} : (f32, f32) -> f32
        // CHECK-NEXT: return %[[B]] : f32
        """,
    )


def test_operands_may_be_results_of_multi_result_ops() -> None:
    source = """\
module {
  func.func @f(%arg0: f32, %arg1: f32) -> f32 {
    %0 = arith.addf %arg0, %arg1 : f32
    return %0 : f32
  }
}
"""
    builder = MLIRBuilder()
    builder.reserve("%c")
    with builder.block("func.func @k(%c: i1) -> f32 {"):
        pair = builder.fresh("pair")
        builder.emit(f"{pair}:2 = scf.if %c -> (f32, f32) {{")
        builder.emit("  %one = arith.constant 1.0 : f32\n  scf.yield %one, %one : f32, f32\n} else {")
        builder.emit("  %two = arith.constant 2.0 : f32\n  scf.yield %two, %two : f32, f32\n}")
        builder.reserve("%one")
        builder.reserve("%two")
        (total,) = inline_torch_mlir_output(source, [f"{pair}#0", f"{pair}#1"], builder)
        builder.emit(f"return {total} : f32")
    text = verify_module_text(builder.render())
    run_filecheck(text, f"// CHECK: {total} = arith.addf {pair}#0, {pair}#1 : f32")


def test_identity_function_returns_its_operand() -> None:
    source = "func.func @f(%arg0: f32) -> f32 {\n  return %arg0 : f32\n}\n"
    builder = MLIRBuilder()
    assert inline_torch_mlir_output(source, ["%x"], builder) == ["%x"]
    assert builder.render() == "module {\n}\n"


def test_function_without_results_returns_nothing() -> None:
    source = "module {\n  func.func @f(%arg0: f32) {\n    %0 = arith.addf %arg0, %arg0 : f32\n    return\n  }\n}\n"
    builder = MLIRBuilder()
    assert inline_torch_mlir_output(source, ["%x"], builder) == []
    run_filecheck(builder.render(), "// CHECK: %{{[A-Za-z0-9_.$-]+}} = arith.addf %x, %x : f32\n// CHECK-NOT: return")


def test_function_printed_in_generic_form_inlines_like_its_custom_form() -> None:
    # Real torch-mlir tosa output printed in generic form (the form that reads the same in
    # MLIR releases whose TOSA custom syntax differs), with a declaration beside it.
    source = (
        '#loc = loc("k.py":3:4)\n'
        '"builtin.module"() ({\n'
        '  "func.func"() <{function_type = (tensor<8x100xf32>) -> tensor<8x1xf32>, sym_name = "decl", '
        'sym_visibility = "private"}> ({\n  }) : () -> () loc(#loc)\n'
        '  "func.func"() <{function_type = (tensor<8x100xf32>) -> tensor<8x1xf32>, sym_name = "sum"}> ({\n'
        '  ^bb0(%arg0: tensor<8x100xf32> loc(#loc)):\n'
        '    %0 = "tosa.reduce_sum"(%arg0) <{axis = 1 : i32}> : (tensor<8x100xf32>) -> tensor<8x1xf32> loc(#loc)\n'
        '    %1 = "tosa.exp"(%0) : (tensor<8x1xf32>) -> tensor<8x1xf32> loc(#loc)\n'
        '    "func.return"(%1) : (tensor<8x1xf32>) -> () loc(#loc)\n'
        '  }) : () -> () loc(#loc)\n'
        '}) : () -> () loc(#loc)\n'
    )
    text, (_, results), _ = wrap(source, ["tensor<8x100xf32>"], ["tensor<8x1xf32>"], copies=2, func_name="sum")
    run_filecheck(text, """
        // CHECK:      %[[S:[A-Za-z0-9_]+]] = "tosa.reduce_sum"(%p0) <{axis = 1 : i32}> : (tensor<8x100xf32>) -> tensor<8x1xf32> loc("k.py":3:4)
        // CHECK-NEXT: %[[E:[A-Za-z0-9_]+]] = "tosa.exp"(%[[S]])
        // CHECK-NEXT: %[[S2:[A-Za-z0-9_]+]] = "tosa.reduce_sum"(%p0)
        // CHECK-NEXT: %[[E2:[A-Za-z0-9_]+]] = "tosa.exp"(%[[S2]])
        // CHECK-NEXT: return %[[E2]] : tensor<8x1xf32>
        // CHECK-NOT:  func.return
    """)
    assert results == [value_tokens(text)[-1]]  # the second copy's result is returned
    with pytest.raises(MLIRSyntaxError, match="no function @decl with a body"):
        inline_torch_mlir_output(source, ["%p0"], MLIRBuilder(), func_name="decl")
    no_arguments = (
        '"builtin.module"() ({\n  "func.func"() <{function_type = () -> tensor<1xi8>, sym_name = "zero"}> ({\n'
        '    %0 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>\n'
        '    "func.return"(%0) : (tensor<1xi8>) -> ()\n  }) : () -> ()\n}) : () -> ()\n'
    )
    text, (results,), _ = wrap(no_arguments, [], ["tensor<1xi8>"])
    assert f'{results[0]} = "tosa.const"() <{{values = dense<0> : tensor<1xi8>}}>' in text


# ----------------------------------------------------------------- resources, locations
def test_dense_resource_blobs_move_into_the_render() -> None:
    source = (DATA / "linalg_mm_add_resource.mlir").read_text()
    other_blob = source.replace("0000803F", "0000C03F")
    builder = MLIRBuilder()
    builder.reserve("%x")
    with builder.block("func.func @k(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {"):
        (a,) = inline_torch_mlir_output(source, ["%x"], builder, func_name="main")
        (b,) = inline_torch_mlir_output(source, ["%x"], builder)
        (c,) = inline_torch_mlir_output(other_blob, ["%x"], builder)
        builder.emit(f"return {a}, {b}, {c} : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>")
    text = builder.render()
    key = "torch_tensor_4_4_torch.float32"
    assert list(builder.resources["builtin"]) == [key, f"{key}_1"]
    run_filecheck(
        text,
        f"""
        // CHECK: arith.constant dense_resource<{key}> : tensor<4x4xf32>
        // CHECK: arith.constant dense_resource<{key}> : tensor<4x4xf32>
        // CHECK: arith.constant dense_resource<{key}_1> : tensor<4x4xf32>
        // CHECK: {{-#
        // CHECK-NEXT: dialect_resources: {{
        // CHECK-NEXT: builtin: {{
        // CHECK-NEXT: {key}: "0x04000000000000000000803F0000004
        // CHECK-NEXT: {key}_1: "0x04000000000000000000C03F0000004
        // CHECK: #-}}
        """,
    )
    with mlir_session():
        module = parse_module(text)
        printed = module.operation.get_asm()
    assert "0000C03F" in printed and "0000803F" in printed


def test_location_replaces_every_location_in_the_body() -> None:
    text, _, _ = wrap(ALIASED, ["tensor<4xf32>", "tensor<f32>"], ["tensor<f32>"], location='"kernel.py":12:8')
    body = [line for line in text.splitlines() if "loc(" in line]
    assert body and all(line.count("loc(") == 1 for line in body)
    assert all('loc("kernel.py":12:8)' in line for line in body)
    run_filecheck(text, '// CHECK: linalg.yield {{.*}} : f32 loc("kernel.py":12:8)\n// CHECK-NOT: model.py')


def test_location_with_a_builder_alias() -> None:
    builder = MLIRBuilder()
    builder.add_alias("#kloc", 'loc("kernel.py":3:1)')
    source = "func.func @f(%arg0: f32) -> f32 {\n  %0 = math.exp %arg0 : f32 loc(unknown)\n  return %0 : f32\n}\n"
    inline_torch_mlir_output(source, ["%x"], builder, location="#kloc")
    assert "math.exp %x : f32 loc(#kloc)" in builder.render()
    with pytest.raises(MLIRSyntaxError, match="does not define"):
        inline_torch_mlir_output(source, ["%x"], builder, location="#nope")


@pytest.mark.parametrize("location", ["", '"a.py":1:2)', "loc(unknown", '"a"\n:1:2', "%x", "callsite(#a at #b"])
def test_malformed_locations_are_rejected(location: str) -> None:
    source = "func.func @f() {\n  return\n}\n"
    with pytest.raises(MLIRSyntaxError):
        inline_torch_mlir_output(source, [], MLIRBuilder(), location=location)


# ---------------------------------------------------------------- selecting a function
TWO_FUNCTIONS = """\
module {
  func.func private @decl(f32) -> f32
  func.func @first(%arg0: f32) -> f32 {
    %0 = func.call @decl(%arg0) : (f32) -> f32
    return %0 : f32
  }
  func.func @"second fn"(%a: f32, %b: f32) -> f32 {
    %0 = arith.subf %a, %b : f32
    return %0 : f32
  }
}
"""


def test_func_name_selects_a_function_and_declarations_are_skipped() -> None:
    builder = MLIRBuilder()
    (diff,) = inline_torch_mlir_output(TWO_FUNCTIONS, ["%x", "%y"], builder, func_name="second fn")
    assert f"{diff} = arith.subf %x, %y : f32" in builder.render()
    with pytest.raises(MLIRSyntaxError, match=r"2 functions with a body \(@first, @second fn\)"):
        inline_torch_mlir_output(TWO_FUNCTIONS, ["%x"], MLIRBuilder())
    with pytest.raises(MLIRSyntaxError, match="no function @decl with a body"):
        inline_torch_mlir_output(TWO_FUNCTIONS, ["%x"], MLIRBuilder(), func_name="decl")


def test_function_with_attributes_and_result_attributes() -> None:
    source = (
        "func.func @f(%arg0: f32 {torch.a = 1}) -> (f32 {r = 2}) attributes {llvm.emit_c_interface, n = {x = 1}} {\n"
        "  return %arg0 : f32\n}\n"
    )
    assert inline_torch_mlir_output(source, ["%x"], MLIRBuilder()) == ["%x"]


# -------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("source", "operands", "message"),
    [
        (
            "func.func @f(%arg0: i1) {\n  cf.cond_br %arg0, ^bb1, ^bb2\n^bb1:\n  return\n^bb2:\n  return\n}\n",
            ["%c"],
            "has 3 blocks; only a single-block body can be inlined",
        ),
        ("func.func @f(%arg0: f32) {\n  return\n}\n", [], "takes 1 arguments but 0 operands"),
        ("func.func @f(%arg0: f32) {\n  return\n}\n", ["%a", "%b"], "takes 1 arguments but 2 operands"),
        (
            "func.func @f(%arg0: f32) {\n  %0 = arith.addf %arg0, %arg0 {m = #nope} : f32\n  return\n}\n",
            ["%a"],
            "#nope refers to an alias the module does not define",
        ),
        (
            "!t = !u\n!u = !t\nfunc.func @f(%arg0: !t) {\n  return\n}\nfunc.func @g(%arg0: f32) {\n"
            "  %0 = arith.addf %arg0, %arg0 {t = !t} : f32\n  return\n}\n",
            ["%a"],
            "defined in terms of itself",
        ),
        ("module {\n}\n", [], "0 functions with a body"),
        ("func.func @f() {\n  %0 = arith.constant 1 : i32\n}\n", [], "has no return op"),
        (
            "func.func @f() -> f32 {\n  %0 = arith.constant 1.0 : f32\n  return %1 : f32\n}\n",
            [],
            "returns %1, which it never defines",
        ),
        (
            "func.func @f() {\n  %0 = arith.constant 1 : i32\n  %0 = arith.constant 2 : i32\n  return\n}\n",
            [],
            "%0 is defined while a value of that name is visible",
        ),
        (
            "func.func @f() {\n  %0 = scf.execute_region -> i32 {\n    cf.br ^bb2\n  ^bb1:\n    %2 = arith.addi %1, %1 : i32\n"
            "    scf.yield %2 : i32\n  ^bb2:\n    %1 = arith.constant 1 : i32\n    cf.br ^bb1\n  }\n  return\n}\n",
            [],
            "used before its definition",
        ),
        (
            "func.func @f() {\n  scf.execute_region {\n    cf.br ^nowhere\n  }\n  return\n}\n",
            [],
            "^nowhere is not a block of the enclosing region",
        ),
        (
            "func.func @f() -> tensor<4xf32> {\n  %0 = arith.constant dense_resource<w> : tensor<4xf32>\n"
            "  return %0 : tensor<4xf32>\n}\n",
            [],
            r"dense_resource<w> in @f has no blob",
        ),
        ("func.func @f(%arg0: f32, f32) {\n  return\n}\n", ["%a", "%b"], "argument 1 of @f has no name"),
        ("func.func @f() {\n  return\n  %0 = arith.constant 1 : i32\n}\n", [], "continues after its return"),
    ],
)
def test_errors(source: str, operands: list[str], message: str) -> None:
    builder = MLIRBuilder()
    with pytest.raises(MLIRSyntaxError, match=message.replace("^", "\\^")):
        inline_torch_mlir_output(source, operands, builder, func_name="g" if "@g" in source else None)
    assert builder.render() == "module {\n}\n"  # nothing was emitted


@pytest.mark.parametrize("operand", ["x", "%x:2", "%x %y", "%", '"%x"', "%x#"])
def test_operands_must_be_ssa_values(operand: str) -> None:
    with pytest.raises(MLIRSyntaxError, match="is not an SSA value"):
        inline_torch_mlir_output("func.func @f(%arg0: f32) {\n  return\n}\n", [operand], MLIRBuilder())


def test_lexer_errors_surface_with_the_offset() -> None:
    source = 'func.func @f() {\n  %0 = arith.constant 1 : i32 {n = "oops}\n  return\n}\n'
    with pytest.raises(MLIRSyntaxError, match="unterminated string") as err:
        inline_torch_mlir_output(source, [], MLIRBuilder())
    assert err.value.offset == source.index('"oops')


def test_inlining_is_deterministic() -> None:
    source = (DATA / "linalg_amax.mlir").read_text()
    texts = {wrap(source, ["tensor<4x8xf32>"], ["tensor<4x1xf32>"], copies=2)[0] for _ in range(3)}
    assert len(texts) == 1


def test_results_are_in_return_order() -> None:
    source = (
        "func.func @f(%arg0: f32, %arg1: f32) -> (f32, f32, f32) {\n"
        "  %0 = arith.addf %arg0, %arg1 : f32\n  %1 = arith.mulf %arg0, %arg1 : f32\n"
        "  return %1, %arg1, %0 : f32, f32, f32\n}\n"
    )
    builder = MLIRBuilder()
    results = inline_torch_mlir_output(source, ["%a", "%b"], builder)
    lines = builder.render().splitlines()
    added = next(line for line in lines if "addf" in line).split()[0]
    multiplied = next(line for line in lines if "mulf" in line).split()[0]
    assert results == [multiplied, "%b", added]
    assert added != multiplied


def test_result_groups_written_apart_and_crlf_line_endings() -> None:
    source = (
        "func.func @f(%arg0: i1, %arg1: f32) -> f32 {\r\n"
        "  %0 : 2 = scf.if %arg0 -> (f32, f32) {\r\n"
        "    scf.yield %arg1, %arg1 : f32, f32\r\n"
        "  } else {\r\n"
        "    scf.yield %arg1, %arg1 : f32, f32\r\n"
        "  }\r\n"
        "  return %0 #1 : f32\r\n"
        "}\r\n"
    )
    text, (results,), _ = wrap(source, ["i1", "f32"], ["f32"])
    (group,) = [line.split(":", 1)[0].strip() for line in text.splitlines() if "scf.if" in line]
    assert results == [f"{group}#1"]
    assert "\r" not in text


def test_ops_sharing_a_line_with_the_braces() -> None:
    source = "func.func @f(%arg0: i32) -> i32 { %0 = arith.addi %arg0, %arg0 : i32 return %0 : i32 }"
    builder = MLIRBuilder()
    (result,) = inline_torch_mlir_output(source, ["%n"], builder)
    assert builder.render() == f"module {{\n  {result} = arith.addi %n, %n : i32\n}}\n"


# ------------------------------------------------------------------------- result names
def test_results_of_one_result_ops_take_the_names_the_caller_chose() -> None:
    source = (
        "func.func @f(%arg0: f32) -> (f32, f32) {\n"
        "  %0 = arith.addf %arg0, %arg0 : f32\n"
        "  %1 = arith.mulf %0, %0 : f32\n"
        "  return %1, %0 : f32, f32\n}\n"
    )
    builder = MLIRBuilder()
    builder.reserve("%x")
    wanted = [builder.fresh("prod"), builder.fresh("sum")]
    assert inline_torch_mlir_output(source, ["%x"], builder, result_names=wanted) == wanted
    run_filecheck(
        builder.render(),
        """
        // CHECK: %sum0 = arith.addf %x, %x : f32
        // CHECK: %prod0 = arith.mulf %sum0, %sum0 : f32
        """,
    )


def test_separately_named_results_of_a_multi_result_op_take_the_names_the_caller_chose() -> None:
    # ``%5, %6 = op`` names each result on its own (unlike a group ``%5:2``), so the returned
    # one can be defined under the wanted name; found by the explore profile.
    source = (
        "func.func @f(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<f32> {\n"
        "  %5, %6 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, "
        "affine_map<(d0) -> ()>], iterator_types = [\"reduction\"]} ins(%arg0 : tensor<4xf32>) "
        "outs(%arg1, %arg1 : tensor<f32>, tensor<f32>) {\n"
        "  ^bb0(%in: f32, %a: f32, %b: f32):\n"
        "    %m = arith.maximumf %in, %a : f32\n"
        "    %s = arith.addf %in, %b : f32\n"
        "    linalg.yield %m, %s : f32, f32\n"
        "  } -> (tensor<f32>, tensor<f32>)\n"
        "  return %5 : tensor<f32>\n}\n"
    )
    builder = MLIRBuilder()
    builder.reserve("%x"), builder.reserve("%init")
    wanted = [builder.fresh("max")]
    assert inline_torch_mlir_output(source, ["%x", "%init"], builder, result_names=wanted) == wanted
    run_filecheck(builder.render(), "// CHECK: %max0, %[[OTHER:[a-z0-9]+]] = linalg.generic")


def test_results_that_cannot_take_a_name_keep_their_own() -> None:
    builder = MLIRBuilder()
    builder.reserve("%x")
    wanted = [builder.fresh("max"), builder.fresh("idx")]
    returned = inline_torch_mlir_output(
        (DATA / "linalg_max_dim.mlir").read_text(), ["%x"], builder, result_names=wanted
    )
    assert all(r.split("#")[0] not in wanted for r in returned)  # members of one result group
    assert [r.split("#")[1] for r in returned] == ["0", "1"]
    twice = "func.func @f(%arg0: f32) -> (f32, f32, f32) {\n  %0 = arith.addf %arg0, %arg0 : f32\n  return %0, %0, %arg0 : f32, f32, f32\n}\n"
    wanted = [builder.fresh("a"), builder.fresh("b"), builder.fresh("c")]
    returned = inline_torch_mlir_output(twice, ["%x"], builder, result_names=wanted)
    assert returned[0] == returned[1] not in wanted and returned[2] == "%x"


@pytest.mark.parametrize(
    ("names", "message"),
    [(["%a0", "%b0"], "returns 1 values but 2 result names"), (["%unseen"], "must be a plain SSA name the builder handed out"),
     (["%a0#1"], "must be a plain SSA name")],
)
def test_result_names_are_checked(names: list[str], message: str) -> None:
    builder = MLIRBuilder()
    builder.fresh("a"), builder.fresh("b")
    source = "func.func @f(%arg0: f32) -> f32 {\n  %0 = arith.addf %arg0, %arg0 : f32\n  return %0 : f32\n}\n"
    with pytest.raises(MLIRSyntaxError, match=message):
        inline_torch_mlir_output(source, ["%x"], builder, result_names=names)
