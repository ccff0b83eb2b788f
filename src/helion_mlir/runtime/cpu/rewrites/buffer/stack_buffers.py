"""Small fixed-size buffers on the stack instead of the heap.

A tile body that allocates a row block or an accumulator on the heap pays ``malloc`` and
``free`` per tile; on the stack it pays nothing. Workers of torch's OpenMP runtime (libgomp)
get the process's default thread stacks (the stack limit, 8 MiB on common Linux systems;
2 MiB when it is unlimited) and a tile rarely holds more than a few such buffers, hence
:data:`STACK_ALLOCATION_LIMIT` per buffer and :data:`STACK_SCOPE_LIMIT` per scope.

A buffer allocated in the body of a loop, also in a branch there (a kernel's ``if flag:``
choosing a tile), goes on the stack when no view of it outlives one iteration: a loop body
is an allocation scope in MLIR, and :mod:`.alloca_scopes` frees each iteration's stack
buffers (``llvm.intr.stacksave`` / ``stackrestore``), so the stack does not grow with the
trip count; a parallel loop's body gets an ``alloca_scope`` from ``convert-scf-to-openmp``.
A buffer carried to the next iteration or out of the loop stays on the heap, as does one in
an ``scf.while`` (not an allocation scope) or in a region run per element (a linalg body).

Stands in for upstream's ``promote-buffers-to-stack``, which promotes nothing inside a loop
(it looks for an allocation scope the buffer does not leave, and stops at the first loop)
and has no limit per scope. Upstream's ``buffer-hoisting`` does not move a buffer out of the
branch that holds all its uses, nor ``buffer-loop-hoisting`` out of an ``scf.if``, which
would have left it in the function's body.
"""

from __future__ import annotations

import logging
import math

from torch_mlir import ir

from ..ir_walk import ops_where
from .alloca_scopes import SCOPED_LOOPS, enclosing_body

__all__ = ["STACK_ALLOCATION_LIMIT", "STACK_SCOPE_LIMIT", "promote_small_buffers_to_stack"]

log = logging.getLogger(__name__)

#: Largest buffer (bytes) of fixed size that goes on the stack instead of the heap.
STACK_ALLOCATION_LIMIT = 1 << 16

#: Most bytes of stack buffers one scope gets: a function's body, or one iteration of a loop
#: (scopes nest: a function, a parallel tile and two loops in it hold 1 MiB at most).
STACK_SCOPE_LIMIT = 4 * STACK_ALLOCATION_LIMIT

# Automatic allocation scopes: ops whose body frees its stack buffers at its end, once per run
# or per iteration (a parallel loop's through the alloca_scope convert-scf-to-openmp gives it,
# the others' through :mod:`.alloca_scopes`).
_SCOPES = ("func.func", "memref.alloca_scope", "scf.forall", *SCOPED_LOOPS)
# Uses after which a buffer may be reached from anywhere.
_ESCAPING_USES = (
    "func.call", "func.call_indirect", "bufferization.to_tensor", "memref.extract_aligned_pointer_as_index",
)


def _byte_size(type_: ir.MemRefType) -> int:
    """Bytes of a static memref (an ``index`` or vector element counted as its full size)."""
    element = type_.element_type
    lanes = math.prod(element.shape) if isinstance(element, ir.VectorType) else 1
    width = getattr(element.element_type if isinstance(element, ir.VectorType) else element, "width", 64)
    return max(1, width // 8) * lanes * math.prod(type_.shape)


def _is_buffer(value: ir.Value) -> bool:
    return isinstance(value.type, (ir.MemRefType, ir.UnrankedMemRefType))


def _stays_in(alloc: ir.Operation, scope: ir.Operation) -> bool:
    """Whether no view of ``alloc``'s buffer leaves one run of ``scope``'s body: none is
    yielded by its terminator (to the next iteration, out of the loop or the function) or
    passed where it could be kept. Views yielded by nested ops are followed through them."""
    pending, seen = [alloc.results[0]], set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        for use in value.uses:
            user = use.owner.operation
            if user.name in _ESCAPING_USES:
                return False
            terminator = user.has_trait(ir.IsTerminatorTrait)
            if terminator and user.parent == scope:
                return False
            # A terminator of a nested op yields into its results (and, in a loop, its
            # region arguments); any other op may return a view of its buffer operands.
            holder = user.parent if terminator else user
            pending.extend(result for result in holder.results if _is_buffer(result))
            for region in holder.regions:
                for block in region.blocks:
                    pending.extend(argument for argument in block.arguments if _is_buffer(argument))
    return True


def promote_small_buffers_to_stack(module: ir.Module, limit: int = STACK_ALLOCATION_LIMIT,
                                   scope_limit: int = STACK_SCOPE_LIMIT) -> int:
    """Put small fixed-size buffers of function and loop bodies on the stack.

    A ``memref.alloc`` of at most ``limit`` bytes, static, in the body of a function or loop
    (or a branch in it) that no view of it outlives becomes a ``memref.alloca``, while its
    scope holds at most ``scope_limit`` bytes of them. Returns how many.
    """
    promoted = 0
    used: dict[ir.Block, int] = {}
    for alloc in ops_where(module, lambda op: op.name == "memref.alloc"):
        type_ = alloc.results[0].type
        owner, block = enclosing_body(alloc)
        if owner.name not in _SCOPES or not type_.has_static_shape:
            continue
        size = _byte_size(type_)
        if size > limit or not _stays_in(alloc, owner):
            continue
        if used.get(block, 0) + size > scope_limit:
            log.debug("%s stays on the heap: its %s body has %d bytes of stack buffers", type_, owner.name,
                      used[block])
            continue
        used[block] = used.get(block, 0) + size
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
