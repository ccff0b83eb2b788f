"""Helion's autodiff (``helion.experimental.backward``) on CPU: its scan graphs name the CPU.

For a kernel with a device loop inside its tile loop (a matmul's reduction loop, a two-pass
softmax) Helion's autodiff differentiates a ``scan`` whose combine function it builds as a
fresh FX graph. Its placeholders carry no ``val`` meta, so the anchor Helion reads the
device from is never found and the tensors it creates there (the dummy ``ys`` every combine
function returns, a unit carry) fall back to the literal ``torch.device("cuda")``. On a GPU
that is the kernels' device; on CPU, torch's scan autograd makes those tensors leaves that
require grad, and its autograd engine, asking for a CUDA device guard that a CPU-only torch
lacks, aborts the process ("PyTorch is not linked with support for cuda devices").

Helion has no backend hook there, so one function is wrapped,
``helion.experimental.autodiff.differentiate_graph`` (the step that hands these graphs to
AOT autograd, with the kernel's inputs): when every input tensor is on the CPU, a device of
another type that the graphs name is the CPU. Other kernels' graphs, whose inputs are on an
accelerator, pass unchanged.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import torch
from helion.experimental import autodiff

log = logging.getLogger(__name__)

__all__ = ["install"]


def _cpu_of(tensors: tuple[object, ...]) -> torch.device | None:
    """The CPU device when every tensor input is on it, else None (the graphs stay as they are)."""
    devices = {t.device for t in tensors if isinstance(t, torch.Tensor)}
    if len(devices) == 1 and (device := devices.pop()).type == "cpu":
        return device
    return None


def _place_on(graph: torch.fx.Graph, device: torch.device) -> int:
    """Replace every other device the graph's nodes name by ``device``; the count replaced."""
    replaced = 0

    def place(value: Any) -> Any:
        nonlocal replaced
        if isinstance(value, torch.device) and value.type != device.type:
            replaced += 1
            return device
        return value

    for node in graph.nodes:
        node.args = torch.fx.node.map_aggregate(node.args, place)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, place)
    return replaced


def install() -> None:
    """Wrap Helion's ``differentiate_graph`` to place CPU kernels' scan graphs on the CPU (once)."""
    helion_differentiate = autodiff.differentiate_graph
    if getattr(helion_differentiate, "_helion_mlir_wrapped", False):
        return

    @functools.wraps(helion_differentiate)
    def differentiate_graph(
        compute_graph: torch.fx.Graph,
        input_tensors: tuple[torch.Tensor, ...],
        combine_attrs: dict[str, torch.fx.GraphModule] | None = None,
        bw_module_holder: list[Any] | None = None,
    ) -> torch.fx.Graph:
        device = _cpu_of(input_tensors)
        if device is not None:
            replaced = _place_on(compute_graph, device)
            for module in (combine_attrs or {}).values():
                if (count := _place_on(module.graph, device)) > 0:
                    module.recompile()
                    replaced += count
            if replaced:
                log.debug("placed %d tensor(s) of Helion's autodiff scan graphs on %s", replaced, device)
        return helion_differentiate(compute_graph, input_tensors, combine_attrs, bw_module_holder)

    differentiate_graph._helion_mlir_wrapped = True  # type: ignore[attr-defined]
    autodiff.differentiate_graph = differentiate_graph
