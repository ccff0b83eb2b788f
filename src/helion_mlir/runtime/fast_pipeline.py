"""The fast CPU pipeline: parallel tiles, vector tile bodies, no heap allocation per tile.

Its input and output are those of the plain pipeline (:mod:`.pipeline`): a module in
linalg-on-tensors form after the first stage, and LLVM dialect at the end, so the emitted
module stays what it is and only its execution changes. In order:

1. *Tensor level.* ``canonicalize`` and ``cse``; top-level tile loops whose tiles write
   disjoint slices become ``scf.forall`` (:mod:`.tile_parallel`); then, as in the plain
   pipeline, one-element slice stores become ``tensor.insert`` (after the parallel loops,
   whose proof reads slice stores); f32 ``exp``/``exp2`` become polynomials
   (:mod:`.fast_math`); cheap elementwise ops with several consumers are copied into each;
   elementwise chains are fused; ``acc + matmul(...)`` accumulates in place; unit
   dimensions are folded; linalg ops are tiled to register-sized pieces and vectorized, and
   each row reduction ends in one vector reduction (:mod:`.vectorize`).
2. *Bufferization.* With ``in_place``, the destination arguments (those whose final value
   the function returns) are writable, so tiles store straight into the caller's tensor
   and its result is no longer returned but read from the argument. Loops whose yielded
   tensor is not computed in their carried buffer get a final store into it, so that each
   carried tensor keeps one buffer for the whole loop instead of a new allocation per
   iteration. Empty tensors that end up inserted into a destination are eliminated
   (computed in the destination), allocations are hoisted out of sequential loops, and
   small fixed-size ones directly in a function or parallel-loop body move to the stack.
3. *To LLVM.* ``scf.forall`` -> ``scf.parallel`` -> OpenMP (``threads`` workers taking
   tiles one at a time; with one thread the loops stay sequential), vector ops lowered
   with the host's vector features (the ``ExecutionEngine`` targets the host CPU),
   contractions as outer products (FMAs).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from torch_mlir import ir

from .fast_math import expand_exponentials
from .ir_walk import defining_op, ops_where
from .low_precision import emulate_low_precision_floats
from .pipeline import (
    ModuleLowering,
    Step,
    mark_fresh_buffers_restrict,
    steps,
    store_single_elements_in_place,
)
from .tile_parallel import parallelize_tile_loops
from .vectorize import (
    fold_add_into_matmul,
    recompute_cheap_elementwise,
    reduce_across_lanes,
    vectorize_tiles,
)

__all__ = ["STACK_ALLOCATION_LIMIT", "FastLowering", "lower_fast"]

log = logging.getLogger(__name__)

#: Largest buffer (bytes) of fixed size that goes on the stack instead of the heap. Workers
#: of the OpenMP runtime get 8 MiB stacks (libiomp5's default KMP_STACKSIZE); a tile rarely
#: holds more than a few such buffers.
STACK_ALLOCATION_LIMIT = 1 << 16

_TENSOR_STEPS = steps("func.func(canonicalize)", "func.func(cse)")
_FUSE_STEPS = steps(
    "func.func(linalg-fuse-elementwise-ops)",
    "func.func(canonicalize)",
)
_UNIT_DIM_STEPS = steps("func.func(linalg-fold-unit-extent-dims{use-rank-reducing-slices})", "func.func(canonicalize)")
_PRE_BUFFERIZE_STEPS = steps(
    "func.func(linalg-generalize-named-ops)",  # named ops left unvectorized (their bodies may be rewritten later)
    "func.func(lower-affine)",
    "func.func(tm-tensor-bufferize)",
)
_BUFFERIZE_STEPS = steps(
    # Empty tensors inserted into a destination are computed in it. allow-return-allocs-
    # from-loops: an scf.while whose condition forwards its tensor carries a new buffer
    # per iteration, which is refused without it.
    "eliminate-empty-tensors,one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map}",
    "func.func(canonicalize)",  # folds loop-carried buffers that are yielded unchanged
)
_AFTER_BUFFERIZE_STEPS = steps(
    "func.func(buffer-loop-hoisting)",
)
_DEALLOCATE_STEPS = steps("buffer-deallocation-pipeline", "convert-bufferization-to-memref")
_TO_LOOPS_STEPS = steps(
    "func.func(refback-munge-memref-copy)",
    "func.func(tm-tensor-to-loops)",
    "func.func(convert-linalg-to-loops)",
    "scf-forall-to-parallel",
)
_TO_LLVM_STEPS = steps(
    "func.func(lower-vector-multi-reduction)",
    "func.func(convert-vector-to-scf{full-unroll=true})",
    "func.func(lower-affine)",
    "convert-scf-to-cf",
    "expand-strided-metadata",
    "lower-affine",
    # As in the plain pipeline: bf16 arithmetic (and half-precision math) in f32, so that
    # the JIT needs no compiler-rt helpers. Before the vector lowering: these passes and
    # the libm conversion (which unrolls vector math calls) create vector ops.
    "func.func(math-extend-to-supported-types{target-type=f32})",
    "func.func(arith-emulate-unsupported-floats{source-types=bf16 target-type=f32})",
    "func.func(arith-expand{include-bf16=true})",
    "convert-math-to-funcs",  # integer powers as loops: llvm.powi would call compiler-rt
    "func.func(convert-math-to-llvm)",
    "convert-math-to-libm",
    "convert-vector-to-llvm{enable-x86 vector-contract-lowering=outerproduct "
    "vector-transpose-lowering=shuffle16x16 reassociate-fp-reductions}",
    "finalize-memref-to-llvm",
    "convert-arith-to-llvm",
    "convert-index-to-llvm",
    "convert-openmp-to-llvm",
    "convert-func-to-llvm",
    "convert-cf-to-llvm",
    "convert-ub-to-llvm",
    "reconcile-unrealized-casts",
)


def _openmp_steps(threads: int) -> tuple[Step, ...]:
    # canonicalize inlines the memref.alloca_scope of loop bodies that allocate nothing.
    return steps(f"convert-scf-to-openmp{{num-threads={threads}}}", "func.func(canonicalize)")


def _replace_terminator(terminator: ir.Operation, operands: list[ir.Value]) -> None:
    """Put a terminator of the same kind (``func.return``, ``scf.yield``) with ``operands`` in its place."""
    with ir.InsertionPoint(terminator), terminator.location:
        ir.Operation.create(terminator.name, operands=operands)
    terminator.erase()


def _tied_init(value: ir.Value) -> ir.Value | None:
    """The tensor a destination-style result was computed in, or None."""
    op = defining_op(value)
    if op is None:
        return None
    if op.name in ("tensor.insert", "tensor.insert_slice", "vector.transfer_write"):
        return op.operands[1]
    index = list(op.results).index(value)
    if op.name == "scf.for":
        return op.operands[3 + index]
    if op.name == "scf.forall":
        return op.operands[len(op.operands) - len(op.results) + index]
    if op.name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        inputs = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
        return op.operands[inputs + index]
    return None


def _computed_in(value: ir.Value, target: ir.Value) -> bool:
    """Whether ``value`` is ``target`` updated through destination-style ops only."""
    for _ in range(1000):
        if value == target:
            return True
        init = _tied_init(value)
        if init is None:
            return False
        value = init
    return False


def destinations(func: ir.OpView) -> dict[int, int]:
    """Result -> the argument whose final value it is (computed from it in destination style)."""
    block = func.regions[0].blocks[0]
    returned = list(list(block.operations)[-1].operands)
    found = {}
    for result, value in enumerate(returned):
        for index, arg in enumerate(block.arguments):
            if _computed_in(value, arg) and index not in found.values():
                found[result] = index
                break
    return found


def _store_full(value: ir.Value, into: ir.Value, before: ir.Operation) -> ir.Value:
    """``tensor.insert_slice`` of all of ``value`` into ``into`` (same static type)."""
    type_ = into.type
    with ir.InsertionPoint(before), before.location:
        store = ir.Operation.create(
            "tensor.insert_slice",
            results=[type_],
            operands=[value, into],
            attributes={
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 0, 0, 0]),
                "static_offsets": ir.DenseI64ArrayAttr.get([0] * type_.rank),
                "static_sizes": ir.DenseI64ArrayAttr.get(list(type_.shape)),
                "static_strides": ir.DenseI64ArrayAttr.get([1] * type_.rank),
            },
        )
    return store.result


def store_results_in_destinations(func: ir.OpView, destination: dict[int, int]) -> int:
    """A returned value no longer computed in its destination argument (canonicalization
    replaces an init whose contents the op does not read by an empty tensor) gets a final
    store into it, so that bufferization computes it there; returns how many."""
    block = func.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    returned = list(terminator.operands)
    stored = 0
    for result, index in destination.items():
        arg = block.arguments[index]
        if arg.type.has_static_shape and not _computed_in(returned[result], arg) and returned[result].type == arg.type:
            returned[result] = _store_full(returned[result], arg, terminator)
            stored += 1
    if stored:
        _replace_terminator(terminator, returned)
    return stored


def _mark_writable(func: ir.OpView, arguments: set[int]) -> None:
    attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"]))
    updated = []
    for index, dictionary in enumerate(attrs):
        entries = {named.name: named.attr for named in ir.DictAttr(dictionary)}
        if index in arguments:
            entries["bufferization.writable"] = ir.BoolAttr.get(True)
        updated.append(ir.DictAttr.get(entries))
    func.attributes["arg_attrs"] = ir.ArrayAttr.get(updated)


def store_yields_in_carried_buffers(module: ir.Module) -> int:
    """Give every static carried tensor of an ``scf.for`` that the body does not update in
    place a final full-size ``tensor.insert_slice`` into it; returns how many."""
    stored = 0
    for loop in ops_where(module, lambda op: op.name == "scf.for"):
        body = loop.regions[0].blocks[0]
        terminator = list(body.operations)[-1].operation
        yielded = list(terminator.operands)
        changed = False
        for index, (carried, value) in enumerate(zip(list(body.arguments)[1:], yielded)):
            type_ = carried.type
            if not isinstance(type_, ir.RankedTensorType) or not type_.has_static_shape or _computed_in(value, carried):
                continue
            yielded[index] = _store_full(value, carried, terminator)
            changed = True
            stored += 1
        if changed:
            _replace_terminator(terminator, yielded)
    return stored


def drop_argument_results(func: ir.OpView, writable: set[int]) -> tuple[int | None, ...]:
    """After bufferization: stop returning results that are a writable argument's buffer.

    Returns, per original result, the argument that holds it, or None if still returned.
    """
    block = func.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    held: list[int | None] = []
    for value in terminator.operands:
        owner = value.owner
        held.append(value.arg_number if isinstance(owner, ir.Block) and value.arg_number in writable else None)
    kept = [v for v, arg in zip(terminator.operands, held) if arg is None]
    _replace_terminator(terminator, kept)
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(function_type.inputs), [v.type for v in kept])
    )
    return tuple(held)


def promote_small_buffers_to_stack(module: ir.Module, limit: int = STACK_ALLOCATION_LIMIT) -> int:
    """``memref.alloc`` of at most ``limit`` bytes, static and not escaping, directly in a
    function or parallel-loop body -> ``memref.alloca`` (never inside a sequential loop,
    where every iteration would grow the stack)."""
    promoted = 0
    for alloc in ops_where(module, lambda op: op.name == "memref.alloc"):
        type_ = alloc.results[0].type
        parent = alloc.parent
        if parent is None or parent.name not in ("func.func", "scf.forall") or not type_.has_static_shape:
            continue
        size = max(1, getattr(type_.element_type, "width", 64) // 8) * math.prod(type_.shape)
        if size > limit or any(use.owner.name in ("func.return", "scf.yield") for use in alloc.results[0].uses):
            continue
        with ir.InsertionPoint(alloc), alloc.location:
            alloca = ir.Operation.create(
                "memref.alloca",
                results=[type_],
                operands=list(alloc.operands),
                attributes={name: alloc.attributes[name] for name in alloc.attributes},
            )
        alloc.results[0].replace_all_uses_with(alloca.result)
        alloc.erase()
        promoted += 1
    return promoted


def schedule_tiles_dynamically(module: ir.Module) -> int:
    """Workers take the tiles of each OpenMP loop one at a time (``schedule(dynamic)``)
    instead of an equal share fixed in advance; returns how many loops.

    With fixed shares a call lasts as long as its slowest worker: a core that the
    operating system (or, on a virtual machine, the hypervisor) gives to someone else for
    a while holds up the whole call. Taking tiles one at a time costs one atomic increment
    per tile, and a tile is at least :data:`~.tile_parallel.MIN_PARALLEL_WORK` /
    trip-count operations of work.
    """
    dynamic = ir.Attribute.parse("#omp<schedulekind dynamic>")
    loops = ops_where(module, lambda op: op.name == "omp.wsloop")
    for loop in loops:
        loop.attributes["schedule_kind"] = dynamic
    return len(loops)


def inline_alloca_scopes(module: ir.Module) -> None:
    """``memref.alloca_scope`` (around each OpenMP loop body that allocates on the stack)
    -> ``llvm.intr.stacksave``, its body, ``llvm.intr.stackrestore``; done before
    ``convert-scf-to-cf`` gives the body several blocks, which the scope op does not allow."""
    pointer = ir.Type.parse("!llvm.ptr")
    for scope in reversed(ops_where(module, lambda op: op.name == "memref.alloca_scope")):
        ops = [op.operation for op in scope.regions[0].blocks[0].operations]
        with ir.InsertionPoint(scope), scope.location:
            saved = ir.Operation.create("llvm.intr.stacksave", results=[pointer])
        for op in ops[:-1]:
            op.move_before(scope)
        with ir.InsertionPoint(scope), scope.location:
            ir.Operation.create("llvm.intr.stackrestore", operands=[saved.result])
        scope.erase()


@dataclass(frozen=True)
class FastLowering:
    """What the fast pipeline did to a module that its caller needs to know."""

    held_by: tuple[int | None, ...]  # per result: the argument holding it in place, or None
    uses_openmp: bool  # parallel loops run on OpenMP workers (tile nests or the module's own)


def lower_fast(
    lowering: ModuleLowering, *, threads: int, in_place: bool, not_in_place: frozenset[int] = frozenset()
) -> FastLowering:
    """Lower ``lowering``'s module (after the first stage and ``prepare_boundary``) to the
    LLVM dialect; arguments in ``not_in_place`` are never written even with ``in_place``."""
    func = lowering.function()
    destination = {r: a for r, a in destinations(func).items() if a not in not_in_place} if in_place else {}
    writable = set(destination.values())
    _mark_writable(func, writable)
    lowering.run(_TENSOR_STEPS)
    parallel = parallelize_tile_loops(lowering.function()) if threads > 1 else 0
    store_single_elements_in_place(lowering.module)
    exponentials = expand_exponentials(lowering.module)
    recompute_cheap_elementwise(lowering.module)
    lowering.run(_FUSE_STEPS)
    fold_add_into_matmul(lowering.module)
    lowering.run(_UNIT_DIM_STEPS)
    try:
        vectorized = vectorize_tiles(lowering.module)
    except ValueError as err:
        raise lowering.error(f"vectorization failed: {err}", list(lowering.diagnostics), pass_name="vectorize") from None
    reduce_across_lanes(lowering.module)
    lowering.run(_PRE_BUFFERIZE_STEPS)
    mark_fresh_buffers_restrict(lowering.module)
    store_yields_in_carried_buffers(lowering.module)
    store_results_in_destinations(lowering.function(), destination)
    lowering.run(_BUFFERIZE_STEPS)
    held = drop_argument_results(lowering.function(), writable)
    lowering.run(_AFTER_BUFFERIZE_STEPS)
    promote_small_buffers_to_stack(lowering.module)
    lowering.run(_DEALLOCATE_STEPS)
    lowering.define_bf16_truncation()
    emulate_low_precision_floats(lowering.module)
    lowering.run(_TO_LOOPS_STEPS)
    if threads > 1:
        lowering.run(_openmp_steps(threads))
        schedule_tiles_dynamically(lowering.module)
        inline_alloca_scopes(lowering.module)
    lowering.run(_TO_LLVM_STEPS)
    log.debug(
        "@%s: %d parallel tile nest(s) on %d thread(s), %d exponential(s) expanded, %d linalg op(s) vectorized, "
        "%d result(s) in place",
        lowering.func_name, parallel, threads, exponentials, vectorized, sum(h is not None for h in held),
    )
    uses_openmp = bool(ops_where(lowering.module, lambda op: op.name.startswith("omp.")))
    return FastLowering(held, uses_openmp)
