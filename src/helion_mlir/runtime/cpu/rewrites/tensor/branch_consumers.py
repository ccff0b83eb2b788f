"""A linalg op that consumes a tensor chosen by an ``scf.if`` is computed in each branch.

A kernel with an option (``if log_target: kl = ...  else: kl = ...`` and then
``torch.sum(kl, -1)``) becomes an ``scf.if`` yielding the whole elementwise tile, which
bufferization gives a buffer of its own (a heap allocation per tile for a large one), and a
reduction reading it back. With the reduction cloned into both branches, elementwise fusion
makes each branch one loop over the inputs and the tile is never stored. Measured on one
thread (KL divergence with a log target, 4096x1024 f32, tiles [16, 1024]): 2.48 ms before,
1.62 ms after (Inductor 1.74 ms in the same runs).

Only a consumer that is the chosen tensor's only use (nothing is computed twice) and whose
other operands are defined before the ``scf.if``, or are views and constants after it that
do not depend on it (moved before it; a loss's weights broadcast with ``w[None, :]``). Upstream has no pattern that
moves an op into the branches of an ``scf.if``.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import scf

from ..ir_walk import defining_op, ops_where

__all__ = ["compute_consumers_in_branches"]


def _available_before(value: ir.Value, anchor: ir.Operation) -> bool:
    """``value``, an operand of an op in ``anchor``'s block, is defined before ``anchor``: a
    value from an enclosing block always is (nothing inside ``anchor`` is visible after it)."""
    op = defining_op(value)
    return op is None or op.block != anchor.block or op.is_before_in_block(anchor)


def _movable_views(value: ir.Value, anchor: ir.Operation) -> list[ir.Operation] | None:
    """The ops to move before ``anchor`` so that ``value`` is defined there: none when it
    already is; a view or constant after ``anchor`` (a weight vector's ``expand_shape``), with
    its operands' own, when it does not depend on ``anchor``; None otherwise."""
    if _available_before(value, anchor):
        return []
    op = defining_op(value)
    plain = not op.regions and op.name.startswith(("tensor.", "arith."))
    if not (plain or op.name == "linalg.fill"):  # a fill's region is its body, not control flow
        return None
    moves: list[ir.Operation] = []
    for operand in op.operands:
        needed = _movable_views(operand, anchor)
        if needed is None:
            return None
        moves += [m for m in needed if m not in moves]
    return [*moves, op]


def _single_linalg_consumer(if_op: ir.Operation, index: int) -> ir.Operation | None:
    """The ``linalg.generic`` that is the only use of result ``index``, when all its other
    operands are defined before ``if_op`` or are views that can be moved there (they are)."""
    chosen = if_op.results[index]
    uses = list(chosen.uses)
    if len(uses) != 1:
        return None
    consumer = uses[0].owner.operation
    if consumer.name != "linalg.generic" or consumer.block != if_op.block:
        return None
    moves: list[ir.Operation] = []
    for value in consumer.operands:
        if value == chosen:
            continue
        needed = _movable_views(value, if_op)
        if needed is None:
            return None
        moves += [m for m in needed if m not in moves]
    for op in moves:
        op.move_before(if_op)
    return consumer


def _sink(if_op: ir.Operation, index: int, consumer: ir.Operation) -> ir.Operation:
    """Replace ``if_op`` by one yielding ``consumer``'s results computed in each branch in
    place of its result ``index``."""
    chosen = if_op.results[index]
    kept = [i for i in range(len(if_op.results)) if i != index]
    types = [if_op.results[i].type for i in kept] + [r.type for r in consumer.results]
    with ir.InsertionPoint(if_op), if_op.location:
        new_if = scf.IfOp(if_op.operands[0], types, has_else=True)
    for old_region, new_block in zip(if_op.regions, (new_if.then_block, new_if.else_block)):
        *body, old_yield = old_region.blocks[0].operations
        yielded = list(old_yield.operands)
        for op in body:
            new_block.append(op)  # moves it
        clone = consumer.clone(ip=ir.InsertionPoint(new_block))
        for position, operand in enumerate(clone.operands):
            if operand == chosen:
                clone.operands[position] = yielded[index]
        with ir.InsertionPoint(new_block), if_op.location:
            scf.YieldOp([yielded[i] for i in kept] + list(clone.results))
    for position, i in enumerate(kept):
        if_op.results[i].replace_all_uses_with(new_if.results[position])
    for position, result in enumerate(consumer.results):
        result.replace_all_uses_with(new_if.results[len(kept) + position])
    consumer.erase()
    if_op.erase()
    return new_if.operation


def compute_consumers_in_branches(module: ir.Module) -> int:
    """Move each single linalg consumer of an ``scf.if``'s tensor result into both branches
    (see the module docstring). Returns how many were moved."""
    moved = 0
    for if_op in ops_where(module, lambda op: op.name == "scf.if" and len(op.results) > 0):
        while True:  # the new scf.if's results may have single consumers in turn (a sum after an exp)
            found = next(((index, consumer) for index, result in enumerate(if_op.results)
                          if isinstance(result.type, ir.RankedTensorType)
                          and (consumer := _single_linalg_consumer(if_op, index)) is not None), None)
            if found is None:
                break
            if_op = _sink(if_op, *found)
            moved += 1
    return moved
