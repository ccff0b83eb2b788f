"""The Helion examples in ``examples/``: each binds (device IR exists) and, run in Helion's
eager reference mode on CPU, matches its plain-torch ``reference`` within ``TOLERANCE``, for
block-divisible and ragged shapes. Together they cover the device-IR node targets and graph
kinds listed in ``COVERAGE`` / ``GRAPH_KINDS``.
"""

from __future__ import annotations

import inspect
from functools import cache

import helion
import pytest
import torch
from examples_util import (
    SHAPE_KINDS,
    bind_example,
    example_names,
    graph_kinds,
    load_example_by_name,
    node_targets,
    register_cpu_matmul_dtype_overloads,
    run_reference_mode,
)

from helion_mlir.lowering.tensor_reads import tensor_reads

NAMES = example_names()

# Examples that are about dynamic shapes; every other example keeps static_shapes=True.
DYNAMIC_SHAPE_EXAMPLES = {"row_mean_dynamic"}
# Examples whose host code reads values from tensor data (``.item()``); the jagged, grouped
# and MoE examples load their offsets in device code instead.
READS_TENSOR_DATA = {"jagged_to_padded", "padded_to_jagged", "clip_grad_norm"}

# Node targets (spelled as in the op census) that the examples together must produce.
COVERAGE = {
    # Helion ops
    "_tracing_ops._host_tensor",
    "_tracing_ops._get_symnode",
    "_tracing_ops._new_var",
    "_tracing_ops._mask_to",
    "_tracing_ops._phi",
    "_tracing_ops._for_loop",
    "_tracing_ops._for_loop_step",
    "_tracing_ops._if",
    "_tracing_ops._while_loop",
    "_tracing_ops._inductor_lowering_extra",
    "memory_ops.load",
    "memory_ops.store",
    "view_ops.subscript",
    "view_ops.split",
    "view_ops.join",
    "creation_ops.full",
    "matmul_ops.dot",
    "tile_ops.tile_index",
    "tile_ops.tile_begin",
    "tile_ops.tile_end",
    "tile_ops.tile_id",
    "atomic_ops.atomic_add",
    "atomic_ops.atomic_max",
    "atomic_ops.atomic_min",
    "atomic_ops.atomic_cas",
    "atomic_ops.atomic_and",
    "atomic_ops.atomic_or",
    "atomic_ops.atomic_xor",
    "reduce_ops._reduce",
    "scan_ops._associative_scan",
    "_gelu_tanh_approx._gelu_erf",
    "_gelu_tanh_approx._gelu_tanh_approx",
    "quantized_ops.float4_e2m1fn_x2_to_float32",
    "quantized_ops.load_float4_e2m1fn_x16_to_float16",
    "quantized_ops.load_bfloat16_x16_to_float16",
    # ATen ops
    "aten.add.Tensor",
    "aten.sub.Tensor",
    "aten.mul.Tensor",
    "aten.div.Tensor",
    "aten.div.Tensor_mode",
    "aten.remainder.Scalar",
    "aten.neg.default",
    "aten.abs.default",
    "aten.sum.dim_IntList",
    "aten.sum.default",
    "aten.mean.dim",
    "aten.amax.default",
    "aten.amin.default",
    "aten.maximum.default",
    "aten.minimum.default",
    "aten.exp.default",
    "aten.exp2.default",
    "aten.log.default",
    "aten.log2.default",
    "aten.rsqrt.default",
    "aten.sqrt.default",
    "aten.tanh.default",
    "aten.sigmoid.default",
    "aten.relu.default",
    "aten.pow.Tensor_Scalar",
    "aten.where.self",
    "aten.scalar_tensor.default",
    "aten.full.default",
    "aten.clamp_min.default",
    "aten.clamp_max.default",
    "aten.lt.Scalar",
    "aten.gt.Scalar",
    "aten.eq.Scalar",
    "aten.ge.Tensor",
    "aten.gt.Tensor",
    "aten.lt.Tensor",
    "aten.eq.Tensor",
    "aten.bitwise_and.Scalar",
    "aten.bitwise_and.Tensor",
    "aten.bitwise_or.Tensor",
    "aten.bitwise_xor.Tensor",
    "aten.__lshift__.Scalar",
    "aten.__rshift__.Scalar",
    "aten.mm.default",
    "aten.bmm.default",
    "aten.addmm.default",
    "aten.baddbmm.default",
    "aten.permute.default",
    "aten.view.default",
    "aten.unsqueeze.default",
    "aten.sym_size.int",
    "prims.convert_element_type.default",
    "prims.iota.default",
    # Python SymInt arithmetic and tuple access
    "_operator.getitem",
    "_operator.add",
    "_operator.sub",
    "_operator.mul",
    "_operator.floordiv",
}

