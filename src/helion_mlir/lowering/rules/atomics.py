"""Element-by-element read-modify-write: scatters (stores at tensor indices) and
Helion's atomics, as one ``linalg.generic`` over the value's lanes that inserts into,
or combines with, the destination."""

from __future__ import annotations

import enum
from collections.abc import Callable

import torch
from helion.language import atomic_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import element_type
from ..context import RuleContext
from ..emitter import Emitter
from ..indexing import AccessKind, extract_valid, pad_to_tile
from ..jagged import index_dims, jagged_lane_mask, mask_jagged
from ..registry import register_lowering
from ..values import Tensor
from .memory import Combine, accesses_of, insert_valid, scatter, valid_region, value_to_store


class Atomic(enum.Enum):
    """Helion's atomic read-modify-write operations (``hl.atomic_<value>``)."""

    ADD = "add"
    AND = "and"
    OR = "or"
    XOR = "xor"
    MAX = "max"
    MIN = "min"
    XCHG = "xchg"
    CAS = "cas"  # compare and swap: the value is the expected one, the extra operand the replacement


_BITWISE = (Atomic.AND, Atomic.OR, Atomic.XOR)
# (float op, integer op) of the atomics that combine the old value with the new one.
_COMBINE_OPS = {
    Atomic.ADD: ("arith.addf", "arith.addi"),
    Atomic.AND: (None, "arith.andi"),
    Atomic.OR: (None, "arith.ori"),
    Atomic.XOR: (None, "arith.xori"),
    Atomic.MAX: ("arith.maximumf", "arith.maxsi"),
    Atomic.MIN: ("arith.minimumf", "arith.minsi"),
}


def _atomic_combiner(emit: Emitter, kind: Atomic, dtype: torch.dtype) -> Combine:
    elt = element_type(dtype)
    is_float = dtype.is_floating_point

    def combine(old: str, new: str, extra: str) -> str:
        out = emit.fresh("rmw")
        if kind is Atomic.XCHG:
            return new
        if kind is Atomic.CAS:  # new is the expected value, extra the replacement
            eq = emit.fresh("eq")
            pred = "arith.cmpf oeq" if is_float else "arith.cmpi eq"
            emit.op(f"{eq} = {pred}, {old}, {new} : {elt}")
            emit.op(f"{out} = arith.select {eq}, {extra}, {old} : {elt}")
            return out
        if kind in _BITWISE and is_float:
            raise HelionMLIRError(f"atomic_{kind.value} needs an integer tensor")
        float_op, int_op = _COMBINE_OPS[kind]
        emit.op(f"{out} = {float_op if is_float else int_op} {old}, {new} : {elt}")
        return out

    return combine


def _lower_atomic(kind: Atomic) -> Callable[[RuleContext, fx.Node], Tensor | None]:
    def rule(ctx: RuleContext, node: fx.Node) -> Tensor | None:
        host = ctx.destination
        dest = host.value
        accesses = accesses_of(ctx, host, node.args[1], node.args[2])
        if any(a.kind is AccessKind.NEWAXIS for a in accesses):
            raise HelionMLIRError("atomics through a None (new axis) index are not supported")
        emit = ctx.emit
        value = value_to_store(emit, ctx.value(node.args[2]), dest, accesses)
        extra = None
        if kind is Atomic.CAS:
            extra = value_to_store(emit, ctx.value(node.args[3]), dest, accesses)
        combine = _atomic_combiner(emit, kind, dest.dtype)
        wants_old = ctx.is_read(node)  # the old values are built only for a kernel that reads them
        dims = index_dims(ctx, node.args[1], value.rank)  # lanes past a jagged tile's row end change nothing
        if any(a.kind is AccessKind.TENSOR for a in accesses):
            mask = jagged_lane_mask(ctx, dims, value)
            new_dest, olds = scatter(emit, dest, accesses, value, mask, combine, extra, keep_old=wants_old)
            ctx.write(new_dest)
            return olds
        old_valid = extract_valid(emit, dest, accesses)
        new_valid = valid_region(emit, value, accesses)
        inputs = [old_valid, new_valid] + ([valid_region(emit, extra, accesses)] if extra is not None else [])

        def body(args: list[str], _i: Callable[[int], str]) -> str:
            return combine(args[0], args[1], args[2] if len(args) > 2 else "")

        combined = emit.elementwise(inputs, old_valid.shape, dest.dtype, body, hint="rmw")
        ctx.write(insert_valid(emit, dest, mask_jagged(ctx, dims, combined, old_valid), accesses))
        return pad_to_tile(emit, old_valid, accesses) if wants_old else None

    rule.__name__ = f"lower_atomic_{kind.value}"
    rule.__doc__ = f"``atomic_{kind.value}``: read-modify-write returning the old values."
    return rule


for _kind in Atomic:
    register_lowering(getattr(atomic_ops, f"atomic_{_kind.value}"), writes=0)(_lower_atomic(_kind))
