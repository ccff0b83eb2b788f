"""Tile bodies to vector code: each linalg op is cut into register-sized pieces and vectorized.

Runs on tensors, before bufferization, through the transform dialect interpreter of the
bundled MLIR. Every linalg op gets a plan by its iteration space:

* elementwise (all loops parallel): outer dimensions tiled by 1, the innermost by up to
  :attr:`VectorShape.elements` (a few vector registers), then vectorized;
* a reduction over the innermost dimension: outer dimensions by 1, and a long reduction
  split (``tile_reduction_using_for``) into a loop accumulating one register
  (:attr:`VectorShape.lanes`) of partial results and one final horizontal reduction
  (:mod:`..vector.reduce_across_lanes` makes it a tree of shuffles rather than a chain). One
  register, not :attr:`VectorShape.elements`, measured: over rows that stream from L3 or
  memory, LLVM unrolls the loop over four registers and interleaves their chains, which
  reads each row's cache lines out of order; a sum of squares over 4096x1024 f32 on one
  thread took 1.76x Inductor's time so (1.04x for the same loop left unoptimized, in
  order) and 1.14x with one register, RMS norm 1.76x and 1.54x. Over rows already in L2
  the four independent chains were 2-6% faster. A row no whole register divides takes
  the widest step up to :attr:`VectorShape.elements` that does;
* matmul / batch matmul: an ``MR x NR`` block of the result kept in registers while a loop
  over ``k`` adds one outer product per step (``vector.contract`` lowered to FMAs); the
  accumulator's load and store are hoisted out of that loop. bf16 operands with an f32
  result take ``k`` two at a time where the host has AVX512-BF16 (:attr:`VectorShape.bf16_pairs`),
  for its dot product of pairs (:mod:`..vector.bf16_dot_products`).

With a dynamic loop range (``static_shapes=False``), outer loops are still tiled by 1 and
a dynamic innermost loop by :attr:`VectorShape.elements` (a reduction's by
:attr:`VectorShape.lanes`); the vector ops get explicit
sizes, and the lanes of the last piece past the range are masked. Only elementwise ops
and reductions of a single input are planned so: a masked product of two inputs becomes a
masked ``vector.contract``, which the LLVM lowering refuses. Contractions need static shapes.

Named linalg ops other than contractions are generalized first, so that their plan comes
from their indexing maps. An op the vectorizer refuses (a gather, a multi-result
reduction) keeps its scalar loops; nothing fails because of it.

Register shapes follow the host's vector width as torch reports it (AVX-512: 16 f32
lanes, AVX2: 8, otherwise 4).

Every step is an upstream transform op (tiling, reduction splitting, vectorization and
the cleanup patterns); what is the package's own is the plan per op, which no upstream
pass chooses.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith

from .....mlir_types import LOW_PRECISION_FLOATS
from ...host_cpu import CpuFeatures, host_cpu
from ..ir_walk import defining_op, indexing_maps, is_plain_contraction, iterator_types, ops_where
from ..transform_scripts import match_attribute, run_transform_script

__all__ = ["VectorShape", "host_vector_shape", "vectorize_tiles"]

log = logging.getLogger(__name__)

_GROUP = "helion_mlir.vector_group"
_GENERALIZE = "helion_mlir.generalize"


@dataclass(frozen=True)
class VectorShape:
    """Tile sizes for one vector ISA."""

    lanes: int  # f32 lanes of a register
    elements: int  # elements an elementwise step handles (a few registers)
    mr: int  # rows of a matmul register block
    nr: int  # columns of a matmul register block
    bf16_pairs: bool = False  # bf16 contractions reduce pairs (AVX512-BF16's dot product, .bf16_dot_products)


def host_vector_shape() -> VectorShape:
    """The tile sizes for the CPU the JIT compiles for (:func:`~helion_mlir.runtime.cpu.host_cpu.host_cpu`)."""
    return _vector_shape(host_cpu())


@functools.cache
def _vector_shape(cpu: CpuFeatures) -> VectorShape:
    if cpu.capability.startswith("AVX512"):
        # 16 of 32 zmm registers accumulate
        return VectorShape(lanes=16, elements=64, mr=8, nr=32, bf16_pairs=cpu.bf16_dot)
    if cpu.capability.startswith("AVX2"):
        return VectorShape(lanes=8, elements=32, mr=4, nr=16)  # 8 of 16 ymm registers accumulate
    return VectorShape(lanes=4, elements=16, mr=4, nr=8)


def _loop_ranges(op: ir.Operation) -> list[int | None] | None:
    """Each loop's trip count, None where it is dynamic; None when a loop has no operand
    dimension to take it from."""
    ranges: list[int | None] = [None] * indexing_maps(op)[0].n_dims
    bound = [False] * len(ranges)
    for value, map_ in zip(op.operands, indexing_maps(op)):
        if not isinstance(value.type, ir.ShapedType):
            continue
        for position, expr in enumerate(map_.results):
            expr = expr.maybe_downcast()
            if isinstance(expr, ir.AffineDimExpr):
                bound[expr.position] = True
                if not value.type.is_dynamic_dim(position):
                    ranges[expr.position] = value.type.shape[position]
    return ranges if all(bound) else None


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
        return None  # their conversions become calls of scalar helpers (low_precision_floats.py)
    if is_plain_contraction(op):
        lhs, rhs = op.operands[0].type, op.operands[1].type
        if not (lhs.has_static_shape and rhs.has_static_shape) or _half(op.results[0].type.element_type):
            return None
        m, n, k = lhs.shape[-2], rhs.shape[-1], lhs.shape[-1]
        batch = (1,) * (lhs.rank - 2)
        pairs = shape.bf16_pairs and k % 2 == 0 and all(_bf16(v.type.element_type) for v in op.operands[:2])
        return ("tile", batch + (_divisor_at_most(m, shape.mr), _divisor_at_most(n, shape.nr), 2 if pairs else 1),
                (), ())
    if op.name != "linalg.generic" or not all(_simple_map(m) for m in indexing_maps(op)):
        return None
    ranges = _loop_ranges(op)
    if not ranges or 0 in ranges:
        return None  # no iteration (a row of 0 elements): upstream's vectorizer crashes on it
    iterators = iterator_types(op)
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
        chunk = shape.lanes if innermost is None else _divisor_at_most(innermost, shape.lanes)
        if innermost is not None and chunk < shape.lanes:  # no whole register divides the row: a wider step that does
            chunk = _divisor_at_most(innermost, shape.elements)
        if len(op.results) > 1 or _combiner(op) is None:
            # tile_reduction_using_for splits single results it knows the identity of: others take whole rows
            return None if innermost is None else ("tile", ones + (0,), (), masked(ones + (innermost,)))
        if innermost is None or shape.lanes <= chunk < innermost:
            return ("split", ones + (0,), (0,) * len(ones) + (chunk,), masked(ones + (chunk,)))
        return ("tile", ones + (0,), (), masked(ones + (innermost,)))
    return None


# Combiners whose identity tile_reduction_using_for knows (upstream's getNeutralElement).
_SPLITTABLE = frozenset({
    "arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf",
    "arith.addi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
    "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
})


def _combiner(op: ir.Operation) -> ir.Operation | None:
    """The op of a single-result reduction's body that folds a value into the accumulator,
    when it is one :data:`_SPLITTABLE` can split; None otherwise."""
    body = op.regions[0].blocks[0]
    accumulator = list(body.arguments)[-1]
    found = defining_op(list(body.operations)[-1].operands[0])
    if found is None or found.name not in _SPLITTABLE or not any(v == accumulator for v in found.operands):
        return None
    return found


def _subtractions_as_additions(module: ir.Module) -> int:
    """Reductions folding ``acc - x`` fold ``acc + (-x)`` instead (the same numbers: IEEE and
    two's complement define subtraction so), which the splitting knows; returns how many.

    ``canonicalize`` makes the subtraction of ``sum(-y)`` after fusion (a softmax's or a
    layer norm's backward); ``cse`` afterwards turns the negation back where it stays scalar.
    """
    rewritten = 0
    for op in ops_where(module, lambda o: o.name == "linalg.generic" and len(o.results) == 1
                        and "reduction" in iterator_types(o)):
        body = op.regions[0].blocks[0]
        accumulator = list(body.arguments)[-1]
        combine = defining_op(list(body.operations)[-1].operands[0])
        if combine is None or combine.name not in ("arith.subf", "arith.subi") or combine.operands[0] != accumulator:
            continue
        subtracted = combine.operands[1]
        with ir.InsertionPoint(combine), combine.location:
            if combine.name == "arith.subf":
                added = arith.addf(accumulator, arith.negf(subtracted))
            else:
                zero = arith.constant(subtracted.type, 0)
                added = arith.addi(accumulator, arith.subi(zero, subtracted))
        combine.results[0].replace_all_uses_with(added)
        combine.erase()
        rewritten += 1
    return rewritten


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


def _bf16(type_: ir.Type) -> bool:
    return isinstance(type_, ir.BF16Type)


def _vectorize(handle: str, sizes: tuple[int, ...], name: str) -> str:
    """Vectorize each op of ``handle`` on its own; an op the vectorizer refuses keeps its loops.
    ``name`` makes the block arguments' names unique (MLIR allows no shadowing)."""
    vector_sizes = f" vector_sizes {list(sizes)}" if sizes else ""
    return (
        f"transform.foreach {handle} : !transform.any_op {{\n"
        f"^bb0(%each{name}: !transform.any_op):\n"
        f"  transform.sequence %each{name} : !transform.any_op failures(suppress) {{\n"
        f"  ^bb1(%v{name}: !transform.any_op):\n"
        f"    transform.structured.vectorize %v{name}{vector_sizes} {{create_named_contraction}} : !transform.any_op\n"
        "  }\n}"
    )


def _tiling_script(plans: Sequence[_Plan]) -> str:
    """Tile each op of each group by its group's plan and vectorize the pieces, one op at a
    time: a tiling or split a transform refuses leaves that op as it is (suppressed), and
    the other ops go on."""
    lines: list[str] = []
    for g, (kind, tiles, split, sizes) in enumerate(plans):
        loops = sum(1 for t in tiles if t)
        steps: list[str] = []
        tiled = f"%one{g}"
        if loops:
            tiled = f"%t{g}"
            any_ops = ", ".join(["!transform.any_op"] * loops)
            steps.append(f"%t{g}, %l{g}:{loops} = transform.structured.tile_using_for %one{g} tile_sizes {list(tiles)} "
                         f": (!transform.any_op) -> (!transform.any_op, {any_ops})")
        if kind == "split":
            steps.append(
                f"%fill{g}, %part{g}, %merge{g}, %rl{g} = transform.structured.tile_reduction_using_for {tiled} by "
                f"tile_sizes = {list(split)} : (!transform.any_op) -> (!transform.any_op, !transform.any_op, "
                "!transform.any_op, !transform.any_op)")
            steps += [_vectorize(f"%fill{g}", (), f"{g}_0"), _vectorize(f"%part{g}", sizes, f"{g}_1"),
                      _vectorize(f"%merge{g}", (), f"{g}_2")]
        else:
            steps.append(_vectorize(tiled, sizes, f"{g}_0"))
        body = "\n".join(steps).replace("\n", "\n    ")
        lines.append(
            f"%g{g} = {match_attribute(f'{_GROUP} = {g} : i64')}\n"
            f"transform.foreach %g{g} : !transform.any_op {{\n"
            f"^bb0(%planned{g}: !transform.any_op):\n"
            f"  transform.sequence %planned{g} : !transform.any_op failures(suppress) {{\n"
            f"  ^bb1(%one{g}: !transform.any_op):\n"
            f"    {body}\n"
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

def vectorize_tiles(module: ir.Module, shape: VectorShape | None = None) -> tuple[int, int]:
    """Tile the module's linalg ops to register-sized pieces and vectorize them.

    Returns how many ops got a plan and how many of them kept scalar loops (a transform
    refused them; each is logged at debug level), see the module docstring. Run
    :mod:`.fold_add_into_matmul` and ``linalg-fold-unit-extent-dims`` first (unit dimensions
    in the way hide contractions and reductions from the vectorizer). Raises ``ValueError``
    (the interpreter's) when a transform fails outright.
    """
    shape = shape or host_vector_shape()

    def mark_named(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg.") and len(op.regions) and op.name != "linalg.generic" and not is_plain_contraction(op):
            op.attributes[_GENERALIZE] = ir.UnitAttr.get()
        return ir.WalkResult.ADVANCE

    module.operation.walk(mark_named)
    run_transform_script(module, f"%named = {match_attribute(_GENERALIZE)}\n"
                   "%generic = transform.structured.generalize %named : (!transform.any_op) -> !transform.any_op")
    _subtractions_as_additions(module)
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
    run_transform_script(module, _tiling_script(list(plans)) + _CLEANUP)
    left = ops_where(module, lambda op: _GROUP in op.attributes)
    for op in left:  # tiled (or not) but not vectorized: it keeps its loops
        log.debug("vectorize-tiles: %s at %s keeps scalar loops (a transform refused it)", op.name, op.location)
        del op.attributes[_GROUP]
    return planned, len(left)
