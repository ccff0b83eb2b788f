"""Helion's quantized ops: unpacking e2m1 pairs, and its 16-lane group loads.

- ``hl.float4_e2m1fn_x2_to_float32(t)``: a float4_e2m1fn_x2 tile is a tensor with a
  trailing pair dimension (docs/abi.md); the two results are its low and high values,
  ``arith.extf`` from ``f4E2M1FN`` to f32 (exact).
- ``hl.load_float4_e2m1fn_x16_to_float16(storage, group_offsets, extra_mask)``: 8-byte
  group ``g`` of the flattened storage (uint8 bytes or float4_e2m1fn_x2 pairs) holds 16 e2m1
  values, byte ``j`` carrying values ``2j`` (low nibble) and ``2j+1``; the op returns 16
  f16 tiles shaped like ``group_offsets``. ``hl.load_bfloat16_x16_to_float16`` reads 16
  consecutive bf16 values per group instead. Lanes the mask turns off read 0.0 (the GPU
  code loads a zero word), and their offsets are clamped into the storage.

Both loads are one ``linalg.generic`` over ``group_offsets.shape + [16]`` that reads the
flattened storage with ``tensor.extract``, then 16 slices of its last dimension.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from helion.language import quantized_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import PACKED_PAIR_DTYPES, element_type
from ..context import RuleContext
from ..emitter import Emitter
from ..registry import register_lowering
from ..values import Tensor
from .dtype_casts import float4_in_byte, unpack_pair_halves
from .memory import clamp_index, truthy
from .views import expand_dims

_LANES = 16


@register_lowering(quantized_ops.float4_e2m1fn_x2_to_float32)
def lower_float4_pairs_to_float32(ctx: RuleContext, node: fx.Node) -> tuple[Tensor, Tensor]:
    pairs = ctx.tensor(node.args[0])
    if pairs.dtype not in PACKED_PAIR_DTYPES:
        raise HelionMLIRError(f"expected a float4_e2m1fn_x2 tile, got {pairs.dtype}")
    low, high = unpack_pair_halves(ctx.emit, pairs)
    return ctx.emit.cast(low, torch.float32), ctx.emit.cast(high, torch.float32)


def _storage(emit: Emitter, storage: Tensor) -> Tensor:
    """The storage operand flattened to one dimension (it is contiguous by contract)."""
    if storage.rank == 1:
        return storage
    length = None if None in storage.shape else math.prod(storage.shape)  # type: ignore[arg-type]
    flat = Tensor(emit.fresh("flat"), (length,), storage.dtype)
    group = "[[" + ", ".join(str(i) for i in range(storage.rank)) + "]]"
    emit.op(f"{flat.ssa} = tensor.collapse_shape {storage.ssa} {group} : {storage.type} into {flat.type}")
    return flat


def _position(emit: Emitter, flat: Tensor, expression: str, *operands: str) -> str:
    """``affine_map<(g, l) -> (expression)>`` applied to ``operands``, clamped into ``flat``."""
    raw = emit.fresh("pos")
    names = ", ".join("gl"[: len(operands)])
    emit.op(f"{raw} = affine.apply affine_map<({names}) -> ({expression})>({', '.join(operands)})")
    return clamp_index(emit, raw, flat, 0)


def _group_load(
    ctx: RuleContext, node: fx.Node, decode: Callable[[Tensor, str, str], str]
) -> tuple[Tensor, ...]:
    """16 f16 tiles shaped like the group offsets; ``decode(flat, group, lane)`` emits the
    f16 value of one lane (``group`` and ``lane`` are ``index`` SSA names)."""
    emit = ctx.emit
    flat = _storage(emit, ctx.tensor(node.args[0]))
    offsets = ctx.tensor(node.args[1])
    mask_arg = node.args[2] if len(node.args) > 2 else node.kwargs.get("extra_mask")
    inputs = [offsets]
    if mask_arg is not None:
        inputs.append(emit.broadcast_to(ctx.tensor(mask_arg), offsets.shape))
    inputs = [expand_dims(emit, t, [t.rank]) for t in inputs]  # broadcast along the lanes
    shape = (*offsets.shape, _LANES)
    zero = emit.const(0.0, "f16")

    def body(args: list[str], index: Callable[[int], str]) -> str:
        group = emit.assign("group", f"arith.index_cast {args[0]} : {element_type(offsets.dtype)} to index")
        value = decode(flat, group, index(len(shape) - 1))
        if len(args) > 1:
            masked = emit.assign("lane", f"arith.select {truthy(emit, args[1], inputs[1].dtype)}, {value}, {zero.ssa} : f16")
            value = masked
        return value

    lanes = emit.elementwise(inputs, shape, torch.float16, body, hint="lanes")
    return tuple(_lane(emit, lanes, i) for i in range(_LANES))


def _lane(emit: Emitter, lanes: Tensor, i: int) -> Tensor:
    rank = lanes.rank
    shape = lanes.shape[:-1]
    sizes = [str(s) if s is not None else emit.dim(lanes, d).ssa for d, s in enumerate(shape)]  # type: ignore[union-attr]
    result = Tensor(emit.fresh("lane"), shape, lanes.dtype)
    offsets = ", ".join(["0"] * (rank - 1) + [str(i)])
    emit.op(
        f"{result.ssa} = tensor.extract_slice {lanes.ssa}[{offsets}] [{', '.join(sizes + ['1'])}] "
        f"[{', '.join(['1'] * rank)}] : {lanes.type} to {result.type}"
    )
    return result


def _to_f16(emit: Emitter, ssa: str, mlir_type: str) -> str:
    wide = emit.assign("f", f"arith.extf {ssa} : {mlir_type} to f32")
    half = emit.fresh("h")  # exact for e2m1; one rounding for bf16, as the GPU's cvt.rn
    emit.op(f"{half} = arith.truncf {wide} : f32 to f16")
    return half


@register_lowering(quantized_ops.load_float4_e2m1fn_x16_to_float16)
def lower_load_float4_x16(ctx: RuleContext, node: fx.Node) -> tuple[Tensor, ...]:
    emit = ctx.emit

    def decode(flat: Tensor, group: str, lane: str) -> str:
        if flat.dtype in PACKED_PAIR_DTYPES:  # pairs flattened: one value per element
            code = emit.assign("fp4", f"tensor.extract {flat.ssa}[{_position(emit, flat, 'g * 16 + l', group, lane)}] : {flat.type}")
            return _to_f16(emit, code, element_type(flat.dtype))
        if flat.dtype not in (torch.uint8, torch.int8):
            raise HelionMLIRError(f"packed e2m1 storage must be uint8 or float4_e2m1fn_x2, got {flat.dtype}")
        byte = emit.assign("byte", f"tensor.extract {flat.ssa}[{_position(emit, flat, 'g * 8 + l floordiv 2', group, lane)}] : {flat.type}")
        shift = emit.fresh("shift")  # the odd lane of a byte is its high nibble
        emit.op(f"{shift} = affine.apply affine_map<(l) -> ((l mod 2) * 4)>({lane})")
        return _to_f16(emit, float4_in_byte(emit, byte, shift, "f4E2M1FN"), "f4E2M1FN")

    return _group_load(ctx, node, decode)


@register_lowering(quantized_ops.load_bfloat16_x16_to_float16)
def lower_load_bfloat16_x16(ctx: RuleContext, node: fx.Node) -> tuple[Tensor, ...]:
    emit = ctx.emit

    def decode(flat: Tensor, group: str, lane: str) -> str:
        if flat.dtype != torch.bfloat16:
            raise HelionMLIRError(f"the storage must be bfloat16, got {flat.dtype}")
        value = emit.assign("bf16", f"tensor.extract {flat.ssa}[{_position(emit, flat, 'g * 16 + l', group, lane)}] : {flat.type}")
        return _to_f16(emit, value, "bf16")

    return _group_load(ctx, node, decode)
