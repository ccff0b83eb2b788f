"""One buffer per loop-carried tensor: a final store of each yielded value into its carried tensor.

One-shot bufferization gives an ``scf.for`` iteration argument one buffer for the whole
loop only when the yielded value is computed in that argument (destination-passing
style); otherwise each iteration allocates a new buffer (and copies it back). Kernels
often yield a value computed elsewhere (an elementwise op into an empty tensor, say).
Ending the body with a full-size ``tensor.insert_slice`` of the yielded value into the
carried tensor lets bufferization compute the value in place or copy it once, with no
allocation per iteration. No upstream pass does this: bufferization has no option to
prefer the carried buffer, and ``eliminate-empty-tensors`` only reaches empty tensors
that end up in a ``tensor.insert_slice`` already.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import ops_where
from .destination_style import computed_in, replace_terminator, store_full

__all__ = ["store_yields_in_carried_buffers"]


def store_yields_in_carried_buffers(module: ir.Module) -> int:
    """End each ``scf.for`` body with a store of every yielded value into its carried tensor.

    Only for static carried tensors the body does not already update in place; returns how
    many stores were added.
    """
    stored = 0
    for loop in ops_where(module, lambda op: op.name == "scf.for"):
        body = loop.regions[0].blocks[0]
        terminator = list(body.operations)[-1].operation
        yielded = list(terminator.operands)
        changed = False
        for index, (carried, value) in enumerate(zip(list(body.arguments)[1:], yielded)):
            type_ = carried.type
            if not isinstance(type_, ir.RankedTensorType) or not type_.has_static_shape or computed_in(value, carried):
                continue
            yielded[index] = store_full(value, carried, terminator)
            changed = True
            stored += 1
        if changed:
            replace_terminator(terminator, yielded)
    return stored
