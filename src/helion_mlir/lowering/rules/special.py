"""Helion helper ops with a fixed meaning, and the targets the tool rejects on purpose."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from helion.language import (
    _gelu_tanh_approx,
    _tracing_ops,
    device_print,
    inline_asm_ops,
    inline_triton_ops,
)
from torch import fx

from ..registry import register_lowering, register_rejection
from .aten import import_and_inline, twin_node

if TYPE_CHECKING:
    from ..visitor import IRVisitor


def _as_aten(v: "IRVisitor", node: fx.Node, target: Any, extra_args: tuple[Any, ...]) -> Any:
    """Lower ``node`` as the ATen op ``target`` on the same tensor input."""
    with twin_node(node, target, (node.args[0], *extra_args), {}) as twin:
        return import_and_inline(v, twin, [v.value(node.args[0])], report_as=node)


@register_lowering(_gelu_tanh_approx._gelu_erf)
def lower_gelu_erf(v: "IRVisitor", node: fx.Node) -> Any:
    return _as_aten(v, node, torch.ops.aten.gelu.default, ())


@register_lowering(_gelu_tanh_approx._gelu_tanh_approx)
def lower_gelu_tanh(v: "IRVisitor", node: fx.Node) -> Any:
    return _as_aten(v, node, torch.ops.aten.gelu.default, ("tanh",))


@register_lowering(_tracing_ops._inductor_lowering_extra)
def lower_inductor_lowering_extra(v: "IRVisitor", node: fx.Node) -> Any:
    """A marker for intermediate buffers of a multi-buffer lowering: its value is its input's."""
    args = node.args[0]
    return v.value(args[0] if isinstance(args, (list, tuple)) else args)


register_rejection(
    inline_asm_ops.inline_asm_elementwise,
    "inline assembly is specific to a GPU back end and has no MLIR equivalent",
    "express the operation with torch ops inside the kernel",
)
register_rejection(
    inline_triton_ops.inline_triton,
    "inline Triton source cannot be lowered to MLIR",
    "express the operation with torch ops inside the kernel",
)
register_rejection(
    device_print, "device_print has no MLIR lowering", "remove the device_print call, or use Helion's ref mode to debug"
)
