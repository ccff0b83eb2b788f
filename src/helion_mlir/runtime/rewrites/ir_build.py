"""Small IR builders shared by the CPU pipelines' rewrites."""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import func, vector

__all__ = ["declare_pure_function", "flattened"]


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
