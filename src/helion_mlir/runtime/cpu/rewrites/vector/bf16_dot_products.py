"""bf16 matmuls with f32 accumulation on AVX512-BF16's dot-product instruction (``vdpbf16ps``).

``vdpbf16ps acc, a, b`` adds to each of 16 f32 lanes of ``acc`` the products of the
lane's two bf16 pairs in ``a`` and ``b``: ``acc[i] += a[2i] * b[2i] + a[2i+1] * b[2i+1]``,
twice the multiply-adds of an f32 FMA per instruction, and no conversion of the operands
to f32. Lowered the generic way (every operand extended to f32, then f32 FMAs), a bf16
matmul is slower than an f32 one (docs/benchmarks.md).

:mod:`..tensor.vectorize_tiles` tiles the reduction of a bf16 contraction by 2 when the host has
the instruction (:attr:`~helion_mlir.runtime.cpu.host_cpu.CpuFeatures.bf16_dot`), so that each step is a ``vector.contract`` of an ``MR x 2`` block of A
and a ``2 x NR`` block of B into an ``MR x NR`` f32 accumulator. :func:`pair_bf16_dot_products`
replaces each such contraction: B's two rows are interleaved into ``NR / 16`` registers
holding (B[0, j], B[1, j]) pairs (the "VNNI" layout), each row of A's pair
(A[i, 0], A[i, 1]) is broadcast to all 16 lanes as one 32-bit value, and each register of
the accumulator gets one ``x86.avx512.dot`` (the x86 dialect's op for the instruction).

The sums are formed in another order than f32 FMAs would (a pair's two products are added
together before the accumulator, as in oneDNN's bf16 kernels); each product of two bf16
values is exact in f32.

Upstream MLIR has no pattern that makes ``x86.avx512.dot`` from a ``vector.contract``
(the dialect's ops are built by hand, as here).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import vector

from ..ir_walk import ops_where

__all__ = ["DOT_LANES", "pair_bf16_dot_products"]

DOT_LANES = 16  # f32 lanes of one vdpbf16ps on zmm registers

_MATMUL_MAPS = [
    "affine_map<(d0, d1, d2) -> (d0, d2)>",
    "affine_map<(d0, d1, d2) -> (d2, d1)>",
    "affine_map<(d0, d1, d2) -> (d0, d1)>",
]


def _pairs_contraction(op: ir.Operation) -> bool:
    """A ``vector.contract`` (add) of ``M x 2`` bf16 by ``2 x N`` bf16 into ``M x N`` f32, N a
    multiple of 16, with plain matmul maps."""
    if op.name != "vector.contract" or len(op.operands) != 3:
        return False
    lhs, rhs, acc = (op.operands[i].type for i in range(3))
    if not all(isinstance(t, ir.VectorType) for t in (lhs, rhs, acc)):
        return False
    lhs, rhs, acc = ir.VectorType(lhs), ir.VectorType(rhs), ir.VectorType(acc)
    if not (isinstance(lhs.element_type, ir.BF16Type) and isinstance(rhs.element_type, ir.BF16Type)
            and isinstance(acc.element_type, ir.F32Type)):
        return False
    if lhs.rank != 2 or rhs.rank != 2 or lhs.shape[1] != 2 or rhs.shape[0] != 2 or acc.shape[1] % DOT_LANES:
        return False
    maps = [str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    return maps == _MATMUL_MAPS and str(op.attributes["kind"]) == "#vector.kind<add>"


def _dot_products(op: ir.Operation) -> ir.Value:
    lhs, rhs, acc = op.operands[0], op.operands[1], op.operands[2]
    rows, columns = ir.VectorType(acc.type).shape
    bf16, f32, i32 = ir.BF16Type.get(), ir.F32Type.get(), ir.IntegerType.get_signless(32)
    half = ir.VectorType.get([DOT_LANES], bf16)
    pairs = ir.VectorType.get([2 * DOT_LANES], bf16)
    lanes = ir.VectorType.get([DOT_LANES], f32)
    first, second = vector.extract(rhs, [], [0]), vector.extract(rhs, [], [1])
    interleaved = []
    for start in range(0, columns, DOT_LANES):
        parts = [vector.extract_strided_slice(half, row, [start], [DOT_LANES], [1]) for row in (first, second)]
        interleaved.append(vector.interleave(*parts))
    result = acc
    for row in range(rows):
        pair = vector.bitcast(ir.VectorType.get([1], i32), vector.extract(lhs, [], [row]))
        broadcast = vector.bitcast(pairs, vector.broadcast(ir.VectorType.get([DOT_LANES], i32),
                                                           vector.extract(pair, [], [0])))
        for chunk, b_pairs in enumerate(interleaved):
            start = chunk * DOT_LANES
            partial = vector.extract_strided_slice(lanes, vector.extract(acc, [], [row]), [start], [DOT_LANES], [1])
            dot = ir.Operation.create("x86.avx512.dot", results=[lanes], operands=[partial, broadcast, b_pairs]).result
            result = vector.insert_strided_slice(dot, result, [row, start], [1])
    return result


def pair_bf16_dot_products(module: ir.Module) -> int:
    """Each bf16 ``M x 2`` by ``2 x N`` contraction into f32 as ``x86.avx512.dot`` ops; how many."""
    found = ops_where(module, _pairs_contraction)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            value = _dot_products(op)
        op.results[0].replace_all_uses_with(value)
        op.erase()
    return len(found)
