"""Stack allocation scopes, freed as MLIR defines them, before their loops become blocks.

In MLIR the body of an ``scf.for`` or ``scf.parallel`` (like an ``scf.forall``'s or a
function's) is an automatic allocation scope: what one iteration allocates on the stack
lives for that iteration alone (canonicalization drops a ``memref.alloca_scope`` wrapping
such a body for that reason). But ``convert-scf-to-cf`` frees nothing per iteration: a loop
allocating on the stack would grow the stack with its trip count. Each such loop body
holding a ``memref.alloca`` (directly or in a branch) is given an ``llvm.intr.stacksave``
at its start and an ``llvm.intr.stackrestore`` before its terminator.

``convert-scf-to-openmp`` wraps each parallel loop body that allocates on the stack in a
``memref.alloca_scope``. Upstream lowers the scope to the same pair in
``finalize-memref-to-llvm``, but ``convert-scf-to-cf`` runs first and gives the scope's body
several blocks, which the op does not allow. This does the same lowering earlier, while the
body is still one block.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import ops_where

__all__ = ["SCOPED_LOOPS", "enclosing_body", "lower_allocation_scopes"]

#: Loops whose body is an allocation scope in MLIR but whose control-flow lowering frees nothing.
SCOPED_LOOPS = ("scf.for", "scf.parallel")
# Ops whose regions run at most once per run of the op: their stack buffers belong to the
# body around them.
_BRANCHES = ("scf.if", "scf.execute_region", "scf.index_switch")


def enclosing_body(op: ir.Operation) -> tuple[ir.Operation, ir.Block]:
    """The op whose body ``op`` runs in once per run of that body (looking through
    branches), and that body's block."""
    child, parent = op, op.parent
    while parent.name in _BRANCHES:
        child, parent = parent, parent.parent
    return parent, child.block


def _save_and_restore(first: ir.Operation, end: ir.Operation) -> None:
    """``llvm.intr.stacksave`` right before ``first``, ``stackrestore`` right before ``end``."""
    with ir.InsertionPoint(first), first.location:
        saved = ir.Operation.create("llvm.intr.stacksave", results=[ir.Type.parse("!llvm.ptr")])
    with ir.InsertionPoint(end), end.location:
        ir.Operation.create("llvm.intr.stackrestore", operands=[saved.result])


def lower_allocation_scopes(module: ir.Module) -> None:
    """``memref.alloca_scope`` -> ``llvm.intr.stacksave``, its body, ``llvm.intr.stackrestore``;
    the same pair around each iteration of a loop that allocates on the stack."""
    # Before the scopes are inlined: their buffers are freed by their own pair.
    allocas = ops_where(module, lambda op: op.name == "memref.alloca")
    bodies = {block: None for owner, block in map(enclosing_body, allocas) if owner.name in SCOPED_LOOPS}
    for scope in reversed(ops_where(module, lambda op: op.name == "memref.alloca_scope")):
        ops = [op.operation for op in scope.regions[0].blocks[0].operations]
        for op in ops[:-1]:
            op.move_before(scope)
        _save_and_restore(ops[0] if len(ops) > 1 else scope, scope)
        scope.erase()
    for body in bodies:
        operations = body.operations
        _save_and_restore(operations[0], operations[len(operations) - 1])
