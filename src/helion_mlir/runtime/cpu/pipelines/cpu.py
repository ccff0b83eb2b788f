"""The two CPU pipelines, from an emitted module to the LLVM dialect, as lists of steps.

Both start alike (:data:`FIRST_STAGE`): functions that ``@func`` does not call are
dropped, so a module holding many kernels costs only the one asked for; the module is
brought to linalg-on-tensors from its output type (nothing for linalg-on-tensors;
TOSA's conversions, then ``canonicalize`` to drop the dead ``tosa.const_shape`` operands
they leave; for stablehlo the shape dialect's broadcast checks become asserts and index
arithmetic, then ``stablehlo-legalize-to-linalg``; for raw, torch-mlir's backend-contract
and linalg backend pipelines); source-dialect ops that survive that have no lowering in
the bundled MLIR and are listed in an error; the signature is read and the function gets
a C interface and read-only tensor arguments; integer divisions get a guard for a zero
divisor (and ``INT_MIN / -1``), which would trap. After bufferization both free buffers,
emulate low-precision floats and make loops of what is left the same way
(``_DEALLOCATE_TO_LOOPS``), and both end alike: ``scf`` to ``cf`` (``_SCF_TO_CF``), then
the last conversions to LLVM and checks (:data:`LAST_STAGE`).

*plain*: named linalg ops are generalized and elementwise chains fused, affine ops
lowered (``affine.for``/``affine.if`` carrying tensors do not bufferize, their scf forms
do), ``tm_tensor`` ops bufferized by torch-mlir's own pass, then one-shot bufferization
across function boundaries with identity layouts, and the ownership-based deallocation
pipeline; ``memref.copy`` becomes loops (the wheel ships no MLIR runtime library that
would implement it), ``tm_tensor``, linalg and vector transfer ops become loops,
``scf.forall`` becomes ``scf.parallel`` and then sequential loops, and every dialect is
converted to LLVM. Sequential scalar loops: the reference the fast pipeline is tested
against. *Checked* (``checked``, plain pipeline only): right after bufferization,
``generate-runtime-verification`` guards every memref access, subview, cast and linalg op
with a ``cf.assert``; once the loops are a control-flow graph, each assert becomes a call
back into Python and an early return (:mod:`~helion_mlir.runtime.cpu.rewrites.llvm.failed_checks`),
so a failed check raises instead of aborting the process.

*fast*: on tensors, the last tile of a size its block does not divide is peeled off its loop
(``transform.loop.peel``; not the inner loops of a tile grid, which stays one nest), so that
the other tiles have static sizes; top-level tile loops
whose tiles write disjoint slices become ``scf.forall``; f32 ``exp``/``exp2`` become polynomials; cheap elementwise ops with
several consumers are copied into each; elementwise chains are fused; a peeled last tile
is computed at its own size instead of padded to its block;
``acc + matmul(...)`` accumulates in place; unit dimensions are folded; a loop over column
chunks of a multi-row tile runs once per row; linalg ops are
tiled to register-sized pieces and vectorized, each row reduction ending in one vector
reduction, bf16 matmuls on AVX512-BF16 dot products of k pairs; the pairs of ``hl.split``
and ``hl.join`` are moved as contiguous vectors and (de)interleaved in registers; powers with a constant
integral exponent become multiplications; math on vectors becomes polynomials or calls
of glibc's vector functions (docs/cpu-math.md).
Bufferization writes the destination arguments in place
(``in_place``), keeps one buffer per loop-carried tensor, computes empty tensors in their
destination, hoists allocations out of sequential loops and puts small fixed-size ones on
the stack (those of a loop body freed at the end of each iteration).
``scf.forall`` becomes ``scf.parallel`` and then OpenMP (``threads`` workers taking runs of
contiguous tiles as they become free; with one thread the loops stay sequential), vector ops are lowered with
the host's vector features, contractions as outer products (FMAs).

To add a step, add one line where it belongs: ``*passes("func.func(my-pass)")`` for an
upstream pass, ``rewrite(my_rewrite)`` for a function of the package that rewrites the
module (a module of its own in :mod:`helion_mlir.runtime.cpu.rewrites`), ``optimization(my_rewrite)``
for one the numbers do not depend on (when it fails, the module is left as it was and the
pipeline goes on, logged at debug level), each with ``when=`` a :class:`~.steps.Condition`
if it runs only under some options.
"""

from __future__ import annotations

