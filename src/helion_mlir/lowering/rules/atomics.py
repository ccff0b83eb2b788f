"""Element-by-element read-modify-write: scatters (stores at tensor indices) and
Helion's atomics, as one ``linalg.generic`` over the value's lanes that inserts into,
or combines with, the destination."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import torch
from helion import exc
from helion.language import atomic_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import element_type
from ..bounds import guarded_update
from ..context import RuleContext
from ..emitter import Emitter
from ..indexing import (
    AccessKind,
    DimAccess,
    extract_valid,
    new_axis_dims,
    pad_to_tile,
    value_dynamic_sizes,
    value_shape,
    without_new_axes,
)
from ..jagged import index_dims, jagged_lane_mask, mask_jagged
from ..memory_access import (
    Combine,
    accesses_of,
    insert_valid,
    positions_inside,
    scatter,
    valid_region,
    value_to_store,
)
from ..registry import register_lowering
from ..unit_dims import drop_unit_dims, expand_dims
from ..values import HostTensor, Tensor


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
        if ctx.host(node.args[0]) is None:  # a tensor made inside the loop has no memory to update
            raise exc.AtomicOnDeviceTensor(f"atomic_{kind.value}")
        host = ctx.destination
        dest = host.value
        accesses = accesses_of(ctx, host, node.args[1], node.args[2])
        emit = ctx.emit
        value = value_to_store(emit, ctx.value(node.args[2]), dest, accesses)
        extra = None
        if kind is Atomic.CAS:
            extra = value_to_store(emit, ctx.value(node.args[3]), dest, accesses)
        wants_old = ctx.is_read(node)  # the old values are built only for a kernel that reads them
        dims = index_dims(ctx, node.args[1], value.rank)  # lanes past a jagged tile's row end change nothing
        units = new_axis_dims(accesses)  # the unit dims of None entries address nothing; the old values keep them
        if units:
            value = drop_unit_dims(emit, value, units)
            extra = drop_unit_dims(emit, extra, units) if extra is not None else None
            dims = [d for axis, d in enumerate(dims) if axis not in units]
            accesses = without_new_axes(accesses)
        olds = _lower_update(ctx, kind, host, accesses, value, extra, dims, wants_old)
        return expand_dims(emit, olds, units) if olds is not None else None

    rule.__name__ = f"lower_atomic_{kind.value}"
    rule.__doc__ = f"``atomic_{kind.value}``: read-modify-write returning the old values."
    return rule


def _lower_update(ctx: RuleContext, kind: Atomic, host: HostTensor, accesses: list[DimAccess], value: Tensor,
                  extra: Tensor | None, dims: list[Any], wants_old: bool) -> Tensor | None:
    """The read-modify-write of an atomic at ``accesses`` (no ``None`` among them); the old
    values when ``wants_old``."""
    emit = ctx.emit
    dest = host.value
    combine = _atomic_combiner(emit, kind, dest.dtype)
    if any(a.kind is AccessKind.TENSOR for a in accesses):
        mask = jagged_lane_mask(ctx, dims, value)
        new_dest, olds = scatter(emit, dest, host.name, accesses, value, mask, combine, extra, keep_old=wants_old)
        ctx.write(new_dest)
        return olds

    def body(args: list[str], _i: Callable[[int], str]) -> str:
        return combine(args[0], args[1], args[2] if len(args) > 2 else "")

    def access(current: list[Tensor]) -> list[Tensor]:
        old_valid = extract_valid(emit, current[0], accesses)
        inputs = [old_valid, valid_region(emit, value, accesses)]
        if extra is not None:
            inputs.append(valid_region(emit, extra, accesses))
        combined = emit.elementwise(inputs, old_valid.shape, dest.dtype, body, hint="rmw")
        stored = insert_valid(emit, current[0], mask_jagged(ctx, dims, combined, old_valid), accesses)
        return [stored, pad_to_tile(emit, old_valid, accesses)] if wants_old else [stored]

    inside = positions_inside(emit, dest, host.name, accesses)
    current = [dest]
    if wants_old and inside is not None:  # outside the destination the old values read 0
        current.append(emit.fill(value_shape(accesses), dest.dtype, 0, value_dynamic_sizes(emit, accesses)))
    results = guarded_update(emit, inside, access, current)
    ctx.write(results[0])
    return results[1] if wants_old else None


for _kind in Atomic:
    register_lowering(getattr(atomic_ops, f"atomic_{_kind.value}"), writes=0)(_lower_atomic(_kind))