GRAPH_KINDS = {
    "RootGraphInfo",
    "ForLoopGraphInfo",
    "ReductionLoopGraphInfo",
    "IfGraphInfo",
    "ElseGraphInfo",
    "WhileLoopGraphInfo",
    "WhileConditionGraphInfo",
    "HelperFunctionGraphInfo",
}

# What each example must produce in its device IR, for every shape kind: node targets
# (spelled as in the op census, see ``examples_util.target_name``) and graph kinds. Besides
# these, every example has a root graph, ``_host_tensor``, ``_get_symnode`` and a ``store`` or
# an atomic.
EXPECTED: dict[str, set[str]] = {
    "add": {"aten.add.Tensor"},
    "add_rms_norm_gelu": {"aten.add.Tensor", "aten.mean.dim", "aten.rsqrt.default", "_gelu_tanh_approx._gelu_erf"},
    "alibi_bias": {"prims.iota.default", "tile_ops.tile_begin", "tile_ops.tile_index", "aten.abs.default"},
    "argmax_reduce": {
        "HelperFunctionGraphInfo", "ForLoopGraphInfo", "reduce_ops._reduce",
        "_tracing_ops._mask_to",
        "tile_ops.tile_index", "aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor",
        "aten.eq.Tensor", "aten.gt.Tensor", "aten.lt.Tensor", "aten.where.self",
    },
    "attention": {
        "ForLoopGraphInfo", "_tracing_ops._for_loop", "_tracing_ops._new_var", "_tracing_ops._phi",
        "_operator.getitem", "aten.bmm.default", "aten.permute.default", "aten.exp2.default",
        "aten.amax.default", "aten.maximum.default", "aten.sub.Tensor", "aten.div.Tensor",
        "creation_ops.full", "view_ops.subscript",
    },
    "attention_backward": {
        "atomic_ops.atomic_add", "aten.bmm.default", "aten.baddbmm.default", "aten.permute.default",
        "_tracing_ops._for_loop", "view_ops.subscript",
    },
    "attention_causal": {
        "matmul_ops.dot", "tile_ops.tile_end", "tile_ops.tile_index", "aten.ge.Tensor",
        "aten.where.self", "aten.scalar_tensor.default", "aten.exp.default",
        "prims.convert_element_type.default",
    },
    "bias_gelu": {"_gelu_tanh_approx._gelu_erf", "view_ops.subscript"},
    "block_scan": {
        "HelperFunctionGraphInfo", "tile_ops.tile_id", "scan_ops._associative_scan",
        "_tracing_ops._for_loop", "aten.sum.default",
    },
    "block_sparse_matmul": {
        "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "_tracing_ops._for_loop",
        "aten.addmm.default", "aten.amax.default", "aten.abs.default", "aten.gt.Scalar",
    },
    "bmm": {"aten.baddbmm.default", "_tracing_ops._for_loop", "aten.sym_size.int"},
    "causal_softmax_arange": {
        "prims.iota.default", "tile_ops.tile_index", "aten.le.Tensor", "aten.where.self",
        "aten.scalar_tensor.default", "aten.amax.default", "aten.exp.default",
    },
    "causal_attention_skip": {
        "IfGraphInfo", "_tracing_ops._if", "_tracing_ops._for_loop", "_operator.lt",
        "tile_ops.tile_begin", "tile_ops.tile_end", "tile_ops.tile_index", "aten.mm.default",
    },
    "column_bitwise": {
        "HelperFunctionGraphInfo", "reduce_ops._reduce", "atomic_ops.atomic_and",
        "atomic_ops.atomic_or", "atomic_ops.atomic_xor", "aten.bitwise_and.Tensor",
        "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor",
    },
    "column_stats": {
        "atomic_ops.atomic_add", "atomic_ops.atomic_cas", "atomic_ops.atomic_max",
        "atomic_ops.atomic_min", "aten.amax.default", "aten.amin.default", "_tracing_ops._mask_to",
    },
    "complex_multiply": {"view_ops.split", "view_ops.join", "aten.mul.Tensor", "aten.sub.Tensor", "aten.add.Tensor"},
    "cross_entropy": {
        "ReductionLoopGraphInfo", "tile_ops.tile_index", "aten.log.default", "aten.exp.default",
        "aten.amax.default", "_tracing_ops._mask_to",
    },
    "cross_entropy_ignore": {
        "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "_tracing_ops._for_loop",
        "aten.eq.Scalar", "aten.log.default", "aten.maximum.default",
    },
    "cumsum": {"HelperFunctionGraphInfo", "scan_ops._associative_scan"},
    "cumsum_looped": {"scan_ops._associative_scan", "_tracing_ops._for_loop", "view_ops.subscript"},
    "discounted_returns": {"HelperFunctionGraphInfo", "scan_ops._associative_scan", "aten.sub.Tensor",
                           "prims.convert_element_type.default"},
    "embedding": {"memory_ops.load", "memory_ops.store"},
    "embedding_projection": {"memory_ops.load", "tile_ops.tile_index", "aten.bmm.default", "aten.unsqueeze.default",
                             "_tracing_ops._for_loop"},
    "exp": {"aten.exp.default"},
    "geglu": {"tile_ops.tile_index", "aten.pow.Tensor_Scalar", "aten.tanh.default"},
    "gelu_tanh_manual": {"aten.tanh.default", "aten.mul.Tensor", "aten.add.Tensor"},
    "global_max_normalize": {"atomic_ops.atomic_max", "aten.abs.default", "aten.amax.default"},
    "group_norm": {
        "aten.view.default", "aten.mean.dim", "_tracing_ops._inductor_lowering_extra",
        "aten.sqrt.default",
    },
    "grouped_gemm": {"_tracing_ops._for_loop", "aten.addmm.default", "_operator.add"},
    "histogram": {
        "atomic_ops.atomic_add", "aten.clamp_min.default", "aten.clamp_max.default",
        "prims.convert_element_type.default", "_operator.sub",
    },
    "int8_row_mean": {"aten.mean.dim", "aten.mul.Tensor"},
    "int_divmod": {"aten.div.Tensor_mode", "aten.remainder.Scalar", "aten.fmod.Scalar"},
    "jagged_dense_add": {
        "_tracing_ops._for_loop", "aten.amax.default", "aten.lt.Tensor", "tile_ops.tile_index",
        "view_ops.subscript",
    },
    "jagged_hstu_attention": {
        "_tracing_ops._for_loop", "aten.bmm.default", "aten.baddbmm.default", "prims.iota.default",
        "tile_ops.tile_index", "aten.amax.default", "aten.where.self",
    },
    "jagged_mean": {
        "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "_tracing_ops._for_loop",
        "aten.gt.Scalar", "aten.div.Tensor", "prims.convert_element_type.default",
    },
    "jagged_sum": {
        "ForLoopGraphInfo", "_tracing_ops._for_loop", "_operator.add", "aten.sum.dim_IntList",
    },
    "kth_smallest": {
        "WhileLoopGraphInfo", "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._while_loop",
        "_tracing_ops._if", "aten.le.Tensor", "aten.ge.Scalar", "aten.amin.default",
    },
    "layer_norm": {
        "ReductionLoopGraphInfo", "aten.rsqrt.default", "aten.sum.dim_IntList",
        "_tracing_ops._mask_to", "prims.convert_element_type.default",
    },
    "residual_layer_norm": {
        "aten.var_mean.correction", "aten.rsqrt.default", "aten.add.Tensor", "prims.convert_element_type.default",
    },
    "linear_gelu_tanh": {
        "_gelu_tanh_approx._gelu_tanh_approx", "matmul_ops.dot", "_tracing_ops._for_loop", "view_ops.subscript",
    },
    "leaky_clamp": {"aten.where.self", "aten.sign.default", "aten.abs.default", "aten.gt.Scalar"},
    "log_softmax": {
        "aten.exp2.default", "aten.log2.default", "aten.unsqueeze.default", "aten.neg.default",
        "aten.full.default", "aten.minimum.default",
    },
    "masked_fill_value": {"aten.scalar_tensor.default", "aten.where.self"},
    "matmul": {
        "aten.mm.default", "_tracing_ops._for_loop", "_tracing_ops._phi", "creation_ops.full",
    },
    "fp8_quantize": {"aten.amax.default", "aten.clamp_min.default", "aten.clamp_max.default", "prims.convert_element_type.default"},
    "fp8_scaled_gemm": {"matmul_ops.dot", "aten.mul.Tensor", "prims.convert_element_type.default"},
    "int4_gemm": {
        "aten.__lshift__.Scalar", "aten.__rshift__.Scalar", "aten.div.Tensor_mode", "aten.mm.default",
        "tile_ops.tile_index",
    },
    "next_token_loss": {"memory_ops.load", "prims.iota.default", "aten.eq.Tensor", "aten.where.self", "aten.amax.default"},
    "nvfp4_gemv": {"quantized_ops.float4_e2m1fn_x2_to_float32", "aten.sum.dim_IntList", "prims.convert_element_type.default"},
    "nvfp4_gemv_grouped": {
        "quantized_ops.load_float4_e2m1fn_x16_to_float16", "quantized_ops.load_bfloat16_x16_to_float16",
        "aten.bitwise_and.Tensor", "tile_ops.tile_index",
    },
    "matmul_bf16": {"matmul_ops.dot", "prims.convert_element_type.default"},
    "matmul_bias_relu": {"aten.addmm.default", "aten.relu.default", "view_ops.subscript"},
    "matmul_int8": {"matmul_ops.dot", "creation_ops.full"},
    "matmul_layer_norm": {
        "_tracing_ops._for_loop", "aten.addmm.default", "aten.mean.dim", "aten.rsqrt.default", "creation_ops.full",
    },
    "matmul_split_k": {
        "atomic_ops.atomic_add", "tile_ops.tile_begin", "tile_ops.tile_end", "aten.mm.default",
    },
    "moe_scatter_add": {"atomic_ops.atomic_add", "aten.mul.Tensor", "view_ops.subscript"},
    "moe_topk_combine": {"aten.sum.dim_IntList", "aten.mul.Tensor", "view_ops.subscript"},
    "moe_unpermute": {"memory_ops.load", "memory_ops.store", "aten.exp.default"},
    "newton_rsqrt": {
        "WhileLoopGraphInfo", "WhileConditionGraphInfo", "_tracing_ops._while_loop",
        "aten.lt.Scalar",
    },
    "outer_product": {"view_ops.subscript", "aten.mul.Tensor"},
    "padded_attention_scores": {
        "_tracing_ops._for_loop", "aten.baddbmm.default", "aten.amax.default", "aten.permute.default",
        "tile_ops.tile_index", "aten.where.self",
    },
    "paged_gather": {"memory_ops.load", "tile_ops.tile_index", "aten.div.Tensor_mode", "aten.remainder.Scalar"},
    "pairwise_pool": {"_tracing_ops._for_loop_step", "_operator.floordiv", "_operator.add"},
    "philox": {
        "aten.__rshift__.Scalar", "aten.bitwise_and.Scalar", "aten.bitwise_xor.Tensor",
        "aten.mul.Tensor",
    },
    "rms_norm": {"aten.mean.dim", "aten.rsqrt.default", "_tracing_ops._inductor_lowering_extra"},
    "rms_norm_eps": {"aten.mean.dim", "aten.rsqrt.default", "aten.add.Tensor"},
    "rope": {
        "view_ops.split", "view_ops.join", "prims.iota.default", "tile_ops.tile_index",
        "aten.pow.Scalar", "aten.sin.default", "aten.cos.default",
    },
    "rope_tables": {"view_ops.split", "view_ops.join", "view_ops.subscript", "aten.mul.Tensor", "aten.sub.Tensor"},
    "routed_accumulate": {
        "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "_tracing_ops._for_loop",
        "aten.eq.Scalar", "_operator.mul", "_operator.add",
    },
    "row_branch": {
        "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "aten.eq.Scalar", "aten.relu.default",
        "aten.sigmoid.default",
    },
    "row_mean_dynamic": {"_tracing_ops._for_loop", "aten.div.Tensor"},
    "row_rescale": {
        "WhileLoopGraphInfo", "WhileConditionGraphInfo", "_tracing_ops._while_loop",
        "aten.gt.Scalar", "aten.abs.default",
    },
    "row_sum": {
        "ForLoopGraphInfo", "_tracing_ops._for_loop", "_tracing_ops._new_var", "_tracing_ops._phi",
        "creation_ops.full",
    },
    "scaled_activation": {
        "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "_operator.eq", "_operator.gt",
        "aten.relu.default", "_gelu_tanh_approx._gelu_erf", "aten.sigmoid.default",
    },
    "segment_weight_grad": {"_tracing_ops._for_loop", "aten.addmm.default", "aten.permute.default"},
    "softmax_looped": {"ReductionLoopGraphInfo", "_tracing_ops._for_loop", "aten.exp.default"},
    "softmax_one_pass": {
        "ReductionLoopGraphInfo", "_tracing_ops._mask_to", "aten.amax.default", "aten.exp.default",
        "aten.sum.dim_IntList", "aten.div.Tensor",
    },
    "softmax_two_pass": {
        "_tracing_ops._for_loop", "aten.maximum.default", "view_ops.subscript", "creation_ops.full",
    },
    "swiglu": {"aten.sigmoid.default", "prims.convert_element_type.default"},
    "tile_branch": {
        "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "tile_ops.tile_begin",
        "tile_ops.tile_end", "tile_ops.tile_index", "_operator.gt", "aten.le.Tensor",
    },
    "varlen_attention": {
        "_tracing_ops._for_loop", "aten.mm.default", "aten.addmm.default", "aten.exp.default",
        "aten.where.self",
    },
    "weighted_nll": {
        "IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "aten.eq.Scalar", "aten.where.self",
    },
    "welford": {
        "tile_ops.tile_begin", "tile_ops.tile_end", "_operator.sub", "_operator.mul",
        "_tracing_ops._phi",
    },
    "window_mean_pool": {"aten.mean.dim", "tile_ops.tile_id"},
    "xorshift_rand": {
        "aten.__lshift__.Scalar", "aten.__rshift__.Scalar", "aten.bitwise_xor.Tensor",
        "aten.bitwise_and.Scalar", "tile_ops.tile_index",
    },
    # Arguments of every kind, module-level values, host-computed block sizes.
    "flex_attention": {"ForLoopGraphInfo", "aten.tanh.default", "aten.mm.default", "tile_ops.tile_begin"},
    "alibi_attention": {"ForLoopGraphInfo", "aten.clamp_min.default", "tile_ops.tile_index", "aten.mm.default"},
    "smooth_l1_loss": {"ForLoopGraphInfo", "aten.abs.default", "aten.lt.Scalar", "aten.where.self"},
    "kl_div_loss": {"IfGraphInfo", "ElseGraphInfo", "_tracing_ops._if", "aten.log.default", "aten.clamp_min.default"},
    "layer_norm_affine": {"aten.mean.dim", "aten.rsqrt.default", "_tracing_ops._inductor_lowering_extra"},
    "bias_activation": {"aten.sigmoid.default", "aten.clamp_min.default", "aten.clamp_max.default"},
    "gelu_module_constants": {"aten.tanh.default", "aten.clamp_min.default", "_tracing_ops._get_symnode"},
    "rms_norm_module_eps": {"aten.mean.dim", "aten.rsqrt.default", "_tracing_ops._get_symnode"},
    "linear_attention_chunked": {"ForLoopGraphInfo", "aten.mm.default", "aten.ge.Tensor", "tile_ops.tile_index"},
    "hashed_embedding": {"aten.remainder.Scalar", "aten.mul.Tensor"},
    "split_k_barrier": {"ReductionLoopGraphInfo", "aten.addmm.default", "tile_ops.tile_id", "tile_ops.tile_end"},
    "split_k_tunable": {"atomic_ops.atomic_add", "aten.addmm.default", "tile_ops.tile_begin"},
    "chunk_means": {"tile_ops.tile_id", "aten.sum.dim_IntList", "aten.div.Tensor"},
    # Values read from tensor data on the host (.item()): sizes, loop bounds, device scalars.
    "jagged_to_padded": {"memory_ops.load", "aten.lt.Tensor", "tile_ops.tile_index", "view_ops.subscript"},
    "padded_to_jagged": {"memory_ops.store", "aten.mul.Tensor", "aten.lt.Tensor", "tile_ops.tile_index"},
    "clip_grad_norm": {"aten.mul.Tensor"},
    "softmax_whole_row": {"aten.amax.default", "aten.exp.default", "_tracing_ops._mask_to"},
}