from ....output_type import TORCH_BACKEND_PIPELINE, OutputType
from ..rewrites.buffer.alloca_scopes import lower_allocation_scopes
from ..rewrites.vector.bf16_dot_products import pair_bf16_dot_products
from ..rewrites.llvm.bf16_memory_as_i16 import move_bf16_through_memory_as_i16
from ..rewrites.buffer.bf16_truncation import define_bf16_truncation
from ..rewrites.tensor.branch_consumers import compute_consumers_in_branches
from ..rewrites.tensor.carried_buffers import store_yields_in_carried_buffers
from ..rewrites.vector.constant_powers import integral_powers_as_fpowi
from ..rewrites.buffer.dynamic_schedule import schedule_tiles_dynamically
from ..rewrites.tensor.fold_add_into_matmul import fold_add_into_matmul
from ..rewrites.tensor.integer_division import assert_nonzero_divisors, guard_integer_divisions
from ..rewrites.vector.interleaved_pairs import move_pairs_contiguously
from ..rewrites.llvm.libm_expm1 import call_libm_for_expm1
from ..rewrites.tensor.local_accumulators import accumulate_in_local_buffers
from ..rewrites.buffer.low_precision_floats import MOVE_TO_F32, emulate_low_precision_floats, uses_low_precision_floats
from ..rewrites.vector.mixed_dot_products import extend_mixed_dot_products
from ..rewrites.tensor.parallel_insertions import order_parallel_insertions
from ..rewrites.vector.polynomial_exp import expand_exponentials
from ..rewrites.tensor.recompute_cheap_elementwise import recompute_cheap_elementwise
from ..rewrites.vector.reduce_across_lanes import reduce_across_lanes
from ..rewrites.tensor.restrict_fresh_buffers import mark_fresh_buffers_restrict
from ..rewrites.tensor.row_major_chunks import process_rows_before_column_chunks
from ..rewrites.tensor.row_statistics import fuse_row_statistics
from ..rewrites.tensor.single_element_stores import store_single_elements_in_place
from ..rewrites.buffer.stack_buffers import promote_small_buffers_to_stack
from ..rewrites.llvm.target_features import leave_out_cpu_features
from ..rewrites.tensor.tile_parallel import parallelize_tile_loops
from ..rewrites.tensor.tile_size_bounds import peel_partial_tiles
from ..rewrites.tensor.unpadded_tiles import compute_static_tiles_unpadded
from ..rewrites.vector.vector_math import lower_vector_math
from ..rewrites.tensor.vectorize_tiles import vectorize_tiles
from .module_lowering import ModuleLowering
from .options import Pipeline
from .steps import (
    CHECKED,
    IN_PLACE,
    PARALLEL,
    Condition,
    Step,
    boundary,
    check,
    input_is,
    optimization,
    passes,
    rewrite,
)

__all__ = ["FIRST_STAGE", "LAST_STAGE", "PIPELINES"]


