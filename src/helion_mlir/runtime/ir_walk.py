"""Small queries over MLIR IR shared by the CPU pipelines' Python rewrites."""

from __future__ import annotations

from collections.abc import Callable

from torch_mlir import ir

__all__ = ["defining_op", "ops_where"]


def ops_where(root: ir.Module | ir.Operation | ir.OpView, wanted: Callable[[ir.Operation], bool]) -> list[ir.Operation]:
    """Every op nested in ``root`` (in walk order) for which ``wanted`` holds.

    Collected before a rewrite touches any of them: erasing or replacing ops while MLIR
    walks the IR is not safe.
    """
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if wanted(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    (root.operation if isinstance(root, (ir.Module, ir.OpView)) else root).walk(visit)
    return found


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines ``value``; None for a block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation
