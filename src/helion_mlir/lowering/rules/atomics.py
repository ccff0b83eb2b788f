"""Element-by-element read-modify-write: scatters (stores at tensor indices) and
Helion's atomics, as one ``linalg.generic`` over the value's lanes that inserts into,
or combines with, the destination."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from helion.language import atomic_ops
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import element_type
from ..indexing import (
    extract_valid,
    host_operand,
    pad_to_tile,
    resolve_index,
    specialized_sizes,
)
from ..registry import register_lowering
from ..values import Tensor
from .memory import Combine, insert_valid, scatter, valid_region, value_to_store

if TYPE_CHECKING:
    from ..visitor import IRVisitor


def _atomic_combiner(v: "IRVisitor", kind: str, dtype: torch.dtype) -> Combine:
    elt = element_type(dtype)
    is_float = dtype.is_floating_point
    ops = {
        "add": "arith.addf" if is_float else "arith.addi",
        "and": "arith.andi",
        "or": "arith.ori",
        "xor": "arith.xori",
        "max": "arith.maximumf" if is_float else "arith.maxsi",
        "min": "arith.minimumf" if is_float else "arith.minsi",
    }

    def combine(old: str, new: str, extra: str) -> str:
        out = v.ops.fresh("rmw")
        if kind == "xchg":
            return new
        if kind == "cas":  # new is the expected value, extra the replacement
            eq = v.ops.fresh("eq")
            pred = "arith.cmpf oeq" if is_float else "arith.cmpi eq"
            v.ops.op(f"{eq} = {pred}, {old}, {new} : {elt}")
            v.ops.op(f"{out} = arith.select {eq}, {extra}, {old} : {elt}")
            return out
        if kind in ("and", "or", "xor") and is_float:
            raise HelionMLIRError(f"atomic_{kind} needs an integer tensor")
        v.ops.op(f"{out} = {ops[kind]} {old}, {new} : {elt}")
        return out

    return combine


def _lower_atomic(kind: str) -> Callable[["IRVisitor", fx.Node], Tensor | None]:
    def rule(v: "IRVisitor", node: fx.Node) -> Tensor | None:
        name, dest = host_operand(v, node.args[0])
        value_arg = node.args[2]
        meta = value_arg.meta.get("val") if isinstance(value_arg, fx.Node) else None
        accesses = resolve_index(v, dest, node.args[1], list(meta.shape) if isinstance(meta, torch.Tensor) else None,
                                 specialized_sizes(v, name, dest))
        if any(a.kind == "newaxis" for a in accesses):
            raise HelionMLIRError("atomics through a None (new axis) index are not supported")
        value = value_to_store(v, value_arg, dest, accesses)
        extra = None
        if kind == "cas":
            extra = value_to_store(v, node.args[3], dest, accesses)
        combine = _atomic_combiner(v, kind, dest.dtype)
        wants_old = v.is_read(node)  # the old values are built only for a kernel that reads them
        if any(a.kind == "tensor" for a in accesses):
            new_dest, olds = scatter(v, dest, accesses, value, None, combine, extra, keep_old=wants_old)
            v.state[name] = new_dest
            return olds
        old_valid = extract_valid(v, dest, accesses)
        new_valid = valid_region(v, value, accesses)
        inputs = [old_valid, new_valid] + ([valid_region(v, extra, accesses)] if extra is not None else [])

        def body(args: list[str], _i: Callable[[int], str]) -> str:
            return combine(args[0], args[1], args[2] if len(args) > 2 else "")

        combined = v.ops.elementwise(inputs, old_valid.shape, dest.dtype, body, hint="rmw")
        v.state[name] = insert_valid(v, dest, combined, accesses)
        return pad_to_tile(v, old_valid, accesses) if wants_old else None

    rule.__name__ = f"lower_atomic_{kind}"
    rule.__doc__ = f"``atomic_{kind}``: read-modify-write returning the old values."
    return rule


for _kind in ("add", "and", "or", "xor", "max", "min", "xchg", "cas"):
    register_lowering(getattr(atomic_ops, f"atomic_{_kind}"))(_lower_atomic(_kind))
