"""Small queries over MLIR IR shared by the CPU pipelines' rewrites."""

from __future__ import annotations

from collections.abc import Callable

from torch_mlir import ir

__all__ = [
    "constant_index", "defined_in", "defining_op", "indexing_maps", "is_plain_contraction", "iterator_types", "ops_where",
    "slice_offsets_and_sizes",
]


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


def defined_in(value: ir.Value, op: ir.Operation) -> bool:
    """Whether ``value`` is a result of ``op``, or defined in its regions (at any depth)."""
    owner = value.owner
    node = owner.owner.operation if isinstance(owner, ir.Block) else owner.operation
    while node.name != "builtin.module":
        if node == op:
            return True
        node = node.parent
    return False


def constant_index(value: ir.Value) -> int | None:
    """The integer an ``arith.constant`` defines; None for any other value."""
    owner = defining_op(value)
    if owner is None or owner.name != "arith.constant":
        return None
    attr = owner.attributes["value"]
    return attr.value if isinstance(attr, ir.IntegerAttr) else None


def slice_offsets_and_sizes(op: ir.Operation, first_dynamic: int) -> tuple[list, list]:
    """Offsets and sizes of a slice op (``extract_slice``, ``insert_slice``, ...), each an
    int or the ``Value`` of a dynamic one; its dynamic operands start at ``first_dynamic``."""
    dynamic_marker = ir.ShapedType.get_dynamic_size()
    dynamic = iter(list(op.operands)[first_dynamic:])
    offsets = [next(dynamic) if o == dynamic_marker else o for o in ir.DenseI64ArrayAttr(op.attributes["static_offsets"])]
    sizes = [next(dynamic) if s == dynamic_marker else s for s in ir.DenseI64ArrayAttr(op.attributes["static_sizes"])]
    return offsets, sizes


def indexing_maps(op: ir.Operation) -> list[ir.AffineMap]:
    """A linalg op's indexing maps, one per operand."""
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def iterator_types(op: ir.Operation) -> list[str]:
    """A ``linalg.generic``'s iterator types: ``parallel`` or ``reduction`` per loop."""
    return [str(a).rsplit("<", 1)[-1].rstrip(">") for a in ir.ArrayAttr(op.attributes["iterator_types"])]


_CONTRACTIONS = ("linalg.matmul", "linalg.batch_matmul")
_PLAIN_MAPS = (
    ["(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"],
    ["(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d3, d2)", "(d0, d1, d2, d3) -> (d0, d1, d2)"],
)


def is_plain_contraction(op: ir.Operation) -> bool:
    """A ``linalg.matmul`` / ``batch_matmul`` on tensors with no transposed or broadcast operand."""
    if op.name not in _CONTRACTIONS:
        return False
    if "indexing_maps" in op.attributes and [str(m) for m in indexing_maps(op)] not in _PLAIN_MAPS:
        return False  # transposed or broadcast operands
    return all(isinstance(v.type, ir.RankedTensorType) for v in op.operands)
