"""Small IR builders shared by the CPU pipelines' rewrites."""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import func, tensor, vector

from .ir_walk import slice_offsets_and_sizes

__all__ = ["declare_pure_function", "extract_slice", "flattened", "insert_slice", "remade_slice", "slice_parts"]

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


def _split(mixed: list) -> tuple[list[ir.Value], list[int]]:
    """Mixed ints and index values -> the values, and the static list with the dynamic marker."""
    return ([m for m in mixed if isinstance(m, ir.Value)],
            [_DYNAMIC if isinstance(m, ir.Value) else m for m in mixed])


def extract_slice(result_type: ir.Type, source: ir.Value, offsets: list, sizes: list,
                  strides: list[int] | None = None) -> ir.Value:
    """``tensor.extract_slice`` with offsets and sizes given as ints or index values (unit strides by default)."""
    (dynamic_offsets, static_offsets), (dynamic_sizes, static_sizes) = _split(offsets), _split(sizes)
    return tensor.extract_slice(result_type, source, dynamic_offsets, dynamic_sizes, [], static_offsets,
                                static_sizes, strides or [1] * len(offsets))


def insert_slice(source: ir.Value, destination: ir.Value, offsets: list, sizes: list,
                 strides: list[int] | None = None) -> ir.Value:
    """``tensor.insert_slice`` with offsets and sizes given as ints or index values (unit strides by default)."""
    (dynamic_offsets, static_offsets), (dynamic_sizes, static_sizes) = _split(offsets), _split(sizes)
    return tensor.insert_slice(source, destination, dynamic_offsets, dynamic_sizes, [], static_offsets,
                               static_sizes, strides or [1] * len(offsets))


def remade_slice(op: ir.Operation, offsets: list, sizes: list) -> ir.Value:
    """``op`` (an ``extract_slice`` or ``insert_slice``, strides kept) made again before itself
    with ``offsets`` and ``sizes`` (ints or index values); ``op``'s uses move to it and ``op`` is
    erased."""
    strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    with ir.InsertionPoint(op), op.location:
        if op.name == "tensor.extract_slice":
            made = extract_slice(op.results[0].type, op.operands[0], offsets, sizes, strides)
        else:
            made = insert_slice(op.operands[0], op.operands[1], offsets, sizes, strides)
    op.results[0].replace_all_uses_with(made)
    op.erase()
    return made