def _passes_of(pipeline: str | None) -> tuple[str, ...]:
    """The top-level passes of a ``builtin.module(...)`` pipeline text, one per step."""
    assert pipeline is not None and pipeline.startswith("builtin.module(") and pipeline.endswith(")")
    found, depth, start = [], 0, 0
    body = pipeline.removeprefix("builtin.module(")[:-1]
    for index, char in enumerate(body):
        depth += {"(": 1, "{": 1, ")": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            found.append(body[start:index])
            start = index + 1
    return (*found, body[start:])


def _parallelize_tile_loops(lowering: ModuleLowering) -> None:
    """Top-level tile loop nests whose tiles write disjoint slices become ``scf.forall``."""
    parallelize_tile_loops(lowering.function(), threads=lowering.options.threads)


FIRST_STAGE: tuple[Step, ...] = (
    boundary(ModuleLowering.make_the_function_public),
    *passes("symbol-privatize{exclude=$func}", "symbol-dce"),  # drops what the function does not call
    *passes(
        "func.func(tosa-optional-decompositions)",
        "func.func(tosa-to-linalg-named)",
        "func.func(tosa-to-linalg)",
        "func.func(tosa-to-arith)",
        "func.func(tosa-to-tensor)",
        "func.func(tosa-to-scf)",
        "func.func(canonicalize)",
        when=input_is(OutputType.TOSA),
    ),
    *passes(
        "func.func(convert-shape-constraints)",
        "convert-shape-to-std",
        "func.func(canonicalize)",  # removes shape.assuming regions with a true witness
        "func.func(stablehlo-legalize-to-linalg)",
        "convert-shape-to-std",  # the legalization creates shape.shape_of for dynamic sizes
        when=input_is(OutputType.STABLEHLO),
    ),
    *passes(
        *_passes_of(TORCH_BACKEND_PIPELINE),
        *_passes_of(OutputType.LINALG_ON_TENSORS.backend_pipeline),
        when=input_is(OutputType.RAW),
    ),
    check(ModuleLowering.check_lowered_to_linalg),
    check(ModuleLowering.read_signature),
    boundary(ModuleLowering.prepare_boundary),
    # Before vectorization and arith-expand: a zero divisor (also in a ragged tile's padding
    # lanes) gives a defined value instead of SIGFPE (docs/abi.md, "Integer division by zero");
    # checked mode raises first for a scalar divisor.
    rewrite(assert_nonzero_divisors, when=CHECKED),
    rewrite(guard_integer_divisions),
)

# One-shot bufferization across function boundaries, identity layouts there.
# allow-return-allocs-from-loops: an scf.while whose condition forwards its tensor
# carries a new buffer per iteration, which is refused without it.
_ONE_SHOT_BUFFERIZE = (
    "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map}"
)

# bf16 arithmetic (and half-precision math) runs in f32 and bf16 conversions become
# integer ops, so the JIT never needs compiler-rt helpers such as __truncsfbf2 (absent
# in-process).
_BF16_IN_F32 = passes(
    "func.func(math-extend-to-supported-types{target-type=f32})",
    "func.func(arith-emulate-unsupported-floats{source-types=bf16 target-type=f32})",
    "func.func(arith-expand{include-bf16=true})",
)

# The module holds 8- or 4-bit floats, which LLVM lacks.
_LOW_PRECISION_FLOATS = Condition("8- or 4-bit floats", found_in=uses_low_precision_floats)

# From bufferized code to loops: buffers freed, low-precision floats emulated, and
# ``memref.copy``, ``tm_tensor`` and linalg ops as loops, ``scf.forall`` as ``scf.parallel``.
_DEALLOCATE_TO_LOOPS: tuple[Step, ...] = (
    *passes("buffer-deallocation-pipeline", "convert-bufferization-to-memref"),
    rewrite(define_bf16_truncation),
    *passes(*MOVE_TO_F32, when=_LOW_PRECISION_FLOATS),
    rewrite(emulate_low_precision_floats),
    *passes(
        "func.func(refback-munge-memref-copy)",
        "func.func(tm-tensor-to-loops)",
        "func.func(convert-linalg-to-loops)",
        "scf-forall-to-parallel",
    ),
)

_SCF_TO_CF = passes("func.func(lower-affine)", "convert-scf-to-cf", "expand-strided-metadata", "lower-affine")

# log1p through libm: approximated, it is log(1 + x), 0 for |x| < 6e-8 (expm1 likewise is
# exp(x) - 1, with no option; call_libm_for_expm1 runs first).
_MATH_TO_LLVM = "func.func(convert-math-to-llvm{approximate-log1p=false})"

LAST_STAGE: tuple[Step, ...] = (
    *passes(
        "convert-arith-to-llvm",
        "convert-index-to-llvm",
        "convert-openmp-to-llvm",
        "convert-func-to-llvm",
        "convert-cf-to-llvm",
        "convert-ub-to-llvm",
        "reconcile-unrealized-casts",
    ),
    rewrite(move_bf16_through_memory_as_i16),
    rewrite(leave_out_cpu_features),
    check(ModuleLowering.check_lowered_to_llvm),
    check(ModuleLowering.check_openmp_constructs, when=PARALLEL),
)

PLAIN: tuple[Step, ...] = (
    *FIRST_STAGE,
    rewrite(store_single_elements_in_place),
    *passes(
        "func.func(linalg-generalize-named-ops)",
        "func.func(linalg-fuse-elementwise-ops)",
        "func.func(lower-affine)",
        "func.func(tm-tensor-bufferize)",
    ),
    rewrite(mark_fresh_buffers_restrict),
    *passes(_ONE_SHOT_BUFFERIZE),
    # Checked mode: every memref access, subview, cast and linalg op of the kernel is
    # checked against its buffers' sizes (the deallocation code that follows is not).
    *passes("generate-runtime-verification{verbose-level=0}", when=CHECKED),
    *_DEALLOCATE_TO_LOOPS,
    *passes("func.func(convert-vector-to-scf)"),
    *_SCF_TO_CF,
    boundary(ModuleLowering.return_on_failed_checks, when=CHECKED),
    *passes("convert-vector-to-llvm", "finalize-memref-to-llvm"),
    *_BF16_IN_F32,
    rewrite(call_libm_for_expm1),
    *passes(_MATH_TO_LLVM, "convert-math-to-libm"),
    *LAST_STAGE,
)

FAST: tuple[Step, ...] = (
    *FIRST_STAGE,
    boundary(ModuleLowering.write_results_in_place, when=IN_PLACE),
    *passes("func.func(canonicalize)", "func.func(cse)"),
    # The last tile of a size its block does not divide is peeled off the loop: the other
    # tiles get static sizes (no padding copy, no row masks).
    optimization(peel_partial_tiles),
    *passes("func.func(canonicalize)", "func.func(cse)"),
    boundary(_parallelize_tile_loops, when=PARALLEL, optional=True),
    # After the parallel loops, whose proof reads slice stores.
    optimization(store_single_elements_in_place),
    optimization(compute_consumers_in_branches),  # before fusion: a branch's elementwise ops fuse into its copy
    optimization(recompute_cheap_elementwise),
    *passes("func.func(linalg-fuse-elementwise-ops)", "func.func(canonicalize)"),
    # After fusion, which leaves one op per chain: a peeled last tile is computed at its
    # static size instead of padded to its block (no copies in and out).
    optimization(compute_static_tiles_unpadded),
    optimization(fold_add_into_matmul),
    *passes("func.func(linalg-fold-unit-extent-dims{use-rank-reducing-slices})", "func.func(canonicalize)"),
    optimization(process_rows_before_column_chunks),
    *passes("func.func(linalg-fold-unit-extent-dims{use-rank-reducing-slices})", "func.func(canonicalize)"),
    optimization(fuse_row_statistics),
    optimization(vectorize_tiles),
    optimization(move_pairs_contiguously),
    *passes("func.func(cse)"),  # one read for both lanes of the same pairs
    optimization(pair_bf16_dot_products),
    rewrite(extend_mixed_dot_products),  # after the bf16 pairs, which keep theirs; a vector.contract needs it
    optimization(reduce_across_lanes),
    # Vector math as polynomials or glibc's vector functions, half-precision math in f32 first.
    *passes("func.func(math-extend-to-supported-types{target-type=f32})"),
    optimization(integral_powers_as_fpowi),
    *passes("func.func(math-expand-ops{ops=fpowi})"),  # constant integer powers as multiplications
    # After vectorization: on AVX-512 the exp polynomials scale with x86.avx512.mask.scalef,
    # which the linalg vectorizer would refuse; exp left scalar (outside vectorized tiles) too.
    optimization(expand_exponentials),
    optimization(lower_vector_math),
    *passes(
        "func.func(linalg-generalize-named-ops)",  # named ops left unvectorized (their bodies may be rewritten later)
        "func.func(lower-affine)",
        # A row inserted into a tile inserted into the output is inserted into the output
        # directly, so that eliminate-empty-tensors computes it there (not in a stack buffer
        # copied over). Before the destinations are tied to results: it also folds whole-tensor insertions.
        "func.func(fold-tensor-subset-ops)",
        "func.func(tm-tensor-bufferize)",
    ),
    rewrite(mark_fresh_buffers_restrict),
    optimization(store_yields_in_carried_buffers),
    boundary(ModuleLowering.store_results_in_destinations, when=IN_PLACE),
    optimization(accumulate_in_local_buffers),
    *passes("eliminate-empty-tensors"),  # empty tensors inserted into a destination are computed in it
    # A parallel tile's insertion whose value was computed in another output's slice goes first.
    rewrite(order_parallel_insertions),
    *passes(
        _ONE_SHOT_BUFFERIZE,
        # Equal subviews become one, so that the copies of a buffer into itself that
        # bufferization leaves after computing in place fold away.
        "func.func(cse)",
        "func.func(canonicalize)",  # folds loop-carried buffers that are yielded unchanged
    ),
    boundary(ModuleLowering.drop_argument_results, when=IN_PLACE),
    *passes("func.func(buffer-loop-hoisting)"),
    optimization(promote_small_buffers_to_stack),
    *_DEALLOCATE_TO_LOOPS,
    *passes(
        "convert-scf-to-openmp{num-threads=$threads}",
        "func.func(canonicalize)",  # inlines the memref.alloca_scope of loop bodies that allocate nothing
        when=PARALLEL,
    ),
    optimization(schedule_tiles_dynamically, when=PARALLEL),
    rewrite(lower_allocation_scopes),  # before the loops become blocks
    *passes("func.func(lower-vector-multi-reduction)", "func.func(convert-vector-to-scf{full-unroll=true})"),
    *_SCF_TO_CF,
    # Before the vector lowering: these passes and the libm conversion (which unrolls
    # vector math calls) create vector ops.
    *_BF16_IN_F32,
    rewrite(call_libm_for_expm1),
    *passes(
        "convert-math-to-funcs",  # integer powers as loops: llvm.powi would call compiler-rt
        _MATH_TO_LLVM,
        "convert-math-to-libm",
        "convert-vector-to-llvm{enable-x86 vector-contract-lowering=outerproduct "
        "vector-transpose-lowering=shuffle16x16 reassociate-fp-reductions}",
        "finalize-memref-to-llvm",
    ),
    *LAST_STAGE,
)

PIPELINES: dict[Pipeline, tuple[Step, ...]] = {Pipeline.PLAIN: PLAIN, Pipeline.FAST: FAST}
