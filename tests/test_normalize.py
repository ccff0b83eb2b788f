"""Node normalization: metadata torch-mlir's importer can type, and the input convention."""

from __future__ import annotations

import operator
from pathlib import Path

import pytest
import torch
from examples_util import load_example
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.passes.shape_prop import TensorMetadata

from helion_mlir.errors import NodeNormalizationError
from helion_mlir.importer.normalize import (
    node_inputs,
    nodes_in,
    normalize_helion_node,
    synthesize_tensor_meta,
    to_fake_tensor,
)

aten = torch.ops.aten


KERNEL_FILE = Path(__file__).resolve().parent / "kernels" / "node_kernels.py"
row_max_plus_argmax = load_example(KERNEL_FILE).row_max_kernel


@pytest.fixture()
def kernel_nodes() -> dict[str, fx.Node]:
    """Root-graph nodes of a freshly bound kernel, by name (fresh: tests edit their meta)."""
    bound = row_max_plus_argmax.bind((torch.randn(64, 32),))
    graph = bound.host_function.device_ir.graphs[0].graph
    return {node.name: node for node in graph.nodes}


def _line_of(text: str) -> int:
    """Line number of the first line of the kernels' file containing ``text``."""
    with open(KERNEL_FILE) as source:
        return next(number for number, line in enumerate(source, start=1) if text in line)


def _graph_node(target, args, kwargs=None, val=None) -> fx.Node:
    graph = fx.Graph()
    node = graph.call_function(target, args, kwargs or {})
    if val is not None:
        node.meta["val"] = val
    return node


# --- synthesize_tensor_meta ------------------------------------------------------------


def test_tensor_meta_of_a_real_tensor() -> None:
    value = torch.zeros(3, 4, dtype=torch.bfloat16, requires_grad=True)
    meta = synthesize_tensor_meta(value)
    assert meta == {
        "shape": torch.Size([3, 4]),
        "dtype": torch.bfloat16,
        "requires_grad": True,
        "stride": (4, 1),
        "memory_format": torch.contiguous_format,
        "is_quantized": False,
        "qparams": {},
    }
    assert TensorMetadata(**meta).shape == (3, 4)  # the keys are exactly TensorMetadata's fields


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: torch.zeros(3, 4).t(), None),
        (lambda: torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last), torch.channels_last),
        (lambda: torch.zeros(3, 1, 4).unsqueeze(0), torch.contiguous_format),
        (lambda: torch.zeros(3, 8)[:, ::2], None),
    ],
    ids=["transposed", "channels_last", "size_one_dims", "strided_slice"],
)
def test_memory_format_matches_torch(make, expected) -> None:
    value = make()
    assert synthesize_tensor_meta(value)["memory_format"] == expected
    assert value.is_contiguous(memory_format=expected or torch.contiguous_format) == (expected is not None)


def test_tensor_meta_of_unbacked_sizes_needs_no_guard() -> None:
    shape_env = ShapeEnv()
    rows, cols = shape_env.create_unbacked_symint(), shape_env.create_unbacked_symint()
    with FakeTensorMode(shape_env=shape_env):
        tile = torch.empty(rows, cols)
    assert synthesize_tensor_meta(tile)["memory_format"] == torch.contiguous_format
    # A permuted tile: Tensor.is_contiguous() would have to guard on data-dependent sizes.
    meta = synthesize_tensor_meta(tile.permute(1, 0))
    assert meta["shape"] == (cols, rows)
    assert meta["memory_format"] is None


def test_tensor_meta_rejects_non_tensors() -> None:
    with pytest.raises(TypeError, match="torch.Tensor"):
        synthesize_tensor_meta(3)


# --- normalize_helion_node --------------------------------------------------------------


def test_normalizing_a_helion_node_sets_tensor_metadata(kernel_nodes) -> None:
    node = kernel_nodes["add"]
    del node.meta["tensor_meta"]
    assert normalize_helion_node(node) is node
    meta = node.meta["tensor_meta"]
    assert isinstance(meta, TensorMetadata)
    assert meta.shape == node.meta["val"].shape
    assert meta.dtype == torch.int64
    assert str(meta.shape[0]).startswith("u")  # the tile size stays symbolic


def test_normalizing_twice_changes_nothing(kernel_nodes) -> None:
    node = normalize_helion_node(kernel_nodes["convert_element_type"])
    val, meta = node.meta["val"], node.meta["tensor_meta"]
    normalize_helion_node(node)
    assert node.meta["val"] is val
    assert node.meta["tensor_meta"] == meta