EVERY_EXAMPLE = {
    "RootGraphInfo",
    "_tracing_ops._host_tensor",
    "_tracing_ops._get_symnode",
}

CASES = [
    pytest.param(name, shape, id=f"{name}-{shape}") for name in NAMES for shape in SHAPE_KINDS
]


@cache
def _bound(name: str, shape: str):
    return bind_example(load_example_by_name(name), shape)


def test_enough_examples() -> None:
    assert len(NAMES) >= 28, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_example_protocol(name: str) -> None:
    module = load_example_by_name(name)
    assert module.__doc__ and module.__doc__.strip(), f"{name}: missing module docstring"
    assert isinstance(module.KERNEL, helion.Kernel)
    # KERNEL itself must produce device IR; reference mode runs use a separate twin.
    assert module.KERNEL.settings.ref_mode == helion.RefMode.OFF
    # An explicit config, so binding and running never autotune.
    assert len(module.KERNEL.configs) == 1, f"{name}: expected exactly one explicit config"
    assert module.KERNEL.settings.static_shapes == (name not in DYNAMIC_SHAPE_EXAMPLES)
    assert set(module.TOLERANCE) == {"rtol", "atol"}
    params = inspect.signature(module.make_args).parameters
    assert list(params)[:2] == ["shape", "dtype"]
    assert params["shape"].default == "divisible" and params["dtype"].default is None
    if hasattr(module, "make_kwargs"):  # keywords the kernel is called with besides make_args'
        assert list(inspect.signature(module.make_kwargs).parameters) == ["shape"]
        assert isinstance(module.make_kwargs(), dict) and module.make_kwargs()
    assert callable(module.reference) and callable(module.main)


