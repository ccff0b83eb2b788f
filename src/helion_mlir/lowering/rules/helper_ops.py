"""Helion's helper ops: those that are an ATen op under another name or a formula of ATen
ops (the GELU forms), those that compute nothing of their own (a multi-buffer lowering's
marker), and the GPU-specific ones the tool refuses on purpose.

Helion's decomposition table routes ``aten.gelu`` to single-node ops of its own, one per
value of the keyword-only ``approximate``. The erf form goes back to ``aten.gelu``. The
tanh form is emitted as torch's formula, in torch's order of operations and in float32
for half-precision inputs (as torch's CPU kernel computes it), with the ATen ops of each
output type: torch-mlir's linalg lowering of ``aten.gelu(approximate="tanh")`` scales by
sqrt(7/11) = 0.797724 where torch uses sqrt(2/pi) = 0.797885, off by up to 5e-5.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from helion.language import (
    _gelu_tanh_approx,
    _tracing_ops,
    device_print,
    inline_asm_ops,
    inline_triton_ops,
)
from torch import fx

from ...errors import HelionMLIRError
from ..context import RuleContext
from ..registry import register_lowering, register_rejection
from ..values import Tensor
from .aten import import_and_inline, import_aten_call, twin_node, zero_dim_tensor


def _as_aten(ctx: RuleContext, node: fx.Node, target: Any, kwargs: dict[str, Any]) -> Any:
    """Lower ``node`` as the ATen op ``target`` on the same tensor input, with ``kwargs``."""
    with twin_node(node, target, (node.args[0],), kwargs) as twin:
        return import_and_inline(ctx, twin, [ctx.value(node.args[0])], report_as=node)


@register_lowering(_gelu_tanh_approx._gelu_erf)
def lower_gelu_erf(ctx: RuleContext, node: fx.Node) -> Any:
    return _as_aten(ctx, node, aten.gelu.default, {})


@register_lowering(_gelu_tanh_approx._gelu_tanh_approx)
def lower_gelu_tanh(ctx: RuleContext, node: fx.Node) -> Any:
    """``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` as torch computes it."""
    x = ctx.value(node.args[0])
    if not isinstance(x, Tensor):
        raise HelionMLIRError(f"GELU of {x!r}, which is not a tensor")
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype

    def call(target: Any, *operands: Any) -> Tensor:
        values = [zero_dim_tensor(ctx.emit, o, [compute]) if isinstance(o, float) else o for o in operands]
        return import_aten_call(ctx, node, target, tuple(values))

    x = ctx.emit.cast(x, compute)
    cube = call(aten.mul.Tensor, call(aten.mul.Tensor, x, x), x)
    inner = call(aten.mul.Tensor, call(aten.add.Tensor, x, call(aten.mul.Tensor, cube, _GELU_KAPPA)), _GELU_BETA)
    gelu = call(aten.mul.Tensor, call(aten.mul.Tensor, x, 0.5), call(aten.add.Tensor, call(aten.tanh.default, inner), 1.0))
    return ctx.emit.cast(gelu, node.meta["val"].dtype)


aten = torch.ops.aten
# torch's constants: sqrt(2) * 2/sqrt(pi) / 2 = sqrt(2/pi), and the cubic coefficient.
_GELU_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5
_GELU_KAPPA = 0.044715


@register_lowering(_tracing_ops._inductor_lowering_extra)
def lower_inductor_lowering_extra(ctx: RuleContext, node: fx.Node) -> Any:
    """A marker for intermediate buffers of a multi-buffer lowering: its value is its input's."""
    args = node.args[0]
    return ctx.recorded(args[0] if isinstance(args, (list, tuple)) else args)


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
