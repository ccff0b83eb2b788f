"""bf16 values (and vectors of them) are loaded and stored as i16 of the same bits.

x86 instruction selection on CPUs with AVX512-BF16 but no AVX512-FP16 has no pattern for
some bf16 stores that LLVM's loop vectorizer creates (``LLVM ERROR: Cannot select ...
store (s16)``, which aborts the process). The arithmetic on bf16 is already integer code
(``arith-emulate-unsupported-floats``, ``arith-expand``); with this, a bf16 copy is an i16
copy and no bf16 value is loaded or stored. A workaround for an LLVM back-end gap, with
no MLIR counterpart; it runs on the LLVM dialect, last.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import ops_where

__all__ = ["move_bf16_through_memory_as_i16"]


def move_bf16_through_memory_as_i16(module: ir.Module) -> None:
    """Every ``llvm.load`` / ``llvm.store`` of bf16 becomes one of i16 and an ``llvm.bitcast``."""
    bf16, i16 = ir.BF16Type.get(), ir.IntegerType.get_signless(16)

    def as_i16(type_: ir.Type) -> ir.Type | None:
        if type_ == bf16:
            return i16
        if isinstance(type_, ir.VectorType) and type_.element_type == bf16:
            return ir.VectorType.get(type_.shape, i16, loc=ir.Location.unknown())
        return None

    found = ops_where(module, lambda op: (op.name == "llvm.load" and as_i16(op.result.type) is not None) or (
        op.name == "llvm.store" and as_i16(op.operands[0].type) is not None))
    for op in found:
        attributes = {name: op.attributes[name] for name in op.attributes}
        with ir.InsertionPoint(op), op.location:
            if op.name == "llvm.load":
                bits = ir.Operation.create("llvm.load", results=[as_i16(op.result.type)],
                                           operands=list(op.operands), attributes=attributes)
                value = ir.Operation.create("llvm.bitcast", results=[op.result.type], operands=[bits.result])
                op.result.replace_all_uses_with(value.result)
            else:
                value, address = op.operands[0], op.operands[1]
                bits = ir.Operation.create("llvm.bitcast", results=[as_i16(value.type)], operands=[value])
                ir.Operation.create("llvm.store", operands=[bits.result, address], attributes=attributes)
        op.erase()
