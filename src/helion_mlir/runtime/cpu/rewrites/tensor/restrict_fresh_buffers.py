"""Let one-shot bufferization accept the ``to_tensor`` ops ``tm-tensor-bufferize`` leaves.

torch-mlir's ``tm-tensor-bufferize`` (which bufferizes ``tm_tensor`` ops: scans, scatters,
sorts) wraps each output buffer it allocates in a ``bufferization.to_tensor`` without the
``restrict`` flag, and one-shot analysis refuses a ``to_tensor`` without it. A buffer
straight from ``memref.alloc`` with a single ``to_tensor`` user is aliased by no other
tensor, which is what ``restrict`` asserts. No upstream pass sets the flag; the fix
belongs in torch-mlir's pass.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import defining_op, ops_where

__all__ = ["mark_fresh_buffers_restrict"]


def mark_fresh_buffers_restrict(module: ir.Module) -> None:
    """``restrict`` on every ``to_tensor`` that is the only view of a fresh ``memref.alloc``."""

    def sole_view_of_fresh_buffer(op: ir.Operation) -> bool:
        if op.name != "bufferization.to_tensor" or "restrict" in op.attributes:
            return False
        buffer = op.operands[0]
        source = defining_op(buffer)
        views = [use for use in buffer.uses if use.owner.name == "bufferization.to_tensor"]
        return source is not None and source.name == "memref.alloc" and len(views) == 1

    for op in ops_where(module, sole_view_of_fresh_buffer):
        op.attributes["restrict"] = ir.UnitAttr.get()
