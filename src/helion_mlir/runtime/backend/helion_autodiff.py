"""Helion's autodiff (``helion.experimental.backward``) of the backend's kernels, on CPU.

Devices. For a kernel with a device loop inside its tile loop (a matmul's reduction loop, a
two-pass softmax) Helion's autodiff differentiates a ``scan`` whose combine function it builds
as a fresh FX graph. Its placeholders carry no ``val`` meta, so the anchor Helion reads the
device from is never found and the tensors it creates there (the dummy ``ys`` every combine
function returns, a unit carry) fall back to the literal ``torch.device("cuda")``. On a GPU
that is the kernels' device; on CPU, torch's scan autograd makes those tensors leaves that
require grad, and its autograd engine, asking for a CUDA device guard that a CPU-only torch
lacks, aborts the process ("PyTorch is not linked with support for cuda devices"). So
``helion.experimental.autodiff.differentiate_graph`` (the step that hands these graphs to AOT
autograd, with the kernel's inputs) is wrapped: when every input tensor is on the CPU, a
device of another type that the graphs name is the CPU. Graphs whose inputs are on an
accelerator pass unchanged.

Backend. The backward kernel Helion writes is a new ``@helion.kernel`` whose settings are
Helion's defaults, so its backend is ``HELION_BACKEND``'s, Triton's when unset: a kernel
given ``backend="mlir"`` would get a backward kernel that needs Triton. ``backward`` is
wrapped so that, while it differentiates a kernel whose backend is ``"mlir"``, a kernel
created without a backend (the backward kernel) takes ``"mlir"``; Helion's default backend is
read through ``helion.runtime.settings._get_backend``, which is wrapped to answer so in that
context. Other kernels' backward passes are Helion's unchanged.
"""

from __future__ import annotations

import contextvars
import functools
import logging
from typing import Any

import helion.experimental
import torch
from helion.experimental import autodiff
from helion.runtime import settings

log = logging.getLogger(__name__)

__all__ = ["install"]

_BACKEND_OF_NEW_KERNELS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "helion_mlir_backend_of_new_kernels", default=None)


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


def _wrap_differentiate_graph() -> None:
    """Place the scan graphs of CPU kernels on the CPU before AOT autograd sees them (once)."""
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


def _wrap_backward(backend_name: str) -> None:
    """Give the backward kernel of a kernel whose backend is ``backend_name`` that backend (once)."""
    helion_backward = autodiff.backward
    if getattr(helion_backward, "_helion_mlir_wrapped", False):
        return
    helion_default_backend = settings._get_backend

    @functools.wraps(helion_default_backend)
    def default_backend() -> str:
        return _BACKEND_OF_NEW_KERNELS.get() or helion_default_backend()

    @functools.wraps(helion_backward)
    def backward(kernel: Any, grad_out: Any, *inputs: object, **options: Any) -> Any:
        if getattr(kernel.settings, "backend", None) != backend_name:
            return helion_backward(kernel, grad_out, *inputs, **options)
        token = _BACKEND_OF_NEW_KERNELS.set(backend_name)
        try:
            return helion_backward(kernel, grad_out, *inputs, **options)
        finally:
            _BACKEND_OF_NEW_KERNELS.reset(token)

    backward._helion_mlir_wrapped = True  # type: ignore[attr-defined]
    settings._get_backend = default_backend
    autodiff.backward = backward
    helion.experimental.backward = backward


def install(backend_name: str) -> None:
    """Let Helion's autodiff differentiate CPU kernels of the backend ``backend_name`` (once)."""
    _wrap_differentiate_graph()
    _wrap_backward(backend_name)
