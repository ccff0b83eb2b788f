"""Tile bodies to vector code: each linalg op is cut into register-sized pieces and vectorized.

Runs on tensors, before bufferization, through the transform dialect interpreter of the
bundled MLIR. Every linalg op gets a plan by its iteration space:

* elementwise (all loops parallel): outer dimensions tiled by 1, the innermost by up to
  :attr:`VectorShape.elements` (a few vector registers), then vectorized;
* a reduction over the innermost dimension: outer dimensions by 1, and a long reduction
  split (``tile_reduction_using_for``) into a loop accumulating
  :attr:`VectorShape.elements`-wide partial results and one final horizontal reduction
  (:func:`reduce_across_lanes` makes it a tree of shuffles rather than a chain);
* matmul / batch matmul: an ``MR x NR`` block of the result kept in registers while a loop
  over ``k`` adds one outer product per step (``vector.contract`` lowered to FMAs); the
  accumulator's load and store are hoisted out of that loop.

With a dynamic loop range (``static_shapes=False``), outer loops are still tiled by 1 and
a dynamic innermost loop by :attr:`VectorShape.elements`; the vector ops get explicit
sizes, and the lanes of the last piece past the range are masked. Only elementwise ops
and reductions of a single input are planned so: a masked product of two inputs becomes a
masked ``vector.contract``, which the LLVM lowering refuses. Contractions need static shapes.

Before that, ``acc + matmul(a, b, zeros)`` (``torch.matmul`` accumulated into a carried
tile, as Helion kernels write it) becomes ``matmul(a, b, acc)``: no second pass over the
tile and no zero fill per step. Other named linalg ops are generalized so that their plan
comes from their indexing maps. An op the vectorizer refuses (a gather, a multi-result
reduction) keeps its scalar loops; nothing fails because of it.

Register shapes follow the host's vector width as torch reports it (AVX-512: 16 f32
lanes, AVX2: 8, otherwise 4).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch_mlir import ir
from torch_mlir.dialects import vector
from torch_mlir.dialects.transform import interpreter

from ..mlir_types import LOW_PRECISION_FLOATS
from .ir_walk import defining_op, ops_where

__all__ = [
    "VectorShape",
    "fold_add_into_matmul",
    "host_vector_shape",
    "recompute_cheap_elementwise",
    "reduce_across_lanes",
    "vectorize_tiles",
]

_CONTRACTIONS = ("linalg.matmul", "linalg.batch_matmul")
_STANDARD_MAPS = (
    ["(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)"],
    ["(d0, d1, d2, d3) -> (d0, d1, d3)", "(d0, d1, d2, d3) -> (d0, d3, d2)", "(d0, d1, d2, d3) -> (d0, d1, d2)"],
)
_GROUP = "helion_mlir.vector_group"
_GENERALIZE = "helion_mlir.generalize"


@dataclass(frozen=True)
class VectorShape:
    """Tile sizes for one vector ISA."""

    lanes: int  # f32 lanes of a register
    elements: int  # elements an elementwise step handles (a few registers)
    mr: int  # rows of a matmul register block
    nr: int  # columns of a matmul register block


@functools.cache
def host_vector_shape() -> VectorShape:
    capability = torch.backends.cpu.get_cpu_capability()
    if capability.startswith("AVX512"):
        return VectorShape(lanes=16, elements=64, mr=8, nr=32)  # 16 of 32 zmm registers accumulate
    if capability.startswith("AVX2"):
        return VectorShape(lanes=8, elements=32, mr=4, nr=16)  # 8 of 16 ymm registers accumulate
    return VectorShape(lanes=4, elements=16, mr=4, nr=8)


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _standard_contraction(op: ir.Operation) -> bool:
    if op.name not in _CONTRACTIONS:
        return False
    if "indexing_maps" in op.attributes and [str(m) for m in _maps(op)] not in _STANDARD_MAPS:
        return False  # transposed or broadcast operands
    return all(isinstance(v.type, ir.RankedTensorType) for v in op.operands)


def _is_zero_fill(value: ir.Value) -> bool:
    fill = defining_op(value)
    if fill is None or fill.name != "linalg.fill":
        return False
    constant = defining_op(fill.operands[0])
    if constant is None or constant.name != "arith.constant":
        return False
    attr = constant.attributes["value"]
    return isinstance(attr, ir.FloatAttr) and attr.value == 0.0 and not math.copysign(1.0, attr.value) < 0


def _is_elementwise_add(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return False
    maps = _maps(op)
    identity = ir.AffineMap.get_identity(maps[0].n_dims)
    if any(m != identity for m in maps):
        return False
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if [o.name for o in body] != ["arith.addf", "linalg.yield"]:
        return False
    args = list(block.arguments)
    return set(body[0].operands) == {args[0], args[1]} and body[1].operands[0] == body[0].result


def fold_add_into_matmul(module: ir.Module) -> int:
    """``add(y, matmul(a, b, zeros))`` -> ``matmul(a, b, y)``; returns how many were folded.

    The products are then added to ``y`` one by one instead of being summed first, a
    rounding difference of the kind ``torch.addmm`` makes as well.
    """
    adds = ops_where(module, _is_elementwise_add)
    folded = 0
    for add in adds:
        for index in (0, 1):
            matmul = defining_op(add.operands[index])
            other = add.operands[1 - index]
            if (
                matmul is None
                or not _standard_contraction(matmul)
                or len(list(add.operands[index].uses)) != 1
                or not _is_zero_fill(matmul.operands[2])
                or other.type != matmul.results[0].type
            ):
                continue
            matmul.move_before(add)
            matmul.operands[2] = other
            add.results[0].replace_all_uses_with(matmul.results[0])
            add.erase()
            folded += 1
            break
    return folded


#: Payload ops cheap enough to compute again in every consumer rather than store.
_CHEAP_PAYLOAD = ("arith.addf", "arith.subf", "arith.mulf", "arith.negf", "arith.maximumf", "arith.minimumf",
                  "arith.extf", "arith.truncf", "linalg.yield")


def _cheap_elementwise(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.regions[0].blocks) != 1:
        return False
    if any(iterator != "parallel" for iterator in _iterators(op)):
        return False
    payload = [o.operation.name for o in op.regions[0].blocks[0].operations]
    return len(payload) <= 3 and all(name in _CHEAP_PAYLOAD for name in payload)


def recompute_cheap_elementwise(module: ir.Module) -> int:
    """Give every other consumer of a cheap elementwise ``linalg.generic`` (one or two
    additions, subtractions, multiplications) a copy of its own; returns how many copies.

    ``linalg-fuse-elementwise-ops`` fuses a producer into its consumer only when the
    consumer is its only user. A layer norm's ``x - mean`` feeds both the variance and the
    output: as one op it is written to a row-block buffer and read back twice; copied,
    each consumer computes it from ``x`` in registers (one subtraction per element again,
    against a store and two loads).
    """
    copies = 0
    for op in ops_where(module, _cheap_elementwise):
        consumers: list[ir.Operation] = []
        for use in op.results[0].uses:
            if use.owner.name != "linalg.generic" or use.owner.parent != op.parent:
                break  # a copy inside a loop would be computed on every iteration
            if use.owner not in consumers:
                consumers.append(use.owner)
        else:
            for consumer in consumers[1:]:
                copy = op.clone(ir.InsertionPoint(consumer))
                for index, operand in enumerate(consumer.operands):
                    if operand == op.results[0]:
                        consumer.operands[index] = copy.results[0]
                copies += 1
    return copies


def _loop_ranges(op: ir.Operation) -> list[int | None] | None:
    """Each loop's trip count, None where it is dynamic; None when a loop has no operand
    dimension to take it from."""
    ranges: list[int | None] = [None] * _maps(op)[0].n_dims
    bound = [False] * len(ranges)
    for value, map_ in zip(op.operands, _maps(op)):
        if not isinstance(value.type, ir.ShapedType):
            continue
        for position, expr in enumerate(map_.results):
            expr = expr.maybe_downcast()
            if isinstance(expr, ir.AffineDimExpr):
                bound[expr.position] = True
                if not value.type.is_dynamic_dim(position):
                    ranges[expr.position] = value.type.shape[position]
    return ranges if all(bound) else None


def _iterators(op: ir.Operation) -> list[str]:
    return [str(a).rsplit("<", 1)[-1].rstrip(">") for a in ir.ArrayAttr(op.attributes["iterator_types"])]


def _simple_map(map_: ir.AffineMap) -> bool:
    """Each index a loop dimension or a constant (broadcast): what tiling slices exactly."""
    return all(isinstance(e.maybe_downcast(), (ir.AffineDimExpr, ir.AffineConstantExpr)) for e in map_.results)


def _divisor_at_most(size: int, limit: int) -> int:
    """The largest tile of at most ``limit`` that divides ``size`` (the whole size if small)."""
    if size <= limit:
        return size
    return next(t for t in range(limit, 0, -1) if size % t == 0)


def _is_generic_contraction(op: ir.Operation, iterators: list[str]) -> bool:
    names = [o.operation.name for o in op.regions[0].blocks[0].operations]
    return len(iterators) >= 3 and iterators[-1] == "reduction" and iterators.count("reduction") == 1 and names == [
        "arith.mulf", "arith.addf", "linalg.yield"
    ]


# A plan: (kind, tile sizes, reduction split sizes, vector sizes); kind is "tile" or "split".
# Vector sizes are given (and the vector ops masked) when a tiled op has a dynamic size.
_Plan = tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _plan(op: ir.Operation, shape: VectorShape) -> _Plan | None:
    if any(_boolean(v.type) for v in [*op.operands, *op.results]):
        return None  # LLVM stores vectors of i1 as bits, memrefs of i1 hold one byte per element
    if _uses_low_precision_floats(op):
        return None  # their conversions become calls of scalar helpers (low_precision.py)
    if _standard_contraction(op):
        lhs, rhs = op.operands[0].type, op.operands[1].type
        if not (lhs.has_static_shape and rhs.has_static_shape) or _half(op.results[0].type.element_type):
            return None
        m, n = lhs.shape[-2], rhs.shape[-1]
        batch = (1,) * (lhs.rank - 2)
        return ("tile", batch + (_divisor_at_most(m, shape.mr), _divisor_at_most(n, shape.nr), 1), (), ())
    if op.name != "linalg.generic" or not all(_simple_map(m) for m in _maps(op)):
        return None
    ranges = _loop_ranges(op)
    if not ranges:
        return None
    iterators = _iterators(op)
    ones = (1,) * (len(ranges) - 1)
    innermost = ranges[-1]
    dynamic = None in ranges

    def masked(sizes: tuple[int, ...]) -> tuple[int, ...]:
        """Vector sizes when a loop range is dynamic: outer loops are tiled by 1 and a
        dynamic innermost one by a fixed chunk, whose last piece is masked."""
        return sizes if dynamic else ()

    if _is_generic_contraction(op, iterators):
        if None in ranges:
            return None
        m, n = ranges[-3:-1]
        return ("tile", (1,) * (len(ranges) - 3) + (_divisor_at_most(m, shape.mr), _divisor_at_most(n, shape.nr), 1),
                (), ())
    if dynamic and "reduction" in iterators and _input_count(op) > 1:
        return None  # masked products of two inputs become masked vector.contract ops, which LLVM lowering refuses
    if iterators[-1] == "parallel":  # elementwise, or reductions over outer dimensions (tiled by 1)
        chunk = shape.elements if innermost is None else _divisor_at_most(innermost, shape.elements)
        return ("tile", ones + (chunk,), (), masked(ones + (chunk,)))
    if any(_half(v.type.element_type) for v in op.results):
        return None  # LLVM cannot lower vector reductions of f16 / bf16 without native support
    if iterators.count("reduction") == 1:
        chunk = shape.elements if innermost is None else _divisor_at_most(innermost, shape.elements)
        if innermost is None or shape.lanes <= chunk < innermost:
            return ("split", ones + (0,), (0,) * len(ones) + (chunk,), masked(ones + (chunk,)))
        return ("tile", ones + (0,), (), masked(ones + (innermost,)))
    return None


def _input_count(op: ir.Operation) -> int:
    return ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]


def _boolean(type_: ir.Type) -> bool:
    return isinstance(type_, ir.ShapedType) and isinstance(type_.element_type, ir.IntegerType) and type_.element_type.width == 1


def _uses_low_precision_floats(op: ir.Operation) -> bool:
    values = [*op.operands, *op.results]
    for region in op.regions:
        for block in region.blocks:
            values += list(block.arguments)
            for nested in block.operations:
                values += list(nested.results)
    return any(
        str(v.type.element_type if isinstance(v.type, ir.ShapedType) else v.type) in LOW_PRECISION_FLOATS for v in values
    )


def _half(type_: ir.Type) -> bool:
    return isinstance(type_, (ir.F16Type, ir.BF16Type))


def _run_transform(module: ir.Module, body: str) -> None:
    script = ir.Module.parse(
        "module attributes {transform.with_named_sequence} {\n"
        "  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {\n"
        f"{body}\n    transform.yield\n  }}\n}}"
    )
    interpreter.apply_named_sequence(module.operation, script.body.operations[0], script)


def _match(attribute: str) -> str:
    return f"transform.structured.match attributes{{{attribute}}} in %root : (!transform.any_op) -> !transform.any_op"


def _tiling_script(plans: Sequence[_Plan]) -> str:
    """Tile every group of ops that share a plan, then vectorize each tiled op on its own
    (a refusal is suppressed and leaves that op's loops scalar)."""
    lines: list[str] = []
    vectorize: list[tuple[str, tuple[int, ...]]] = []
    for group, (kind, tiles, split, sizes) in enumerate(plans):
        loops = sum(1 for t in tiles if t)
        found = _match(f"{_GROUP} = {group} : i64")
        if loops == 0:
            lines.append(f"%t{group} = {found}")
        else:
            results = f"%t{group}, %l{group}:{loops}" if loops > 1 else f"%t{group}, %l{group}"
            any_ops = ", ".join(["!transform.any_op"] * loops)
            lines.append(f"%g{group} = {found}")
            lines.append(
                f"{results} = transform.structured.tile_using_for %g{group} tile_sizes {list(tiles)} "
                f": (!transform.any_op) -> (!transform.any_op, {any_ops})"
            )
        if kind == "split":
            lines.append(
                f"%fill{group}, %part{group}, %merge{group}, %rl{group} = transform.structured.tile_reduction_using_for "
                f"%t{group} by tile_sizes = {list(split)} : (!transform.any_op) -> "
                "(!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)"
            )
            vectorize += [(f"%fill{group}", ()), (f"%part{group}", sizes), (f"%merge{group}", ())]
        else:
            vectorize.append((f"%t{group}", sizes))
    for handle, sizes in vectorize:
        vector_sizes = f" vector_sizes {list(sizes)}" if sizes else ""
        lines.append(
            f"transform.foreach {handle} : !transform.any_op {{\n"
            "^bb0(%op: !transform.any_op):\n"
            "  transform.sequence %op : !transform.any_op failures(suppress) {\n"
            "  ^bb1(%one: !transform.any_op):\n"
            f"    transform.structured.vectorize %one{vector_sizes} {{create_named_contraction}} : !transform.any_op\n"
            "  }\n}"
        )
    return "\n".join(lines)


_CLEANUP = """
transform.apply_patterns to %root {
  transform.apply_patterns.canonicalization
  transform.apply_patterns.linalg.tiling_canonicalization
  transform.apply_patterns.vector.lower_masked_transfers
  transform.apply_patterns.vector.reduction_to_contract
  transform.apply_patterns.vector.fold_arith_extension
  transform.apply_patterns.vector.transfer_permutation_patterns
  transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
  transform.apply_patterns.vector.cast_away_vector_leading_one_dim
} : !transform.any_op
transform.apply_cse to %root : !transform.any_op
%loops = transform.structured.match ops{["scf.for"]} in %root : (!transform.any_op) -> !transform.any_op
transform.foreach %loops : !transform.any_op {
^bb0(%loop: !transform.any_op):
  transform.loop.hoist_loop_invariant_subsets %loop : !transform.any_op
}
transform.apply_patterns to %root {
  transform.apply_patterns.canonicalization
} : !transform.any_op
%after = transform.structured.match ops{["scf.for"]} in %root : (!transform.any_op) -> !transform.any_op
transform.apply_licm to %after : !transform.any_op
"""

def vectorize_tiles(module: ir.Module, shape: VectorShape | None = None) -> int:
    """Tile and vectorize the module's linalg ops (see the module docstring); returns how
    many ops got a plan. Run :func:`fold_add_into_matmul` and ``linalg-fold-unit-extent-dims``
    first (unit dimensions in the way hide contractions and reductions from the vectorizer).
    Raises ``ValueError`` (the interpreter's) when a transform fails outright."""
    shape = shape or host_vector_shape()

    def mark_named(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg.") and len(op.regions) and op.name != "linalg.generic" and not _standard_contraction(op):
            op.attributes[_GENERALIZE] = ir.UnitAttr.get()
        return ir.WalkResult.ADVANCE

    module.operation.walk(mark_named)
    _run_transform(module, f"%named = {_match(_GENERALIZE)}\n"
                   "%generic = transform.structured.generalize %named : (!transform.any_op) -> !transform.any_op")
    plans: dict[_Plan, int] = {}
    planned = 0

    def mark_planned(op: ir.Operation) -> ir.WalkResult:
        nonlocal planned
        plan = _plan(op, shape)
        if plan is not None:
            group = plans.setdefault(plan, len(plans))
            op.attributes[_GROUP] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), group)
            planned += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(mark_planned)
    _run_transform(module, _tiling_script(list(plans)) + _CLEANUP)
    return planned


