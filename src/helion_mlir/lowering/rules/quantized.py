"""Helion's quantized ops: unpacking e2m1 pairs, and its 16-lane group loads.

- ``hl.float4_e2m1fn_x2_to_float32(t)``: a float4_e2m1fn_x2 tile is a tensor with a
  trailing pair dimension (docs/abi.md); the two results are its low and high values,
  ``arith.extf`` from ``f4E2M1FN`` to f32 (exact).
- ``hl.load_float4_e2m1fn_x16_to_float16(storage, group_offsets, extra_mask)``: 8-byte
  group ``g`` of the flattened storage (uint8 bytes or float4_e2m1fn_x2 pairs) holds 16 e2m1
  values, byte ``j`` carrying values ``2j`` (low nibble) and ``2j+1``; the op returns 16
  f16 tiles shaped like ``group_offsets``. ``hl.load_bfloat16_x16_to_float16`` reads 16
  consecutive bf16 values per group instead. Lanes the mask turns off read 0.0 (the GPU
  code loads a zero word), and so do lanes whose position lies outside the storage
  (docs/abi.md, "Indices out of range"; checked mode checks them).

Both loads are one ``linalg.generic`` over ``group_offsets.shape + [16]`` that reads the
flattened storage with ``tensor.extract``, then 16 slices of its last dimension.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from helion.language import quantized_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import PACKED_PAIR_DTYPES, element_type
from ..bounds import all_of, guard_positions, guarded_value, nonempty, truthy
from ..context import RuleContext
from ..emitter import Emitter
from ..packed_pairs import float4_in_byte, unpack_pair_halves
from ..registry import register_lowering
from ..unit_dims import expand_dims
from ..values import Tensor

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


class _Positions:
    """The positions one lane reads in the flattened storage: each is compared with its size
    (checked in checked mode where the lane is ``on``) and read at 0 when outside."""

    def __init__(self, emit: Emitter, name: str, on: str | None) -> None:
        self.emit, self.name, self.on = emit, name, on
        self.inside: list[str] = []

    def at(self, flat: Tensor, expression: str, *operands: str) -> str:
        """``affine_map<(g, l) -> (expression)>`` applied to ``operands``, moved to 0 when outside ``flat``."""
        raw = self.emit.assign("pos", f"affine.apply affine_map<({', '.join('gl'[: len(operands)])}) -> "
                                      f"({expression})>({', '.join(operands)})")
        [safe], inside = guard_positions(self.emit, flat, self.name, [raw], [0], self.on)
        assert inside is not None
        self.inside.append(inside)
        return safe


def _group_load(
    ctx: RuleContext, node: fx.Node, decode: Callable[[Tensor, str, str, _Positions], str]
) -> tuple[Tensor, ...]:
    """16 f16 tiles shaped like the group offsets; ``decode(flat, group, lane, positions)``
    emits the f16 value of one lane (``group`` and ``lane`` are ``index`` SSA names),
    reading the storage at ``positions.at(...)``."""
    emit = ctx.emit
    host = ctx.host(node.args[0])
    name = host.name if host is not None else "storage"
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
        on = truthy(emit, args[1], inputs[1].dtype) if len(args) > 1 else None
        positions = _Positions(emit, name, on)
        value = decode(flat, group, index(len(shape) - 1), positions)
        keep = all_of(emit, ([on] if on is not None else []) + positions.inside)
        return emit.assign("lane", f"arith.select {keep}, {value}, {zero.ssa} : f16") if keep is not None else value

    dynamic = [emit.index(emit.dim(offsets, axis)) for axis, size in enumerate(offsets.shape) if size is None]

    def load() -> Tensor:
        return emit.elementwise(inputs, shape, torch.float16, body, hint="lanes", dynamic_sizes=dynamic)

    # Empty storage: position 0 would lie outside it too.
    lanes = guarded_value(emit, nonempty(emit, flat, [0]), load, lambda: emit.fill(shape, torch.float16, 0.0, dynamic),
                          shape)
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
    """Helion's grouped load of 16 e2m1 values per group offset, as f16 tiles: from bytes
    (two values each, low nibble first) or from float4 pairs; lanes masked off or outside
    the storage read 0."""
    emit = ctx.emit

    def decode(flat: Tensor, group: str, lane: str, positions: _Positions) -> str:
        if flat.dtype in PACKED_PAIR_DTYPES:  # pairs flattened: one value per element
            at = positions.at(flat, "g * 16 + l", group, lane)
            code = emit.assign("fp4", f"tensor.extract {flat.ssa}[{at}] : {flat.type}")
            return _to_f16(emit, code, element_type(flat.dtype))
        if flat.dtype not in (torch.uint8, torch.int8):
            raise HelionMLIRError(f"packed e2m1 storage must be uint8 or float4_e2m1fn_x2, got {flat.dtype}")
        at = positions.at(flat, "g * 8 + l floordiv 2", group, lane)
        byte = emit.assign("byte", f"tensor.extract {flat.ssa}[{at}] : {flat.type}")
        shift = emit.fresh("shift")  # the odd lane of a byte is its high nibble
        emit.op(f"{shift} = affine.apply affine_map<(l) -> ((l mod 2) * 4)>({lane})")
        return _to_f16(emit, float4_in_byte(emit, byte, shift, "f4E2M1FN"), "f4E2M1FN")

    return _group_load(ctx, node, decode)


@register_lowering(quantized_ops.load_bfloat16_x16_to_float16)
def lower_load_bfloat16_x16(ctx: RuleContext, node: fx.Node) -> tuple[Tensor, ...]:
    """Helion's grouped load of 16 bf16 values per group offset, as f16 tiles; lanes masked
    off or outside the storage read 0."""
    emit = ctx.emit

    def decode(flat: Tensor, group: str, lane: str, positions: _Positions) -> str:
        if flat.dtype != torch.bfloat16:
            raise HelionMLIRError(f"the storage must be bfloat16, got {flat.dtype}")
        at = positions.at(flat, "g * 16 + l", group, lane)
        value = emit.assign("bf16", f"tensor.extract {flat.ssa}[{at}] : {flat.type}")
        return _to_f16(emit, value, "bf16")

    return _group_load(ctx, node, decode)
