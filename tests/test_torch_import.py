"""The per-node torch-mlir importer: coverage, calling convention, cache, batching, errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from examples_util import load_example
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch_mlir import ir

from helion_mlir.errors import NodeNormalizationError, UnsupportedNodeError
from helion_mlir.importer.node_importer import (
    ImportBatch,
    ResultSpec,
    TensorSpec,
    TorchMLIRLoweringError,
    TorchMLIRNodeImporter,
    clear_import_cache,
    import_aten_node_to_mlir,
    import_nodes,
    import_stats,
)
from helion_mlir.importer.normalize import node_inputs, normalize_helion_node
from helion_mlir.importer.op_catalog import (
    CATALOG,
    CENSUS_TARGETS,
    CaseSizes,
    iter_case_nodes,
)
from helion_mlir.mlir_context import mlir_session
from helion_mlir.output_type import OutputType
from helion_mlir.verify import parse_module

aten = torch.ops.aten

# --- kernels whose device IR provides real nodes -------------------------------------------

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "node_kernels.py")
add_kernel, softmax_kernel = KERNELS.add_kernel, KERNELS.softmax_kernel
matmul_kernel, row_max_kernel = KERNELS.matmul_kernel, KERNELS.row_max_kernel


def _nodes(kernel, *args) -> dict[str, fx.Node]:
    """call_function nodes of every device-IR graph, as '<graph id>:<name>'."""
    device_ir = kernel.bind(args).host_function.device_ir
    return {
        f"{info.graph_id}:{node.name}": node
        for info in device_ir.graphs
        for node in info.graph.nodes
        if node.op == "call_function"
    }


@pytest.fixture(scope="module")
def add_nodes() -> dict[str, fx.Node]:
    return _nodes(add_kernel, torch.randn(100, 70), torch.randn(100, 70))


@pytest.fixture(scope="module")
def softmax_nodes() -> dict[str, fx.Node]:
    return _nodes(softmax_kernel, torch.randn(100, 70))


@pytest.fixture(scope="module")
def matmul_nodes() -> dict[str, fx.Node]:
    return _nodes(matmul_kernel, torch.randn(64, 48, dtype=torch.bfloat16), torch.randn(48, 40, dtype=torch.bfloat16))


@pytest.fixture(scope="module")
def row_max_nodes() -> dict[str, fx.Node]:
    return _nodes(row_max_kernel, torch.randn(64, 32))


# --- helpers -----------------------------------------------------------------------------------

_ELEMENT_TYPES = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "i1",
    torch.float8_e4m3fn: "f8E4M3FN",
    torch.float8_e5m2: "f8E5M2",
    torch.float8_e4m3fnuz: "f8E4M3FNUZ",
    torch.float8_e5m2fnuz: "f8E5M2FNUZ",
    torch.float8_e8m0fnu: "f8E8M0FNU",
}


_RAW_ELEMENT_TYPES = _ELEMENT_TYPES | {torch.int32: "si32", torch.int64: "si64"}


def _expected_type(value, output_type: OutputType = OutputType.LINALG_ON_TENSORS) -> str:
    """The type a lowered function uses for a node value (tensor or scalar)."""
    symbolic = [isinstance(d, torch.SymInt) for d in getattr(value, "shape", ())]
    if output_type is OutputType.RAW:
        if not isinstance(value, torch.Tensor):
            return "!torch.int"
        dims = ",".join("?" if s else str(d) for s, d in zip(symbolic, value.shape))
        return f"!torch.vtensor<[{dims}],{_RAW_ELEMENT_TYPES[value.dtype]}>"
    if not isinstance(value, torch.Tensor):
        return "i64"
    dims = "".join(f"{'?' if s else d}x" for s, d in zip(symbolic, value.shape))
    return f"tensor<{dims}{_ELEMENT_TYPES[value.dtype]}>"


def _signature(text: str) -> tuple[list[str], list[str]]:
    """(argument types, result types) of the single func.func in ``text``; checks the module."""
    with mlir_session():
        module = parse_module(text)
        functions = [op for op in module.body.operations if op.operation.name == "func.func"]
        assert len(functions) == 1, text
        function_type = ir.FunctionType(ir.TypeAttr(functions[0].attributes["function_type"]).value)
        return [str(t) for t in function_type.inputs], [str(t) for t in function_type.results]


def _assert_every_op_has_a_location(text: str) -> None:
    """The text is the module printed with debug info (so each op carries ``loc(...)``):
    re-printing the parsed module with debug info, in the same (custom or generic) form,
    reproduces it exactly."""
    generic = '"builtin.module"' in text
    with mlir_session():
        module = parse_module(text)
        assert module.operation.get_asm(enable_debug_info=True, print_generic_op_form=generic) == text
        assert "loc(" not in module.operation.get_asm(enable_debug_info=False)
    assert "loc(" in text


def _torch_dialect_ops(text: str) -> list[str]:
    """Names of torch-dialect ops left in a lowered module (there should be none)."""
    with mlir_session():
        module = parse_module(text)
        names: list[str] = []
        module.operation.walk(lambda op: names.append(op.name) or ir.WalkResult.ADVANCE)
    return [name for name in names if name.split(".")[0] in {"torch", "torch_c"}]


def _result_values(node: fx.Node) -> list:
    val = node.meta["val"]
    return list(val) if isinstance(val, (tuple, list)) else [val]


def _non_literal_inputs(node: fx.Node) -> list:
    return [inp.meta["val"] for inp in node_inputs(node)]


# --- every census target, every dtype, static and symbolic sizes -------------------------------


@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
def test_every_catalogued_target_lowers_to_linalg(symbolic: bool) -> None:
    cases = list(iter_case_nodes(symbolic=symbolic))
    import_nodes([(node, None) for *_, node in cases])  # raises on the first failure
    for case_id, _case, _dtype, node in cases:
        text = import_aten_node_to_mlir(node)  # from the cache now
        arguments, results = _signature(text)
        assert arguments == [_expected_type(v) for v in _non_literal_inputs(node)], case_id
        assert results == [_expected_type(v) for v in _result_values(node)], case_id
        _assert_every_op_has_a_location(text)
        assert not _torch_dialect_ops(text), case_id


def test_catalogue_covers_every_aten_and_prims_target_of_the_census() -> None:
    assert len(CENSUS_TARGETS) == len(set(CENSUS_TARGETS)) == 60
    assert set(CENSUS_TARGETS) - {case.target_name for case in CATALOG} == set()


# --- real Helion nodes --------------------------------------------------------------------------


@pytest.mark.parametrize("output_type", list(OutputType), ids=str)
def test_helion_add_and_softmax_nodes(add_nodes, softmax_nodes, output_type) -> None:
    nodes = [n for n in [*add_nodes.values(), *softmax_nodes.values()] if str(n.target).startswith("aten.")]
    assert {str(n.target) for n in nodes} >= {
        "aten.add.Tensor",
        "aten.amax.default",
        "aten.sub.Tensor",
        "aten.exp.default",
        "aten.sum.dim_IntList",
        "aten.div.Tensor",
    }
    texts = import_nodes([(n, None) for n in nodes], output_type)
    for node, text in zip(nodes, texts):
        arguments, results = _signature(text)
        assert arguments == [_expected_type(v, output_type) for v in _non_literal_inputs(node)]
        assert results == [_expected_type(v, output_type) for v in _result_values(node)]
        assert "?" in results[0]  # tile sizes are symbolic: dynamic dimensions
        _assert_every_op_has_a_location(text)


def test_helion_matmul_nodes(matmul_nodes) -> None:
    addmm = matmul_nodes["0:acc"]
    assert addmm.target is aten.addmm.default
    text = import_aten_node_to_mlir(addmm)
    assert "linalg.matmul" in text
    assert _signature(text)[1] == ["tensor<?x?xf32>"]

    convert = next(n for n in matmul_nodes.values() if n.target is torch.ops.prims.convert_element_type.default)
    assert _signature(import_aten_node_to_mlir(convert)) == (["tensor<?x?xf32>"], ["tensor<?x?xbf16>"])

    size = next(n for n in matmul_nodes.values() if n.target is aten.sym_size.int)
    assert _signature(import_aten_node_to_mlir(size)) == (["tensor<?x?xf32>"], ["i64"])


def test_tuple_outputs(row_max_nodes) -> None:
    max_dim = row_max_nodes["0:max_1"]
    assert max_dim.target is aten.max.dim
    text = import_aten_node_to_mlir(max_dim)
    arguments, results = _signature(text)
    # The second argument is Helion's extra dependency, listed in kwargs: present, unused.
    assert arguments == ["tensor<?x?xf32>", "tensor<?xf32>"]
    assert results == ["tensor<?xf32>", "tensor<?xi64>"]


# --- full([u0, u1]) and the input convention ------------------------------------------------------


def test_full_with_symbolic_sizes(matmul_nodes) -> None:
    full = matmul_nodes["1:acc"]  # hl.zeros([tile_r, tile_c]): Helion's full
    assert [n.name for n in node_inputs(full)] == ["block_size_0", "block_size_1"]
    assert _signature(import_aten_node_to_mlir(full)) == (["i64", "i64"], ["tensor<?x?xf32>"])


def test_full_with_baked_sizes(matmul_nodes) -> None:
    full = matmul_nodes["1:acc"]
    text = import_aten_node_to_mlir(full, input_tensors=[32, 16])
    assert _signature(text) == ([], ["tensor<32x16xf32>"])
    assert "dense<0.000000e+00>" in text
    # Baking one size keeps the other a scalar argument.
    block_size_1 = node_inputs(full)[1].meta["val"]
    assert _signature(import_aten_node_to_mlir(full, input_tensors=[32, block_size_1])) == (
        ["i64"],
        ["tensor<32x?xf32>"],
    )


def test_aten_full_with_symbolic_and_baked_sizes() -> None:
    case = next(c for c in CATALOG if c.name == "aten.full.default")
    node = case.node(torch.float16, symbolic=True)
    assert _signature(import_aten_node_to_mlir(node)) == (["i64", "i64"], ["tensor<?x?xf16>"])
    assert _signature(import_aten_node_to_mlir(node, input_tensors=[4, 2])) == ([], ["tensor<4x2xf16>"])


def test_concrete_input_tensors_give_static_types(add_nodes) -> None:
    add = add_nodes["0:add"]
    text = import_aten_node_to_mlir(add, input_tensors=[torch.randn(32, 32), torch.empty(32, 1, device="meta")])
    # The result type comes from running the op on the given inputs, not from the node.
    assert _signature(text) == (["tensor<32x32xf32>", "tensor<32x1xf32>"], ["tensor<32x32xf32>"])


def test_symint_inputs_become_scalar_arguments() -> None:
    shape_env = ShapeEnv()
    size = shape_env.create_unbacked_symint()
    shape_env.pending_fresh_unbacked_symbols.clear()
    graph = fx.Graph()
    x, length = graph.placeholder("x"), graph.placeholder("length")
    node = graph.call_function(aten.expand.default, (x, [length, 8]))
    with FakeTensorMode(shape_env=shape_env):
        x.meta["val"] = torch.empty(1, 8)
        node.meta["val"] = x.meta["val"].expand(size, 8)
    length.meta["val"] = size
    assert _signature(import_aten_node_to_mlir(node)) == (["tensor<1x8xf32>", "i64"], ["tensor<?x8xf32>"])


def test_wrong_number_of_inputs_is_rejected(add_nodes) -> None:
    with pytest.raises(NodeNormalizationError, match="input_tensors has 1 entries but the node reads 2"):
        import_aten_node_to_mlir(add_nodes["0:add"], input_tensors=[torch.zeros(2)])


def test_inputs_of_unsupported_kind_are_rejected(add_nodes) -> None:
    with pytest.raises(NodeNormalizationError, match="is given as a str"):
        import_aten_node_to_mlir(add_nodes["0:add"], input_tensors=[torch.zeros(2), "two"])


# --- exact decompositions ---------------------------------------------------------------------------


def test_bmm_dtype_accumulates_in_f32() -> None:
    case = next(c for c in CATALOG if c.name == "aten.bmm.dtype")
    text = import_aten_node_to_mlir(case.node(torch.bfloat16, symbolic=False))
    assert _signature(text) == (["tensor<3x8x12xbf16>", "tensor<3x12x16xbf16>"], ["tensor<3x8x16xf32>"])
    assert "arith.extf" in text  # operands widened to f32 first ...
    matmul = next(line for line in text.splitlines() if "linalg.batch_matmul" in line)
    assert "bf16" not in matmul  # ... so products and sums are f32


def test_ops_torch_mlir_lacks_without_decomposition_are_reported() -> None:
    graph = fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.zeros(16)
    node = graph.call_function(aten.histc.default, (x,), {"bins": 4})
    node.meta["val"] = torch.zeros(4)
    with pytest.raises(UnsupportedNodeError, match="torch-mlir has no op aten.histc.default"):
        import_aten_node_to_mlir(node)


# --- output types ------------------------------------------------------------------------------------


@pytest.mark.parametrize("output_type", list(OutputType), ids=str)
def test_output_types_emit_their_dialect(add_nodes, output_type) -> None:
    text = import_aten_node_to_mlir(add_nodes["0:add"], output_type)
    _signature(text)
    marker = {
        OutputType.RAW: "torch.aten.add.Tensor",
        OutputType.LINALG_ON_TENSORS: "linalg.generic",
        OutputType.TOSA: '"tosa.add"(%arg0, %arg1)',  # generic form: portable across MLIR releases
        OutputType.STABLEHLO: "stablehlo.add",
    }[output_type]
    assert marker in text


def test_output_type_strings_are_accepted() -> None:
    assert TorchMLIRNodeImporter("linalg").output_type is OutputType.LINALG_ON_TENSORS
    with pytest.raises(ValueError, match="unknown output type"):
        TorchMLIRNodeImporter("spirv")


# --- cache ---------------------------------------------------------------------------------------------


def _case_node(name: str, dtype: torch.dtype, symbolic: bool = False, sizes: CaseSizes | None = None) -> fx.Node:
    return next(c for c in CATALOG if c.name == name).node(dtype, symbolic=symbolic, sizes=sizes)


def test_cache_hit_returns_identical_text_and_counts() -> None:
    clear_import_cache()
    first = import_aten_node_to_mlir(_case_node("aten.exp.default", torch.float32))
    assert import_stats().misses == 1 and import_stats().hits == 0
    second = import_aten_node_to_mlir(_case_node("aten.exp.default", torch.float32))  # another node
    assert second == first
    stats = import_stats()
    assert (stats.hits, stats.misses, stats.lowering_runs, stats.entries) == (1, 1, 1, 1)


def test_symbols_are_renamed_by_first_appearance() -> None:
    clear_import_cache()
    shared = CaseSizes(symbolic=True)
    import_aten_node_to_mlir(_case_node("aten.add.Tensor", torch.float32, True, shared))
    # Fresh symbols (another ShapeEnv) in the same pattern: same signature.
    import_aten_node_to_mlir(_case_node("aten.add.Tensor", torch.float32, True))
    assert (import_stats().hits, import_stats().misses) == (1, 1)


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda: _case_node("aten.exp.default", torch.float16), id="dtype"),
        pytest.param(lambda: _case_node("aten.exp.default", torch.float32, symbolic=True), id="shape"),
        pytest.param(lambda: _case_node("aten.log.default", torch.float32), id="target"),
    ],
)
def test_cache_key_tells_signatures_apart(other) -> None:
    clear_import_cache()
    base = import_aten_node_to_mlir(_case_node("aten.exp.default", torch.float32))
    assert import_aten_node_to_mlir(other()) != base
    assert (import_stats().hits, import_stats().misses) == (0, 2)


def test_cache_key_tells_literals_and_output_types_apart() -> None:
    clear_import_cache()
    floor = _case_node("aten.div.Tensor_mode[floor]", torch.float32)
    trunc = _case_node("aten.div.Tensor_mode[trunc]", torch.float32)
    texts = {
        import_aten_node_to_mlir(floor),
        import_aten_node_to_mlir(trunc),
        import_aten_node_to_mlir(floor, OutputType.TOSA),
    }
    assert len(texts) == 3
    assert (import_stats().hits, import_stats().misses) == (0, 3)
    full = _case_node("aten.full.default", torch.float32, symbolic=True)
    assert import_aten_node_to_mlir(full, input_tensors=[2, 3]) != import_aten_node_to_mlir(full, input_tensors=[3, 2])


def test_float_literals_are_keyed_by_value_and_type() -> None:
    clear_import_cache()
    case = next(c for c in CATALOG if c.name == "aten.clamp_min.default")
    node = case.node(torch.float32, symbolic=False)
    text = import_aten_node_to_mlir(node)
    node.args = (node.args[0], 2.5)
    assert import_aten_node_to_mlir(node) != text
    node.args = (node.args[0], 2)  # int 2 and float 2.0 must not share an entry
    import_aten_node_to_mlir(node)
    node.args = (node.args[0], 2.0)
    import_aten_node_to_mlir(node)
    assert (import_stats().hits, import_stats().misses) == (0, 4)


def test_concurrent_imports_agree() -> None:
    clear_import_cache()
    nodes = [_case_node("aten.tanh.default", torch.float32) for _ in range(8)]
    texts: list[str] = []
    lock = threading.Lock()

    def work(node: fx.Node) -> None:
        text = import_aten_node_to_mlir(node)
        with lock:
            texts.append(text)

    threads = [threading.Thread(target=work, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(texts) == 8 and len(set(texts)) == 1


# --- batch path -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("output_type", [OutputType.LINALG_ON_TENSORS, OutputType.STABLEHLO], ids=str)
def test_batch_matches_single_imports_with_one_pipeline_run(softmax_nodes, matmul_nodes, output_type) -> None:
    nodes = [
        n
        for n in [*softmax_nodes.values(), *matmul_nodes.values()]
        if str(n.target).startswith(("aten.", "prims."))
    ]
    nodes += [_case_node(name, torch.float32) for name in ("aten.mm.default", "aten.where.self", "aten.full.default")]
    clear_import_cache()
    batched = import_nodes([(n, None) for n in nodes], output_type)
    stats = import_stats()
    assert stats.lowering_runs == 1
    assert stats.misses == stats.entries > 5  # several distinct signatures ...
    assert stats.hits == len(nodes) - stats.misses  # ... and repeats served by the same import
    for node, text in zip(nodes, batched):
        clear_import_cache()
        assert import_aten_node_to_mlir(node, output_type) == text
        assert import_stats().lowering_runs == 1


def test_import_batch_gathers_requests_and_names_the_reported_node(add_nodes) -> None:
    clear_import_cache()
    batch = ImportBatch(TorchMLIRNodeImporter(OutputType.TOSA))
    good = [_case_node(name, torch.int32) for name in ("aten.add.Tensor", "aten.neg.default", "aten.add.Tensor")]
    stand_in = _case_node("aten.__rshift__.Scalar", torch.int32)
    reported = add_nodes["0:add"]
    positions = [batch.add(good[0]), batch.add(stand_in, report_as=reported), batch.add(good[1]), batch.add(good[2])]
    assert positions == [0, 1, 2, 3] and len(batch) == 4
    assert import_stats().lowering_runs == 0  # nothing is lowered before run()
    with pytest.raises(TorchMLIRLoweringError) as caught:
        batch.run()
    assert caught.value.node_name == reported.name
    assert import_stats().lowering_runs >= 1
    texts = import_nodes([(node, None) for node in good], OutputType.TOSA)
    assert texts[0] == texts[2] and "tosa.negate" in texts[1]


def test_batch_failure_keeps_the_successes(add_nodes) -> None:
    clear_import_cache()
    good = [_case_node(name, torch.int32) for name in ("aten.add.Tensor", "aten.mul.Tensor", "aten.neg.default")]
    bad = _case_node("aten.__rshift__.Scalar", torch.int32)
    with pytest.raises(TorchMLIRLoweringError) as caught:
        import_nodes([(good[0], None), (bad, None), (good[1], None), (good[2], None)], OutputType.TOSA)
    assert caught.value.node_name == bad.name
    assert caught.value.output_type == "tosa"
    assert any("torch.aten.__rshift__.Scalar" in d for d in caught.value.diagnostics)
    assert "failed to legalize operation 'torch.aten.__rshift__.Scalar'" in caught.value.summary
    misses = import_stats().misses
    for node in good:
        _signature(import_aten_node_to_mlir(node, OutputType.TOSA))
    assert import_stats().misses == misses  # all cached by the failed batch
    with pytest.raises(TorchMLIRLoweringError):  # the failure is cached too
        import_aten_node_to_mlir(bad, OutputType.TOSA)
    assert import_stats().misses == misses


# --- errors ---------------------------------------------------------------------------------------------


def test_unlowerable_node_reports_torch_mlir_diagnostics() -> None:
    node = _case_node("aten.mm.default", torch.float32, symbolic=True)
    with pytest.raises(UnsupportedNodeError) as caught:
        import_aten_node_to_mlir(node, "tosa")
    message = str(caught.value)
    assert f"node '{node.name}' (aten.mm.default)" in message
    assert "(output type 'tosa')" in message
    assert "torch-mlir diagnostics:" in message
    assert "failed to legalize operation 'torch.aten.mm'" in message


def test_missing_meta_is_a_normalization_error(add_nodes) -> None:
    graph = fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(aten.relu.default, (x,))
    with pytest.raises(NodeNormalizationError, match=r"node 'relu_default' \(aten.relu.default\).*no meta\['val'\]"):
        import_aten_node_to_mlir(node)
    node.meta["val"] = torch.zeros(3)
    with pytest.raises(NodeNormalizationError, match=r"node 'x'.*input of node 'relu_default'"):
        import_aten_node_to_mlir(node)


def test_helion_ops_are_not_imported(add_nodes) -> None:
    load = next(n for n in add_nodes.values() if n.name == "load")
    with pytest.raises(UnsupportedNodeError, match="Helion op"):
        import_aten_node_to_mlir(load)


def test_normalized_metadata_is_what_the_import_uses(add_nodes) -> None:
    add = add_nodes["0:add"]
    normalize_helion_node(add)
    assert _signature(import_aten_node_to_mlir(add))[1] == [_expected_type(add.meta["val"])]


# --- scalars where the schema wants a tensor ---------------------------------------------------------


def test_symbolic_scalar_divisor_is_passed_as_a_0d_tensor() -> None:
    shape_env = ShapeEnv()
    width = shape_env.create_unbacked_symint()
    shape_env.pending_fresh_unbacked_symbols.clear()
    graph = fx.Graph()
    x, divisor = graph.placeholder("x"), graph.placeholder("width")
    node = graph.call_function(aten.div.Tensor_mode, (x, divisor), {"rounding_mode": "floor"})
    with FakeTensorMode(shape_env=shape_env):
        x.meta["val"] = torch.empty(8, dtype=torch.int32)
        node.meta["val"] = aten.div.Tensor_mode(x.meta["val"], width, rounding_mode="floor")
    divisor.meta["val"] = width
    text = import_aten_node_to_mlir(node)
    assert _signature(text) == (["tensor<8xi32>", "i64"], ["tensor<8xi32>"])
    assert not _torch_dialect_ops(text)


def test_scalar_overload_falls_back_to_its_tensor_form() -> None:
    # torch-mlir cannot lower fmod.Scalar on integers to linalg but lowers fmod.Tensor.
    graph = fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(8, dtype=torch.int32, device="meta")
    node = graph.call_function(aten.fmod.Scalar, (x, 3))
    node.meta["val"] = torch.empty(8, dtype=torch.int32, device="meta")
    text = import_aten_node_to_mlir(node)
    assert _signature(text) == (["tensor<8xi32>"], ["tensor<8xi32>"])
    assert "dense<3> : tensor<i32>" in text  # the int is carried in the int32 operand's type


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.bool])
@pytest.mark.parametrize("scalar", [True, 3, -7, 70000, 16777217, 0.1, 1e-3, 65504.5], ids=repr)
def test_0d_tensor_stands_for_a_wrapped_number_exactly(dtype, scalar) -> None:
    """Same result dtype and values as the Python scalar (single rounding included); an
    int beside floating tensors is carried in their compute type, never as int64."""
    from helion_mlir.importer.rewrites import scalar_tensor_dtype

    values = torch.tensor([0.0, 1.0, 2.5, -3.0, 100.0, 0.3]).to(dtype)
    stand_in = torch.tensor(scalar, dtype=scalar_tensor_dtype(scalar, [dtype]))
    if dtype.is_floating_point and type(scalar) is int:
        assert stand_in.dtype in (torch.float32, torch.float64)
    for op in (torch.add, torch.mul, torch.div):
        expected, got = op(values, scalar), op(values, stand_in)
        assert got.dtype == expected.dtype
        assert torch.equal(got, expected)


# --- TensorSpec inputs and result shapes ------------------------------------------------------------------


def test_tensor_specs_import_like_tensors_of_their_shape() -> None:
    node = _case_node("aten.add.Tensor", torch.float32)
    static = [TensorSpec((16, 32), torch.float32)] * 2
    metas = [torch.empty((16, 32), dtype=torch.float32, device="meta")] * 2
    assert import_aten_node_to_mlir(node, input_tensors=static) == import_aten_node_to_mlir(node, input_tensors=metas)
    dynamic = import_aten_node_to_mlir(node, input_tensors=[TensorSpec((None, 32), torch.float32)] * 2)
    assert "tensor<?x32xf32>" in dynamic and "tensor<16x32xf32>" not in dynamic


def test_each_dynamic_size_of_a_spec_is_its_own_symbol() -> None:
    node = _case_node("aten.add.Tensor", torch.float32)
    clear_import_cache()
    import_aten_node_to_mlir(node, input_tensors=[TensorSpec((None, 32), torch.float32)] * 2)
    import_aten_node_to_mlir(node, input_tensors=[TensorSpec((None, 32), torch.float32)] * 2)
    assert (import_stats().hits, import_stats().misses) == (1, 1)
    # Two independent dynamic sizes differ from one size used twice.
    shared = CaseSizes(symbolic=True)
    import_aten_node_to_mlir(_case_node("aten.add.Tensor", torch.float32, True, shared))
    assert import_stats().misses == 2


def test_dynamic_sizes_with_one_same_as_key_are_one_size() -> None:
    # baddbmm must know that the accumulator's dynamic dim is the product's: independent
    # symbols cannot be broadcast to each other.
    node = _case_node("aten.baddbmm.default", torch.float32)
    batch = TensorSpec((2, 8, 8), torch.float32)
    keyed = [TensorSpec((2, 8, None), torch.float32, same_as=(None, None, "d")), batch,
             TensorSpec((2, 8, None), torch.float32, same_as=(None, None, "d"))]
    clear_import_cache()
    text = import_aten_node_to_mlir(node, input_tensors=keyed)
    assert "tensor<2x8x?xf32>" in text
    renamed = [TensorSpec(s.shape, s.dtype, same_as=(None, None, "other")) if s.shape[2] is None else s for s in keyed]
    assert import_aten_node_to_mlir(node, input_tensors=renamed) == text  # keys name sizes; only equality counts
    assert (import_stats().hits, import_stats().misses) == (1, 1)
    independent = [TensorSpec(s.shape, s.dtype) for s in keyed]
    with pytest.raises(NodeNormalizationError, match="cannot compute its result"):
        import_aten_node_to_mlir(node, input_tensors=independent)


def test_import_batch_knows_result_shapes_before_lowering(row_max_nodes) -> None:
    clear_import_cache()
    node = _case_node("aten.amax.default", torch.float32)
    batch = ImportBatch(TorchMLIRNodeImporter())
    inputs = [TensorSpec((8, None), torch.float32)]
    first = batch.add(node, inputs)
    expected = batch.results(first)
    assert import_stats().lowering_runs == 0
    assert isinstance(expected, ResultSpec) and expected.dtype == torch.float32
    batch.run()
    again = ImportBatch(TorchMLIRNodeImporter())
    assert again.results(again.add(node, inputs)) == expected  # served by the cache
    max_dim = row_max_nodes["0:max_1"]
    parts = again.results(again.add(max_dim, [TensorSpec((8, 4), torch.float32), TensorSpec((8,), torch.float32)]))
    assert parts == (ResultSpec((8,), torch.float32), ResultSpec((8,), torch.int64))
