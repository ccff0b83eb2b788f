"""Cost of importing ATen nodes through torch-mlir: cold one by one, cold batched, cached.

``measure_import_costs()`` binds a few Helion kernels of the kinds real kernels are made
of (softmax, layer norm, matmul, elementwise with a row reduction), takes their ATen and
prims device-IR nodes (about 40, with symbolic tile sizes), and times the importer. It
clears the process-wide import cache, so run it in a process of its own.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import helion
import helion.language as hl
import torch
from torch import fx

from helion_mlir.errors import UnsupportedNodeError
from helion_mlir.importer.node_importer import (
    TorchMLIRNodeImporter,
    clear_import_cache,
    import_stats,
)
from helion_mlir.importer.normalize import node_inputs
from helion_mlir.lowering.helion_compat import original_args
from helion_mlir.output_type import OutputType

__all__ = ["benchmark_nodes", "measure_import_costs"]


@helion.kernel(config=helion.Config(block_sizes=[1]))
def _softmax_rows(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        out[tile_r, :] = torch.nn.functional.softmax(x[tile_r, :], dim=1)
    return out


@helion.kernel(config=helion.Config(block_sizes=[4]))
def _layer_norm_rows(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :].to(torch.float32)
        mean = row.mean(dim=1, keepdim=True)
        centered = row - mean
        variance = (centered * centered).mean(dim=1, keepdim=True)
        normalized = centered * torch.rsqrt(variance + 1e-5)
        out[tile_r, :] = (normalized * weight[None, :] + bias[None, :]).to(x.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[32, 32, 32]))
def _matmul_bias_relu(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    rows, inner = x.size()
    _, cols = w.size()
    out = torch.empty([rows, cols], dtype=x.dtype, device=x.device)
    for tile_r, tile_c in hl.tile([rows, cols]):
        acc = hl.zeros([tile_r, tile_c], dtype=torch.float32)
        for tile_k in hl.tile(inner):
            acc = torch.addmm(acc, x[tile_r, tile_k], w[tile_k, tile_c])
        out[tile_r, tile_c] = torch.relu(acc + bias[tile_c]).to(x.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def _gated_row_scale(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :]
        peak, where_peak = torch.max(row, dim=1, keepdim=True)
        gated = torch.where(gate[tile_r, :] > 0, torch.sigmoid(row), row.neg())
        out[tile_r, :] = torch.maximum(gated / peak, row.exp2()) + where_peak.to(x.dtype)
    return out


def _as_traced(node: fx.Node, twins: fx.Graph) -> fx.Node:
    """``node``, or a twin (in ``twins``, leaving the kernel's graph alone) with the
    arguments as traced where Helion's lowering pass rewrote them, as the converter
    imports such nodes."""
    recorded = original_args(node)
    if recorded is None or (recorded[1] == node.args and recorded[2] == dict(node.kwargs)):
        return node
    twin = twins.call_function(node.target, tuple(recorded[1]), dict(recorded[2]))
    twin.meta = {key: value for key, value in node.meta.items() if key != "lowering"}
    return twin


def benchmark_nodes() -> list[fx.Node]:
    """The ATen and prims nodes of the benchmark kernels' device IR, in graph order."""
    bound = [
        _softmax_rows.bind((torch.randn(128, 96),)),
        _layer_norm_rows.bind((torch.randn(64, 80, dtype=torch.bfloat16), torch.randn(80), torch.randn(80))),
        _matmul_bias_relu.bind(
            (torch.randn(64, 48, dtype=torch.bfloat16), torch.randn(48, 40, dtype=torch.bfloat16), torch.randn(40))
        ),
        _gated_row_scale.bind((torch.randn(64, 32), torch.randn(64, 32))),
    ]
    twins = fx.Graph()
    return [
        _as_traced(node, twins)
        for kernel in bound
        for info in kernel.host_function.device_ir.graphs
        # Reduction-loop graphs are analysis copies until a config rolls the reduction.
        if type(info).__name__ != "ReductionLoopGraphInfo"
        for node in info.graph.nodes
        if node.op == "call_function" and str(node.target).startswith(("aten.", "prims."))
    ]


def _milliseconds(seconds: float) -> float:
    return round(seconds * 1e3, 4)


def _concrete(value: Any, size: int) -> Any:
    """``value`` with every symbolic size (and symbolic int) replaced by ``size``."""
    if isinstance(value, torch.Tensor):
        shape = [size if isinstance(d, torch.SymInt) else int(d) for d in value.shape]
        return torch.empty(shape, dtype=value.dtype, device="meta")
    if isinstance(value, torch.SymInt):
        return size
    return value


def _requests(nodes: list[fx.Node], concrete_size: int | None) -> list[tuple[fx.Node, list[Any] | None]]:
    if concrete_size is None:
        return [(node, None) for node in nodes]
    return [(node, [_concrete(i.meta["val"], concrete_size) for i in node_inputs(node)]) for node in nodes]


def measure_import_costs(
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    *,
    concrete_size: int | None = None,
    repeats: int = 5,
) -> dict[str, Any]:
    """Per-node import cost in milliseconds (medians over ``repeats`` rounds).

    * ``cold_single_ms_per_node``: empty cache, nodes imported one at a time (one pipeline
      run per distinct signature);
    * ``cold_batched_ms_per_node``: empty cache, all nodes in one ``import_nodes`` call
      (``..._best_...``: the fastest round; ``..._cpu_...``: CPU time, which a busy
      machine inflates less than wall time);
    * ``cache_hit_ms_per_node``: every node already cached.

    With ``concrete_size`` every symbolic size is replaced by it (as a converter does
    with a config's block sizes), giving static shapes; otherwise the nodes keep their
    symbolic tile sizes (dynamic dimensions). Also reports the node count, distinct
    signatures and pipeline runs of a batched round.
    """
    importer = TorchMLIRNodeImporter(output_type)
    nodes = benchmark_nodes()
    requests = _requests(nodes, concrete_size)
    importer.import_nodes(requests)  # warm up: pipelines parsed, fake-tensor caches filled

    single, batched, batched_cpu, hits = [], [], [], []
    for _ in range(repeats):
        clear_import_cache()
        start = time.perf_counter()
        for node, inputs in requests:
            importer.import_node(node, inputs)
        single.append((time.perf_counter() - start) / len(nodes))

        clear_import_cache()
        start, start_cpu = time.perf_counter(), time.process_time()
        importer.import_nodes(requests)
        batched.append((time.perf_counter() - start) / len(nodes))
        batched_cpu.append((time.process_time() - start_cpu) / len(nodes))
        batch_stats = import_stats()

        start = time.perf_counter()
        for node, inputs in requests:
            importer.import_node(node, inputs)
        hits.append((time.perf_counter() - start) / len(nodes))

    return {
        "output_type": importer.output_type.value,
        "sizes": "symbolic" if concrete_size is None else f"concrete ({concrete_size})",
        "nodes": len(nodes),
        "distinct_signatures": batch_stats.entries,
        "batched_lowering_runs": batch_stats.lowering_runs,
        "cold_single_ms_per_node": _milliseconds(statistics.median(single)),
        "cold_batched_ms_per_node": _milliseconds(statistics.median(batched)),
        "cold_batched_best_ms_per_node": _milliseconds(min(batched)),
        "cold_batched_cpu_ms_per_node": _milliseconds(statistics.median(batched_cpu)),
        "cache_hit_ms_per_node": _milliseconds(statistics.median(hits)),
    }


if __name__ == "__main__":
    for kind in OutputType:
        for size in (None, 32):
            try:
                print(measure_import_costs(kind, concrete_size=size))
            except UnsupportedNodeError as err:
                print(f"{kind.value}, {'symbolic' if size is None else 'concrete'} sizes: {err.reason.splitlines()[0]}")