def test_tuple_output_is_normalized_element_by_element(kernel_nodes) -> None:
    node = kernel_nodes["max_1"]
    assert node.target is aten.max.dim
    normalize_helion_node(node)
    values, indices = node.meta["val"]
    assert all(isinstance(v, FakeTensor) for v in (values, indices))
    value_meta, index_meta = node.meta["tensor_meta"]
    assert (value_meta.dtype, index_meta.dtype) == (torch.float32, torch.int64)
    assert value_meta.shape == values.shape


def test_concrete_tuple_outputs_become_fake() -> None:
    x = torch.randn(4, 6)
    node = _graph_node(aten.var_mean.correction, (x, [1]), val=torch.var_mean(x, dim=1))
    normalize_helion_node(node)
    assert isinstance(node.meta["val"], tuple) and len(node.meta["val"]) == 2
    assert all(isinstance(v, FakeTensor) and v.shape == (4,) for v in node.meta["val"])
    assert [m.shape for m in node.meta["tensor_meta"]] == [torch.Size([4])] * 2


def test_list_outputs_stay_lists() -> None:
    node = _graph_node(aten.split.Tensor, (None, 2), val=list(torch.randn(4, 3).split(2)))
    normalize_helion_node(node)
    assert isinstance(node.meta["val"], list)
    assert isinstance(node.meta["tensor_meta"], list)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_concrete_and_meta_tensors_become_fake(device) -> None:
    value = torch.empty(5, 7, dtype=torch.float16, device=device).t()
    node = _graph_node(aten.clone.default, (None,), val=value)
    normalize_helion_node(node)
    fake = node.meta["val"]
    assert isinstance(fake, FakeTensor)
    assert (fake.shape, fake.stride(), fake.dtype) == (value.shape, value.stride(), value.dtype)
    assert node.meta["tensor_meta"].memory_format is None


def test_to_fake_tensor_keeps_fake_tensors() -> None:
    with FakeTensorMode():
        fake = torch.empty(2, 2)
    assert to_fake_tensor(fake) is fake


def test_scalar_results_keep_their_value(kernel_nodes) -> None:
    node = kernel_nodes["block_size_0"]  # _get_symnode: an unbacked SymInt
    val = node.meta["val"]
    normalize_helion_node(node)
    assert node.meta["val"] is val
    assert "tensor_meta" not in node.meta


def test_missing_value_names_node_target_and_line(kernel_nodes) -> None:
    node = kernel_nodes["add"]
    del node.meta["val"]
    with pytest.raises(NodeNormalizationError) as caught:
        normalize_helion_node(node)
    message = str(caught.value)
    assert "node 'add'" in message
    assert "aten.add.Tensor" in message
    line = _line_of("out[tile_r] = indices + values")
    assert f"{KERNEL_FILE}:{line}" in message  # the kernel line that produced the node
    assert "hint:" in message


def test_nodes_without_a_value_are_rejected(kernel_nodes) -> None:
    with pytest.raises(NodeNormalizationError, match=r"node 'store' \(memory_ops.store\) at .*no meta\['val'\]"):
        normalize_helion_node(kernel_nodes["store"])


def test_value_of_unsupported_kind_is_rejected(kernel_nodes) -> None:
    node = kernel_nodes["load"]
    node.meta["val"] = {"not": "a value"}
    with pytest.raises(NodeNormalizationError, match=r"node 'load' \(memory_ops.load\) at .*is a dict"):
        normalize_helion_node(node)


def test_sequence_of_non_tensors_is_rejected() -> None:
    node = _graph_node(operator.getitem, (None, 0), val=(torch.zeros(2), 3))
    with pytest.raises(NodeNormalizationError, match="sequence"):
        normalize_helion_node(node)


# --- node_inputs --------------------------------------------------------------------------


def test_inputs_in_order_of_first_appearance() -> None:
    graph = fx.Graph()
    a, b, c, d = (graph.placeholder(name) for name in "abcd")
    node = graph.call_function(aten.cat.default, ([c, a, c], b), {"dim": d, "again": [a, (b,)]})
    assert node_inputs(node) == [c, a, b, d]



def test_nodes_in_keeps_repeats_and_nested_order() -> None:
    graph = fx.Graph()
    a, b, c = (graph.placeholder(name) for name in "abc")
    tree = ([c, a, c], {"k": (b, slice(a, None)), "n": 3}, None)
    assert nodes_in(tree) == [c, a, c, b, a]
    assert nodes_in((1, "x", [])) == []


def test_inputs_of_helion_nodes(kernel_nodes) -> None:
    load = kernel_nodes["load"]
    assert node_inputs(load) == [kernel_nodes["x"], kernel_nodes["block_size_0"]]
    # aten.max.dim lists Helion's extra dependency as a keyword; it counts as an input.
    assert node_inputs(kernel_nodes["max_1"]) == [kernel_nodes["_mask_to"], kernel_nodes["max_1_extra"]]
