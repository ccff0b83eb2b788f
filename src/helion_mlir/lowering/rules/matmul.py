"""``hl.dot``: a tile matrix product with an optional accumulator.

Operands keep their dtypes; ``linalg.matmul`` extends them to the accumulator type, so
bf16 x bf16 with an f32 accumulator computes in f32 exactly as the kernel asks. Without
an accumulator a half-precision product still accumulates in f32 and is rounded once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from helion.language import matmul_ops
from torch import fx

from ...errors import HelionMLIRError
from ..registry import register_lowering
from ..values import Tensor

if TYPE_CHECKING:
    from ..visitor import IRVisitor


@register_lowering(matmul_ops.dot)
def lower_dot(v: "IRVisitor", node: fx.Node) -> Tensor:
    a, b = v.tensor(node.args[0]), v.tensor(node.args[1])
    acc_arg = node.args[2] if len(node.args) > 2 else None
    result_dtype: torch.dtype = node.meta["val"].dtype
    if a.rank != b.rank or a.rank not in (2, 3):
        raise HelionMLIRError(f"dot of ranks {a.rank} and {b.rank} is not supported (2-D or batched 3-D)")
    shape = tuple(a.shape[:-1]) + (b.shape[-1],)
    accumulate_in = result_dtype
    if acc_arg is None and result_dtype in (torch.float16, torch.bfloat16):
        accumulate_in = torch.float32
    if acc_arg is not None:
        acc = v.ops.broadcast_to(v.ops.cast(v.tensor(acc_arg), accumulate_in), shape)
    else:
        acc = v.ops.fill(shape, accumulate_in, 0)
    op = "linalg.matmul" if a.rank == 2 else "linalg.batch_matmul"
    result = Tensor(v.ops.fresh("dot"), shape, accumulate_in)
    v.ops.op(f"{result.ssa} = {op} ins({a.ssa}, {b.ssa} : {a.type}, {b.type}) outs({acc.ssa} : {acc.type}) -> {acc.type}")
    return v.ops.cast(result, result_dtype)
