"""Small fixed-size buffers on the stack instead of the heap.

A tile body that allocates a row block or an accumulator on the heap pays ``malloc`` and
``free`` per tile; on the stack it pays nothing. Workers of torch's OpenMP runtime (libgomp)
get the process's default thread stacks (the stack limit, 8 MiB on common Linux systems;
2 MiB when it is unlimited) and a tile rarely holds more than a few such buffers, hence
:data:`STACK_ALLOCATION_LIMIT`.

Stands in for upstream's ``promote-buffers-to-stack``, which also promotes allocations
inside sequential loops (each iteration would grow the stack) and, by default, only
rank-1 ones.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from ..ir_walk import ops_where

__all__ = ["STACK_ALLOCATION_LIMIT", "promote_small_buffers_to_stack"]

#: Largest buffer (bytes) of fixed size that goes on the stack instead of the heap.
STACK_ALLOCATION_LIMIT = 1 << 16


def promote_small_buffers_to_stack(module: ir.Module, limit: int = STACK_ALLOCATION_LIMIT) -> int:
    """Put small fixed-size buffers of function and parallel-loop bodies on the stack.

    A ``memref.alloc`` of at most ``limit`` bytes, static and not escaping, directly in a
    function or parallel-loop body becomes a ``memref.alloca`` (never inside a sequential
    loop, where every iteration would grow the stack). Returns how many.
    """
    promoted = 0
    for alloc in ops_where(module, lambda op: op.name == "memref.alloc"):
        type_ = alloc.results[0].type
        parent = alloc.parent
        if parent is None or parent.name not in ("func.func", "scf.forall") or not type_.has_static_shape:
            continue
        size = max(1, getattr(type_.element_type, "width", 64) // 8) * math.prod(type_.shape)
        if size > limit or any(use.owner.name in ("func.return", "scf.yield") for use in alloc.results[0].uses):
            continue
        with ir.InsertionPoint(alloc), alloc.location:
            alloca = ir.Operation.create(
                "memref.alloca",
                results=[type_],
                operands=list(alloc.operands),
                attributes={name: alloc.attributes[name] for name in alloc.attributes},
            )
        alloc.results[0].replace_all_uses_with(alloca.result)
        alloc.erase()
        promoted += 1
    return promoted
