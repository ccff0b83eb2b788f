"""A linalg op that consumes a tensor chosen by an ``scf.if`` is computed in each branch.

A kernel with an option (``if log_target: kl = ...  else: kl = ...`` and then
``torch.sum(kl, -1)``) becomes an ``scf.if`` yielding the whole elementwise tile, which
bufferization gives a buffer of its own (a heap allocation per tile for a large one), and a
reduction reading it back. With the reduction cloned into both branches, elementwise fusion
makes each branch one loop over the inputs and the tile is never stored. Measured on one
thread (KL divergence with a log target, 4096x1024 f32, tiles [16, 1024]): 2.48 ms before,
1.62 ms after (Inductor 1.74 ms in the same runs).

Only a consumer whose other operands are defined before the ``scf.if`` and that is the
chosen tensor's only use, so that nothing is computed twice. Upstream has no pattern that
moves an op into the branches of an ``scf.if``.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import scf

from .ir_walk import defining_op, ops_where

__all__ = ["compute_consumers_in_branches"]


def _available_before(value: ir.Value, anchor: ir.Operation) -> bool:
    """``value`` is defined before ``anchor`` (in its block, or around it)."""
    op = defining_op(value)
    if op is None:
        owner = value.owner  # a block argument: of anchor's block or of one around it
        return not _inside(owner.owner, anchor)
    if op.block == anchor.block:
        return op.is_before_in_block(anchor)
    return not _inside(op, anchor)


def _inside(op: ir.Operation, anchor: ir.Operation) -> bool:
    """``op`` is nested in ``anchor``'s regions."""
    parent = op.parent
    while parent is not None:
        if parent == anchor:
            return True
        parent = parent.parent if parent.name != "builtin.module" else None
    return False


def _single_linalg_consumer(if_op: ir.Operation, index: int) -> ir.Operation | None:
    uses = list(if_op.results[index].uses)
    if len(uses) != 1:
        return None
    consumer = uses[0].owner.operation
    if consumer.name != "linalg.generic" or consumer.block != if_op.block:
        return None
    others = [v for v in consumer.operands if v != if_op.results[index]]
    if len(others) != len(consumer.operands) - 1 or not all(_available_before(v, if_op) for v in others):
        return None
    return consumer


def _sink(if_op: ir.Operation, index: int, consumer: ir.Operation) -> ir.Operation:
    """Replace ``if_op`` by one yielding ``consumer``'s results computed in each branch in
    place of its result ``index``."""
    chosen = if_op.results[index]
    kept = [i for i in range(len(if_op.results)) if i != index]
    types = [if_op.results[i].type for i in kept] + [r.type for r in consumer.results]
    condition = if_op.operands[0]
    with ir.InsertionPoint(if_op), if_op.location:
        new_if = scf.IfOp(condition, types, has_else=True)
    for old_region, new_block in zip(if_op.regions, (new_if.then_block, new_if.else_block)):
        old_block = old_region.blocks[0]
        old_yield = list(old_block.operations)[-1]
        yielded = list(old_yield.operands)
        with ir.InsertionPoint(new_block), if_op.location:
            new_yield = scf.YieldOp([yielded[i] for i in kept])
        for op in list(old_block.operations)[:-1]:
            op.move_before(new_yield)
        clone = consumer.clone(ip=ir.InsertionPoint(new_yield))
        for position, operand in enumerate(clone.operands):
            if operand == chosen:
                clone.operands[position] = yielded[index]
        new_yield.erase()
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
    for if_op in ops_where(module, lambda op: op.name == "scf.if" and len(op.regions[1].blocks) > 0):
        while True:  # the new scf.if's results may have single consumers in turn (a sum after an exp)
            found = next(((index, consumer) for index, result in enumerate(if_op.results)
                          if isinstance(result.type, ir.RankedTensorType)
                          and (consumer := _single_linalg_consumer(if_op, index)) is not None), None)
            if found is None:
                break
            if_op = _sink(if_op, *found)
            moved += 1
    return moved
