"""A tile's size ``min(ub - iv, step)`` as ``affine.min``, so that upstream loop peeling can fold it.

A Helion tile loop over a size its block does not divide (4100 rows in tiles of 16) computes
each tile's size as ``arith.minsi(ub - iv, step)``, and every tile, not only the last, is
then a run-time-sized slice padded to the block (a copy) with its rows masked: on 4100x1024
f32, row softmax in tiles of 16 took 4.5 ms on one thread against 2.3 ms at 4096 rows.
Upstream ``scf-for-loop-peeling`` splits such a loop into the full tiles and the last one and
folds the tile size to the block in the full ones, which makes their slices static (no
padding copy); measured after peeling: 2.4 ms. It only folds ``affine.min``/``affine.max``
of the loop's induction variable, and the emitted IR uses ``arith.minsi`` (the output types'
common arithmetic), hence :func:`tile_sizes_as_affine_min` first. No upstream pass raises
``arith`` min/max to the affine dialect.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import affine

from .ir_walk import defining_op, ops_where

__all__ = ["tile_sizes_as_affine_min"]


def _loop_bound_and_step(iv: ir.Value) -> tuple[ir.Value, ir.Value] | None:
    """The upper bound and step of the ``scf.for`` whose induction variable ``iv`` is."""
    owner = iv.owner
    if not isinstance(owner, ir.Block) or owner.owner.operation.name != "scf.for" or iv != owner.arguments[0]:
        return None
    loop = owner.owner.operation
    return loop.operands[1], loop.operands[2]


def _tile_size_operands(op: ir.Operation) -> tuple[ir.Value, ir.Value, ir.Value] | None:
    """``(iv, ub, step)`` when ``op`` is ``arith.minsi(ub - iv, step)`` (either order) of an ``scf.for``."""
    for remaining, block in ((0, 1), (1, 0)):
        difference = defining_op(op.operands[remaining])
        if difference is None or difference.name != "arith.subi":
            continue
        iv = difference.operands[1]
        loop = _loop_bound_and_step(iv)
        if loop is not None and difference.operands[0] == loop[0] and op.operands[block] == loop[1]:
            return iv, loop[0], loop[1]
    return None


def tile_sizes_as_affine_min(module: ir.Module) -> int:
    """Every ``arith.minsi(ub - iv, step)`` of an ``scf.for`` -> ``affine.min(ub - iv, step)``; returns how many."""
    found = [(op, operands) for op in ops_where(module, lambda op: op.name == "arith.minsi")
             if (operands := _tile_size_operands(op)) is not None]
    if not found:
        return 0
    with found[0][0].context:
        iv, upper, step = ir.AffineDimExpr.get(0), ir.AffineSymbolExpr.get(0), ir.AffineSymbolExpr.get(1)
        size = ir.AffineMap.get(1, 2, [upper - iv, step])
    for op, operands in found:
        with ir.InsertionPoint(op), op.location:
            smaller = affine.AffineMinOp(size, list(operands)).result
        op.results[0].replace_all_uses_with(smaller)
        op.erase()
    return len(found)
