"""Dtype conversions and reinterpretations the package lowers itself.

``.to(dtype)`` involving an 8-bit float goes through :meth:`Emitter.cast` rather than
torch-mlir: every torch-mlir backend turns it into a bare ``arith.truncf``, which loses
torch's rules (e4m3fn saturates to +-448, e8m0 takes the magnitude, f64 is rounded to f32
first); the cast spells them out (see docs/lowering.md, "Low-precision dtypes"). So does
``.to(float16 / bfloat16)`` of an integer or float64 tensor, which torch rounds through
float32 (torch-mlir's own output is rewritten alike, :mod:`helion_mlir.importer.bf16_conversions`;
this covers the raw output type too).

``tensor.view(dtype)`` between dtypes of one width is a bitcast of every element, which
torch-mlir lowers to neither linalg nor tosa; a float4_e2m1fn_x2 tile viewed as bytes (or
back) packs its pair dimension into one byte, low nibble first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from ...mlir_types import LOW_PRECISION_FLOATS, PACKED_PAIR_DTYPES, element_type
from ...output_type import OutputType
from ..aten_calls import lower_aten_op
from ..context import RuleContext
from ..helion_compat import original_args
from ..packed_pairs import pack_pairs, unpack_pairs
from ..registry import register_lowering
from ..values import Tensor

_BYTE_DTYPES = (torch.uint8, torch.int8)
_HALF_TYPES = {torch.float16, torch.bfloat16}


def _traced_args(node: fx.Node) -> tuple[Any, ...]:
    """The node's arguments as traced (Helion's lowering pass may have replaced some)."""
    recorded = original_args(node)
    return tuple(recorded[1]) if recorded is not None else tuple(node.args)


def _is_low_precision(dtype: torch.dtype) -> bool:
    return dtype not in PACKED_PAIR_DTYPES and element_type(dtype) in LOW_PRECISION_FLOATS


def _rounds_through_f32(source: torch.dtype, target: torch.dtype) -> bool:
    """torch builds float16 and bfloat16 values from a float32: from an integer or a float64
    it rounds twice, where torch-mlir's single conversion rounds once."""
    return target in (torch.float16, torch.bfloat16) and (not source.is_floating_point or source == torch.float64)


@register_lowering(torch.ops.prims.convert_element_type.default, torch.ops.aten._to_copy.default)
def lower_convert(ctx: RuleContext, node: fx.Node) -> Any:
    """``x.to(dtype)``: torch's conversion rules for 8-bit floats and for 16-bit floats made
    from integers or float64, torch-mlir for the rest, except where torch-mlir's tosa form
    does not lower: any conversion of a tensor with a dynamic dimension (``failed to legalize
    operation 'torch.aten.to.dtype'``), and between float16 and bfloat16 (a ``tosa.cast`` that
    tosa-to-linalg refuses)."""
    source = _traced_args(node)[0]
    value = ctx.tensor(source) if isinstance(source, fx.Node) else None
    result = node.meta["val"]
    if value is None:
        return lower_aten_op(ctx, node)
    own = (any(_is_low_precision(d) for d in (value.dtype, result.dtype))
           or _rounds_through_f32(value.dtype, result.dtype))
    if ctx.output_type is OutputType.TOSA:
        own = own or None in value.shape or {value.dtype, result.dtype} == _HALF_TYPES
    return ctx.emit.cast(value, result.dtype) if own else lower_aten_op(ctx, node)


@register_lowering(torch.ops.aten.view.dtype)
def lower_view_dtype(ctx: RuleContext, node: fx.Node) -> Any:
    """``x.view(dtype)``: the same bits read as another dtype of the same width."""
    source = ctx.tensor(_traced_args(node)[0])
    target: torch.dtype = node.meta["val"].dtype
    emit = ctx.emit
    if source.dtype in PACKED_PAIR_DTYPES and target in _BYTE_DTYPES:
        return pack_pairs(emit, source, target)
    if target in PACKED_PAIR_DTYPES and source.dtype in _BYTE_DTYPES:
        return unpack_pairs(emit, source, target)
    if source.dtype.itemsize != target.itemsize or PACKED_PAIR_DTYPES & {source.dtype, target}:
        return lower_aten_op(ctx, node)  # a view that changes the last dimension
    src, dst = element_type(source.dtype), element_type(target)
    if src == dst:  # int8 <-> uint8: both signless i8
        return Tensor(source.ssa, source.shape, target)

    def body(args: list[str], _index: Callable[[int], str]) -> str:
        out = emit.assign("bits", f"arith.bitcast {args[0]} : {src} to {dst}")
        return out

    return emit.elementwise([source], source.shape, target, body, hint="view")


