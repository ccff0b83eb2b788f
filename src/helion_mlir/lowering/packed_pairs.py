"""Packed pairs of float4 values (``torch.float4_e2m1fn_x2``): a tile of pairs is held with
a last dimension of 2, one value each; these helpers take the halves apart, pack them
into bytes (low nibble first) and unpack bytes, for the rules of dtype views and of
quantized ops."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..mlir_types import element_type
from .emitter import Emitter
from .unit_dims import expand_dims
from .values import Tensor

__all__ = ["float4_in_byte", "pack_pairs", "unpack_pair_halves", "unpack_pairs"]

_NIBBLE = 4  # bits per value of a packed pair


def _pair_half(emit: Emitter, pairs: Tensor, which: int) -> Tensor:
    """The low (0) or high (1) value of every pair: the pair dimension sliced away."""
    shape = pairs.shape[:-1]
    rank = pairs.rank
    offsets = ", ".join(["0"] * (rank - 1) + [str(which)])
    sizes = ", ".join([str(s) if s is not None else emit.dim(pairs, i).ssa for i, s in enumerate(shape)] + ["1"])  # type: ignore[union-attr]
    result = Tensor(emit.fresh("half"), shape, pairs.dtype)
    emit.op(
        f"{result.ssa} = tensor.extract_slice {pairs.ssa}[{offsets}] [{sizes}] [{', '.join(['1'] * rank)}] "
        f": {pairs.type} to {result.type}"
    )
    return result


def unpack_pair_halves(emit: Emitter, pairs: Tensor) -> tuple[Tensor, Tensor]:
    """The low and high values of a packed tile, each without the pair dimension (same dtype)."""
    return _pair_half(emit, pairs, 0), _pair_half(emit, pairs, 1)


def pack_pairs(emit: Emitter, pairs: Tensor, target: torch.dtype) -> Tensor:
    low, high = unpack_pair_halves(emit, pairs)
    packed_type = element_type(pairs.dtype)

    def body(args: list[str], _index: Callable[[int], str]) -> str:
        nibbles = []
        for arg in args:
            bits = emit.assign("nibble", f"arith.bitcast {arg} : {packed_type} to i{_NIBBLE}")
            wide = emit.assign("nibble", f"arith.extui {bits} : i{_NIBBLE} to i8")
            nibbles.append(wide)
        shifted = emit.assign("high", f"arith.shli {nibbles[1]}, {emit.const(_NIBBLE, 'i8').ssa} : i8")
        byte = emit.assign("byte", f"arith.ori {nibbles[0]}, {shifted} : i8")
        return byte

    return emit.elementwise([low, high], low.shape, target, body, hint="bytes")


def float4_in_byte(emit: Emitter, byte: str, shift: str, fp4_type: str) -> str:
    """The float4 value in the nibble of ``byte`` (an ``i8``) that starts at bit ``shift``
    (an ``index``: 0 for the low nibble, 4 for the high one)."""
    amount = emit.assign("shift", f"arith.index_cast {shift} : index to i8")
    moved = emit.assign("nibble", f"arith.shrui {byte}, {amount} : i8")
    bits = emit.assign("nibble", f"arith.trunci {moved} : i8 to i{_NIBBLE}")
    value = emit.assign("fp4", f"arith.bitcast {bits} : i{_NIBBLE} to {fp4_type}")
    return value


def unpack_pairs(emit: Emitter, source: Tensor, target: torch.dtype) -> Tensor:
    packed_type = element_type(target)
    shape = (*source.shape, 2)

    def body(args: list[str], index: Callable[[int], str]) -> str:
        shift = emit.fresh("shift")  # 0 for the low value, 4 for the high one
        emit.op(f"{shift} = affine.apply affine_map<(d) -> (d * {_NIBBLE})>({index(len(shape) - 1)})")
        return float4_in_byte(emit, args[0], shift, packed_type)

    expanded = expand_dims(emit, source, [source.rank])
    return emit.elementwise([expanded], shape, target, body, hint="pairs")
