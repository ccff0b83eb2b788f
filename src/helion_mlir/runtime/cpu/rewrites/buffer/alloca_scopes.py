"""Stack allocation scopes of parallel loop bodies, lowered before their loops become blocks.

``convert-scf-to-openmp`` wraps each parallel loop body that allocates on the stack in a
``memref.alloca_scope``, so that every iteration frees what it allocated. Upstream lowers
the scope to ``llvm.intr.stacksave`` / ``stackrestore`` in ``finalize-memref-to-llvm``, but
``convert-scf-to-cf`` runs first and gives the scope's body several blocks, which the op
does not allow. This does the same lowering earlier, while the body is still one block.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import ops_where

__all__ = ["inline_alloca_scopes"]


def inline_alloca_scopes(module: ir.Module) -> None:
    """``memref.alloca_scope`` -> ``llvm.intr.stacksave``, its body, ``llvm.intr.stackrestore``."""
    pointer = ir.Type.parse("!llvm.ptr")
    for scope in reversed(ops_where(module, lambda op: op.name == "memref.alloca_scope")):
        ops = [op.operation for op in scope.regions[0].blocks[0].operations]
        with ir.InsertionPoint(scope), scope.location:
            saved = ir.Operation.create("llvm.intr.stacksave", results=[pointer])
        for op in ops[:-1]:
            op.move_before(scope)
        with ir.InsertionPoint(scope), scope.location:
            ir.Operation.create("llvm.intr.stackrestore", operands=[saved.result])
        scope.erase()