@pytest.mark.parametrize("name", NAMES)
def test_ragged_differs_from_divisible(name: str) -> None:
    module = load_example_by_name(name)

    def shapes(shape: str) -> list[tuple[int, ...]]:
        args = module.make_args(shape)
        return [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]

    assert shapes("ragged") != shapes("divisible")


@pytest.mark.parametrize(("name", "shape"), CASES)
def test_example_binds(name: str, shape: str) -> None:
    bound = _bound(name, shape)
    assert bound.host_function.device_ir.root_ids, f"{name}: no root graph"
    produced = node_targets(bound) | graph_kinds(bound)
    assert EVERY_EXAMPLE - produced == set()
    writes = {"memory_ops.store"} | {t for t in produced if t.startswith("atomic_ops.")}
    assert writes & produced, f"{name}: the device IR writes nothing"
    assert EXPECTED[name] - produced == set()
    reads = tensor_reads(bound.env)
    assert bool(reads) == (name in READS_TENSOR_DATA), f"{name}: values read from tensor data {reads}"


@pytest.mark.parametrize(("name", "shape"), CASES)
def test_example_matches_reference(name: str, shape: str) -> None:
    module = load_example_by_name(name)
    result, expected = run_reference_mode(module, shape)
    torch.testing.assert_close(result, expected, **module.TOLERANCE)


