"""Math functions on vectors: polynomials, or calls of glibc's vector math library (libmvec).

After vectorization a tile body holds math ops on whole vectors (``math.erf %v :
vector<64xf32>``). ``convert-math-to-libm`` would unroll each into one scalar ``erff`` call
per lane, 5-20x slower than the vector code torch's Inductor generates.
:func:`lower_vector_math` runs right after vectorization (half-precision math already
in f32, as torch computes it) and replaces every f32 vector math op:

- ``expm1``, ``erf``, ``sin``, ``cos``: polynomials in arith ops (:mod:`.polynomial_math`;
  ``exp`` and ``exp2`` are expanded just before, by :mod:`.polynomial_exp`). ``sin`` and ``cos`` reduce arguments up to
  ``polynomial_math.TRIG_REDUCTION_LIMIT``; when a lane of a vector is beyond it (rare: 2^19),
  an ``scf.if`` computes the op again for the whole vector the library's way, which
  reduces large arguments correctly, and takes those lanes from it.
- the others libmvec implements (``tanh``, ``log``, ``log1p``, ``log2``, ``atan``,
  ``atan2``, ``powf``, ...): one call of the vector variant per register-wide piece.
  ``_ZGVdN8v_tanhf`` takes and returns a ``vector<8xf32>`` in one AVX2 register (the x86-64
  vector function ABI: ``b`` SSE, ``d`` AVX2, ``e`` AVX-512); a piece shorter than a
  register is padded with 1.0, a valid argument of every function.

Why this split, measured (docs/cpu-math.md, docs/benchmarks.md): the math dialect's own
polynomial approximations are not reachable from the bundled MLIR's Python API (no pass,
no transform op); LLVM maps vector intrinsics to libmvec only through a process-wide
command-line option (``-vector-library``), and only functions that are intrinsics (not
erf, expm1, log1p). glibc's functions stay within 4 ulp over the whole f32 range and
handle every edge case, but for ``exp``, ``expm1``, ``erf``, ``sin`` and ``cos`` they take
1.35-1.7x the time of Inductor's vector code, where these polynomials take 0.93-1.08x (and
stay within 2 ulp); for the rest glibc's are as fast as Inductor's or faster.

The library is optional: without it (glibc before 2.35 lacks most of these functions), or
for a function it lacks, the op keeps one scalar libm call per lane.

``math.expm1`` left scalar becomes ``expm1f``/``expm1`` calls (:mod:`..llvm.libm_expm1`, in both
CPU pipelines) rather than ``convert-math-to-llvm``'s ``exp(x) - 1``, which
returns 0 for |x| < 6e-8 (where expm1 is x); the pipelines convert ``math.log1p`` with
``approximate-log1p=false`` for the same reason.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, func, llvm, scf, ub, vector
from torch_mlir.dialects import math as mmath

from ...host_cpu import host_cpu
from ..ir_build import declare_pure_function, flattened
from ..ir_walk import ops_where
from . import polynomial_math
from .polynomial_exp import Builder

__all__ = ["VECTOR_FUNCTIONS", "VectorMathCounts", "VectorMathLibrary", "host_vector_math", "lower_vector_math"]

log = logging.getLogger(__name__)

_LIBRARY = "libmvec.so.1"

#: math op -> (libmvec base name of its f32 function, operand count); sin and cos for
#: arguments beyond the polynomials' reach.
VECTOR_FUNCTIONS: dict[str, tuple[str, int]] = {
    "math.sin": ("sinf", 1),
    "math.cos": ("cosf", 1),
    "math.tan": ("tanf", 1),
    "math.asin": ("asinf", 1),
    "math.acos": ("acosf", 1),
    "math.atan": ("atanf", 1),
    "math.atan2": ("atan2f", 2),
    "math.sinh": ("sinhf", 1),
    "math.cosh": ("coshf", 1),
    "math.tanh": ("tanhf", 1),
    "math.asinh": ("asinhf", 1),
    "math.acosh": ("acoshf", 1),
    "math.atanh": ("atanhf", 1),
    "math.erfc": ("erfcf", 1),
    "math.log": ("logf", 1),
    "math.log2": ("log2f", 1),
    "math.log10": ("log10f", 1),
    "math.log1p": ("log1pf", 1),
    "math.powf": ("powf", 2),
    "math.cbrt": ("cbrtf", 1),
}

# Vector function ABI ISA letter and f32 lanes per torch's CPU capability.
_ISAS = {"AVX512": ("e", 16), "AVX2": ("d", 8)}


@dataclass(frozen=True)
class VectorMathLibrary:
    """The libmvec variants this host can call: one register's worth of f32 lanes per call."""

    isa: str  # vector function ABI letter: b (SSE4), d (AVX2), e (AVX-512)
    lanes: int
    functions: frozenset[str]  # math ops whose variant at this width the library defines

    def symbol(self, op_name: str) -> str:
        base, arity = VECTOR_FUNCTIONS[op_name]
        return f"_ZGV{self.isa}N{self.lanes}{'v' * arity}_{base}"


def host_vector_math() -> VectorMathLibrary | None:
    """libmvec at the widest vector width of the CPU the JIT compiles for
    (:func:`~helion_mlir.runtime.cpu.host_cpu.host_cpu`); None without it.

    The library is loaded into the process with global symbols, where the JIT finds them
    as it finds libm's.
    """
    return _vector_math(host_cpu().capability)


