"""One-element slice stores become ``tensor.insert``: a store in place, not a heap buffer.

Kernels store through tensor indices one element at a time, emitted as a one-element
``tensor.insert_slice`` of a ``tensor.from_elements`` (which IREE runs correctly, see
docs/downstream.md). Bufferized as they are, each store allocates its one-element buffer
on the heap; as ``tensor.insert`` it is a ``memref.store`` in place. No upstream pattern
folds this pair (the tensor dialect's canonicalizations fold slices of slices and
``from_elements`` of extracts, not this).
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import defining_op, ops_where

__all__ = ["store_single_elements_in_place"]


def store_single_elements_in_place(module: ir.Module) -> None:
    """Turn one-element ``tensor.insert_slice`` ops of a ``tensor.from_elements`` into ``tensor.insert``."""
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()

    def one_element_store(op: ir.Operation) -> bool:
        if op.name != "tensor.insert_slice":
            return False
        source = defining_op(op.operands[0])
        return (
            source is not None
            and source.name == "tensor.from_elements"
            and len(source.operands) == 1
            and all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
            and all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
        )

    found = ops_where(module, one_element_store)
    index = ir.IndexType.get()
    for op in found:
        source, dest, dynamic_offsets = op.operands[0], op.operands[1], list(op.operands[2:])
        with ir.InsertionPoint(op), op.location:
            indices = []
            for offset in ir.DenseI64ArrayAttr(op.attributes["static_offsets"]):
                if offset == dynamic:
                    indices.append(dynamic_offsets.pop(0))
                else:
                    constant = ir.Operation.create(
                        "arith.constant", results=[index], attributes={"value": ir.IntegerAttr.get(index, offset)})
                    indices.append(constant.result)
            insert = ir.Operation.create(
                "tensor.insert", results=[dest.type], operands=[source.owner.operands[0], dest, *indices])
        op.result.replace_all_uses_with(insert.result)
        element = source.owner
        op.erase()
        if not list(element.result.uses):
            element.erase()
