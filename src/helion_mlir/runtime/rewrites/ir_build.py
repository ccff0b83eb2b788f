"""Small IR builders shared by the CPU pipelines' rewrites."""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import func, tensor, vector

from .ir_walk import slice_offsets_and_sizes

__all__ = ["declare_pure_function", "flattened", "remade_slice", "slice_parts"]

_DYNAMIC = ir.ShapedType.get_dynamic_size()


def declare_pure_function(module: ir.Module, name: str, arguments: list[ir.Type], result: ir.Type) -> None:
    """A private ``func.func`` declaration of ``name`` (once per module); pure, like libm's."""
    table = ir.SymbolTable(module.operation)
    if name in table:
        return
    with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
        declaration = func.FuncOp(name, ir.FunctionType.get(arguments, [result]), visibility="private")
    declaration.attributes["llvm.readnone"] = ir.UnitAttr.get()


def flattened(value: ir.Value, length: int) -> ir.Value:
    """``value`` (a vector of ``length`` elements) as a one-dimensional vector."""
    type_ = ir.VectorType.get([length], value.type.element_type)
    return value if value.type == type_ else vector.shape_cast(type_, value)


def slice_parts(op: ir.Operation) -> tuple[list, list, list[int]]:
    """Offsets and sizes (ints or values) and static strides of an ``extract_slice`` / ``insert_slice``."""
    offsets, sizes = slice_offsets_and_sizes(op, 1 if op.name == "tensor.extract_slice" else 2)
    return offsets, sizes, list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))


def remade_slice(op: ir.Operation, offsets: list, sizes: list, *, result_type: ir.Type | None = None,
                 destination: ir.Value | None = None) -> ir.Value:
    """``op`` (an ``extract_slice`` or ``insert_slice``, strides kept) made again before itself
    with ``offsets`` and ``sizes`` (ints or index values), a new ``result_type`` (extract) or
    ``destination`` (insert) if given; ``op``'s uses move to it and ``op`` is erased."""
    strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    dynamic_offsets = [o for o in offsets if isinstance(o, ir.Value)]
    dynamic_sizes = [s for s in sizes if isinstance(s, ir.Value)]
    static_offsets = [_DYNAMIC if isinstance(o, ir.Value) else o for o in offsets]
    static_sizes = [_DYNAMIC if isinstance(s, ir.Value) else s for s in sizes]
    with ir.InsertionPoint(op), op.location:
        if op.name == "tensor.extract_slice":
            made = tensor.extract_slice(result_type or op.results[0].type, op.operands[0], dynamic_offsets,
                                        dynamic_sizes, [], static_offsets, static_sizes, strides)
        else:
            made = tensor.insert_slice(op.operands[0], destination or op.operands[1], dynamic_offsets, dynamic_sizes,
                                       [], static_offsets, static_sizes, strides)
    op.results[0].replace_all_uses_with(made)
    op.erase()
    return made