@functools.cache
def _vector_math(capability: str) -> VectorMathLibrary | None:
    isa, lanes = next((v for k, v in _ISAS.items() if capability.startswith(k)), ("b", 4))
    try:
        library = ctypes.CDLL(_LIBRARY, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        log.debug("no %s: vector math ops stay scalar libm calls", _LIBRARY)
        return None
    probe = VectorMathLibrary(isa, lanes, frozenset())
    found = frozenset(op for op in VECTOR_FUNCTIONS if hasattr(library, probe.symbol(op)))
    log.debug("%s: %d of %d functions at %d f32 lanes", _LIBRARY, len(found), len(VECTOR_FUNCTIONS), lanes)
    return VectorMathLibrary(isa, lanes, found) if found else None


def _f32_vector(op: ir.Operation) -> bool:
    """An op on f32 vectors, outside a ``vector.mask`` (whose region holds one op only)."""
    type_ = op.results[0].type
    masked = op.parent is not None and op.parent.name == "vector.mask"
    return isinstance(type_, ir.VectorType) and isinstance(type_.element_type, ir.F32Type) and not masked


def _splat(type_: ir.VectorType, number: float) -> ir.Value:
    attr = ir.FloatAttr.get(type_.element_type, number)
    return arith.constant(type_, ir.DenseElementsAttr.get_splat(type_, attr))


def _piece(flat: ir.Value, start: int, size: int, register: ir.VectorType) -> ir.Value:
    """Lanes ``start .. start + size`` of ``flat`` as one register (1.0 past ``size``)."""
    if size == register.shape[0]:
        return vector.extract_strided_slice(register, flat, [start], [size], [1])
    short = ir.VectorType.get([size], register.element_type)
    part = vector.extract_strided_slice(short, flat, [start], [size], [1]) if flat.type != short else flat
    return vector.insert_strided_slice(part, _splat(register, 1.0), [0], [1])


def _call_in_pieces(module: ir.Module, op: ir.Operation, library: VectorMathLibrary) -> ir.Value:
    """``op`` as one libmvec call per register-wide piece of its (flattened) operands."""
    type_ = op.results[0].type
    total = math.prod(type_.shape)
    register = ir.VectorType.get([library.lanes], type_.element_type)
    name = library.symbol(op.name)
    operands = [flattened(v, total) for v in op.operands]
    declare_pure_function(module, name, [register] * len(operands), register)
    flat_type = ir.VectorType.get([total], type_.element_type)
    result = ub.poison(flat_type)
    for start in range(0, total, library.lanes):
        size = min(library.lanes, total - start)
        pieces = [_piece(v, start, size, register) for v in operands]
        called = func.call([register], ir.FlatSymbolRefAttr.get(name), pieces)
        if size < library.lanes:
            short = ir.VectorType.get([size], type_.element_type)
            called = vector.extract_strided_slice(short, called, [0], [size], [1])
            if total == size:
                result = called
                break
        result = vector.insert_strided_slice(called, result, [start], [1])
    return result if result.type == type_ else vector.shape_cast(type_, result)


def _trigonometric(op: ir.Operation, b: Builder) -> ir.Value:
    """The polynomial where every lane's argument is within its reach; where one is not,
    the op itself (left for the library) for the lanes beyond."""
    x = op.operands[0]
    polynomial = polynomial_math.sin_or_cos(b, x, cosine=op.name == "math.cos")
    beyond = arith.cmpf(arith.CmpFPredicate.OGT, mmath.absf(x), b.f(polynomial_math.TRIG_REDUCTION_LIMIT))
    # Lanes past the end of a row of run-time length are the padding of a masked read,
    # poison: frozen, so that the branch never depends on poison (LLVM: undefined behaviour).
    frozen = llvm.freeze(flattened(beyond, math.prod(x.type.shape)))
    any_beyond = vector.reduction(ir.IntegerType.get_signless(1), ir.Attribute.parse("#vector.kind<or>"), frozen)
    branch = scf.IfOp(any_beyond, [x.type], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        exact = ir.Operation.create(op.name, results=[x.type], operands=[x]).result
        scf.yield_([arith.select(beyond, exact, polynomial)])
    with ir.InsertionPoint(branch.else_block):
        scf.yield_([polynomial])
    return branch.results[0]


# f32 vector math ops computed by polynomials.
_POLYNOMIALS: dict[str, Callable[[ir.Operation, Builder], ir.Value]] = {
    "math.expm1": lambda op, b: polynomial_math.expm1(b, op.operands[0]),
    "math.erf": lambda op, b: polynomial_math.erf(b, op.operands[0]),
    "math.sin": _trigonometric,
    "math.cos": _trigonometric,
}


@dataclass(frozen=True)
class VectorMathCounts:
    polynomials: int  # ops computed by polynomials
    calls: int  # ops computed by vector library calls


def lower_vector_math(module: ir.Module, library: VectorMathLibrary | None = None) -> VectorMathCounts:
    """Every f32 vector math op as a polynomial (expm1, erf; sin and cos up to
    ``TRIG_REDUCTION_LIMIT``) or as calls of ``library``'s vector variant (the others, and
    the sin and cos lanes beyond the limit); run after vectorization, with half-precision
    math already in f32. ``library`` defaults to this host's (:func:`host_vector_math`);
    without one those stay math ops (scalar libm calls)."""
    library = library or host_vector_math()
    expanded = ops_where(module, lambda op: op.name in _POLYNOMIALS and _f32_vector(op))
    for op in expanded:
        with ir.InsertionPoint(op), op.location:
            value = _POLYNOMIALS[op.name](op, Builder(op.results[0].type))
        op.results[0].replace_all_uses_with(value)
        op.erase()
    if library is None:
        return VectorMathCounts(len(expanded), 0)
    called = ops_where(module, lambda op: op.name in library.functions and _f32_vector(op))
    for op in called:
        with ir.InsertionPoint(op), op.location:
            value = _call_in_pieces(module, op, library)
        op.results[0].replace_all_uses_with(value)
        op.erase()
    return VectorMathCounts(len(expanded), len(called))