def test_every_example_has_expectations() -> None:
    assert set(EXPECTED) == set(NAMES)


def test_examples_cover_census_targets() -> None:
    # EXPECTED[name] is checked against the real device IR by test_example_binds, so the
    # union of the expectations is a lower bound of what the examples produce.
    covered = set(EVERY_EXAMPLE).union(*EXPECTED.values())
    assert COVERAGE - covered == set()
    assert GRAPH_KINDS - covered == set()


def test_multi_phase_example_has_two_roots() -> None:
    bound = _bound("global_max_normalize", "divisible")
    device_ir = bound.host_function.device_ir
    phases = sorted(device_ir.graphs[i].phase_index for i in device_ir.root_ids)
    assert phases == [0, 1]


def test_dynamic_example_has_symbolic_loop_bound() -> None:
    bound = _bound("row_mean_dynamic", "divisible")
    symnodes = {
        node.args[0]
        for graph in bound.host_function.device_ir.graphs
        for node in graph.graph.nodes
        if node.op == "call_function" and node.target.__name__ == "_get_symnode"
    }
    assert any(name.startswith("x_size") for name in symnodes), symnodes


@pytest.mark.parametrize("name", ["matmul_bf16", "attention", "layer_norm"])
def test_main_runs(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    load_example_by_name(name).main()
    assert "matches torch" in capsys.readouterr().out


def test_cpu_matmul_dtype_overloads_are_idempotent() -> None:
    register_cpu_matmul_dtype_overloads()
    register_cpu_matmul_dtype_overloads()
    a = torch.randn(3, 4).bfloat16()
    b = torch.randn(4, 5).bfloat16()
    out = torch.ops.aten.mm.dtype(a, b, torch.float32)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, a.float() @ b.float())
    bias = torch.randn(2, 3, 5)
    batched = torch.ops.aten.baddbmm.dtype(
        bias, a.expand(2, 3, 4), b.expand(2, 4, 5), torch.float32, beta=0.5
    )
    torch.testing.assert_close(batched, 0.5 * bias + (a.float() @ b.float()))


def test_philox_reference_matches_python_integers() -> None:
    # The torch reference emulates 32x32->64-bit products in wrapping int64; check it against
    # arbitrary-precision Python integers.
    module = load_example_by_name("philox")
    counters, seed = module.make_args("ragged")
    words = module.reference(counters, seed)
    for i in (0, 1, 250, 499):
        assert tuple(words[i].tolist()) == module._reference_python(int(counters[i]), seed)
