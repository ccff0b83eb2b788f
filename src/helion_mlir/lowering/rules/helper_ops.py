"""Helion's helper ops: those that are an ATen op under another name or a formula of ATen
ops (the GELU forms), those that compute nothing of their own (a multi-buffer lowering's
marker), and the GPU-specific ones the tool refuses on purpose.

Helion's decomposition table routes ``aten.gelu`` to single-node ops of its own, one per
value of the keyword-only ``approximate``. Both forms are emitted as torch's formula, in
torch's order of operations and in float32 for half-precision inputs (as torch's CPU kernel
computes it), with the ATen ops of each output type. torch-mlir's linalg lowering of
``aten.gelu`` would differ: its tanh form scales by sqrt(7/11) = 0.797724 where torch uses
sqrt(2/pi) = 0.797885 (off by up to 5e-5), its erf form divides by sqrt(2) where torch
multiplies by sqrt(1/2) (a division per element: bias + GELU 4096x2048 f32 on one thread
5.5-6.4 -> 5.3 ms).
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
from ..aten_calls import import_aten_call, zero_dim_tensor
from ..context import RuleContext
from ..registry import register_lowering, register_rejection
from ..values import Tensor


def _gelu(ctx: RuleContext, node: fx.Node, formula: Callable[[Callable[..., Tensor], Tensor], Tensor]) -> Tensor:
    """``formula(call, x)`` of the node's input in float32 for half-precision inputs (as torch's CPU
    kernel computes GELU), cast back to the node's dtype; ``call`` emits one ATen op."""
    x = ctx.value(node.args[0])
    if not isinstance(x, Tensor):
        raise HelionMLIRError(f"GELU of {x!r}, which is not a tensor")
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype

    def call(target: Any, *operands: Any) -> Tensor:
        values = [zero_dim_tensor(ctx.emit, o, [compute]) if isinstance(o, float) else o for o in operands]
        return import_aten_call(ctx, node, target, tuple(values))

    return ctx.emit.cast(formula(call, ctx.emit.cast(x, compute)), node.meta["val"].dtype)


@register_lowering(_gelu_tanh_approx._gelu_erf)
def lower_gelu_erf(ctx: RuleContext, node: fx.Node) -> Any:
    """``x * 0.5 * (1 + erf(x * sqrt(1/2)))`` as torch computes it (torch-mlir's lowering of
    ``aten.gelu`` divides by sqrt(2) instead: one division per element, and other roundings)."""
    return _gelu(ctx, node, lambda call, x: call(
        aten.mul.Tensor, call(aten.mul.Tensor, x, 0.5),
        call(aten.add.Tensor, call(aten.erf.default, call(aten.mul.Tensor, x, _SQRT_HALF)), 1.0)))


@register_lowering(_gelu_tanh_approx._gelu_tanh_approx)
def lower_gelu_tanh(ctx: RuleContext, node: fx.Node) -> Any:
    """``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` as torch computes it."""
    def formula(call: Callable[..., Tensor], x: Tensor) -> Tensor:
        cube = call(aten.mul.Tensor, call(aten.mul.Tensor, x, x), x)
        inner = call(aten.mul.Tensor, call(aten.add.Tensor, x, call(aten.mul.Tensor, cube, _GELU_KAPPA)), _GELU_BETA)
        return call(aten.mul.Tensor, call(aten.mul.Tensor, x, 0.5),
                    call(aten.add.Tensor, call(aten.tanh.default, inner), 1.0))

    return _gelu(ctx, node, formula)


aten = torch.ops.aten
# torch's constants: M_SQRT1_2; sqrt(2) * 2/sqrt(pi) / 2 = sqrt(2/pi), and the cubic coefficient.
_SQRT_HALF = math.sqrt(0.5)
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
