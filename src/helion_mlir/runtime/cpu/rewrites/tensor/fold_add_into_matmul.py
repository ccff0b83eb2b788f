"""``acc + matmul(a, b, zeros)`` becomes ``matmul(a, b, acc)``: the products are added into the accumulator.

Helion kernels accumulate ``torch.matmul`` results into a carried tile (``acc = acc +
a @ b``), which torch-mlir lowers to a ``linalg.matmul`` into a zero-filled tensor and an
elementwise ``linalg.generic`` add. Folded, the tile is not filled with zeros at every
step nor read again by a second pass. The products are then added to ``acc`` one by one
instead of being summed first, a rounding difference of the kind ``torch.addmm`` makes too.

Stands in for upstream's ``FoldAddIntoDest`` (``transform.apply_patterns.linalg.
fold_add_into_dest``), which matches the named ``linalg.add`` only, while torch-mlir emits
the add as a ``linalg.generic``. Run after ``linalg-specialize-generic-ops`` the pattern
folds the same adds (the matmul and bmm examples lower to the same code), but the
specialization also turns other generics into named ops (broadcasts, transposes), which
changed the code of 193 of the examples' 898 fast-pipeline lowerings (449 modules, one
and two threads), kernels with no matmul among them.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from ..ir_walk import defining_op, indexing_maps, is_plain_contraction, ops_where

__all__ = ["fold_add_into_matmul"]


def _is_zero_fill(value: ir.Value) -> bool:
    fill = defining_op(value)
    if fill is None or fill.name != "linalg.fill":
        return False
    constant = defining_op(fill.operands[0])
    if constant is None or constant.name != "arith.constant":
        return False
    attr = constant.attributes["value"]
    return isinstance(attr, ir.FloatAttr) and attr.value == 0.0 and not math.copysign(1.0, attr.value) < 0


def _is_elementwise_add(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return False
    maps = indexing_maps(op)
    identity = ir.AffineMap.get_identity(maps[0].n_dims)
    if any(m != identity for m in maps):
        return False
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if [o.name for o in body] != ["arith.addf", "linalg.yield"]:
        return False
    args = list(block.arguments)
    return set(body[0].operands) == {args[0], args[1]} and body[1].operands[0] == body[0].result


def fold_add_into_matmul(module: ir.Module) -> int:
    """``add(y, matmul(a, b, zeros))`` -> ``matmul(a, b, y)``; returns how many were folded."""
    adds = ops_where(module, _is_elementwise_add)
    folded = 0
    for add in adds:
        for index in (0, 1):
            matmul = defining_op(add.operands[index])
            other = add.operands[1 - index]
            if (
                matmul is None
                or not is_plain_contraction(matmul)
                or len(list(add.operands[index].uses)) != 1
                or not _is_zero_fill(matmul.operands[2])
                or other.type != matmul.results[0].type
            ):
                continue
            matmul.move_before(add)
            matmul.operands[2] = other
            add.results[0].replace_all_uses_with(matmul.results[0])
            add.erase()
            folded += 1
            break
    return folded