def _reduces_to_one_row(op: ir.Operation) -> bool:
    """A ``vector.multi_reduction`` whose kept dimensions all have size 1."""
    source = ir.VectorType(op.operands[0].type)
    reduced = set(ir.DenseI64ArrayAttr(op.attributes["reduction_dims"]))
    return all(size == 1 for dim, size in enumerate(source.shape) if dim not in reduced)


def reduce_across_lanes(module: ir.Module) -> int:
    """``vector.multi_reduction`` to a single row -> ``vector.reduction``; returns how many.

    ``lower-vector-multi-reduction`` (inner-parallel, right for reductions over outer
    dimensions) makes the horizontal sum of a row's partial results a chain of one
    dependent scalar op per lane (64 for an AVX-512 row reduction), while LLVM lowers
    ``vector.reduction`` as a tree of shuffles when ``convert-vector-to-llvm`` may
    reassociate. The order of the additions changes, as between any two reduction schedules.
    """
    rewritten = 0
    for op in ops_where(module, lambda o: o.name == "vector.multi_reduction" and _reduces_to_one_row(o)):
        source, acc = op.operands[0], op.operands[1]
        source_type = ir.VectorType(source.type)
        element = source_type.element_type
        fastmath = op.attributes["fastmath"] if "fastmath" in op.attributes else None
        with ir.InsertionPoint(op), op.location:
            flat = vector.shape_cast(ir.VectorType.get([math.prod(source_type.shape)], element), source)
            if isinstance(acc.type, ir.VectorType):
                rank = ir.VectorType(acc.type).rank
                start = vector.extract(acc, [], [0] * rank)
                total = vector.reduction(element, op.attributes["kind"], flat, acc=start, fastmath=fastmath)
                result = vector.broadcast(acc.type, total)
            else:
                result = vector.reduction(element, op.attributes["kind"], flat, acc=acc, fastmath=fastmath)
        op.results[0].replace_all_uses_with(result)
        op.erase()
        rewritten += 1
    return rewritten
