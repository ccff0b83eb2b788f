"""Run an emitted MLIR module on CPU torch tensors, in-process.

The module is lowered to the LLVM dialect with torch-mlir's bundled MLIR and
JIT-compiled by its ``ExecutionEngine``; no external tool or runtime library is
involved. This is how the package checks that what it emits computes the same thing
as the Helion kernel it came from.

Functions that the requested one does not call are dropped first, so a module holding
many kernels costs only the one asked for. Lowering then runs in three stages, one pass
at a time so that a failure names its pass:

1. *To linalg-on-tensors*, depending on the output type. ``linalg-on-tensors``: nothing.
   ``tosa``: the TOSA-to-linalg/arith/tensor/scf conversions, then ``canonicalize`` to
   drop the dead ``tosa.const_shape`` operands they leave. ``stablehlo``: the shape
   dialect's broadcast checks become asserts and index arithmetic, then
   ``stablehlo-legalize-to-linalg``. ``raw`` (torch dialect): torch-mlir's
   backend-contract and linalg backend pipelines. Source-dialect ops that survive this
   stage have no lowering in the bundled MLIR; they are listed in an
   :class:`~helion_mlir.errors.ExecutionError`.
2. *Bufferization*: named linalg ops are generalized and elementwise chains fused,
   affine ops lowered (``affine.for``/``affine.if`` carrying tensors do not bufferize,
   their scf forms do), ``tm_tensor`` ops bufferized by torch-mlir's own pass, then
   one-shot bufferization across function boundaries with identity layouts, and the
   ownership-based deallocation pipeline.
3. *To LLVM*: ``memref.copy`` becomes loops (the wheel ships no MLIR runtime library
   that would implement it), ``tm_tensor``, linalg and vector transfer ops become
   loops, ``scf.forall`` becomes ``scf.parallel`` and then sequential loops, and every
   remaining dialect is converted to LLVM.

See :class:`CompiledFunction` for the calling convention.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine
from torch_mlir.passmanager import PassManager

from .errors import ArgumentError, ExecutionError
from .lru_cache import LRUCache
from .mlir_context import format_diagnostic, mlir_session
from .output_type import TORCH_BACKEND_PIPELINE, OutputType
from .verify import parse_module

__all__ = [
    "JIT_OPT_LEVEL",
    "CompiledFunction",
    "ScalarParam",
    "TensorParam",
    "clear_compile_cache",
    "compile_module",
]

log = logging.getLogger(__name__)

#: LLVM optimization level of the JIT. Measured on this package's test kernels: O3 neither
#: compiled nor ran faster than O2; O0 compiled 3-4x faster but ran a matmul 2-3x slower.
JIT_OPT_LEVEL = 2

# One entry per pass run: (name shown in errors, full pipeline text).
_Step = tuple[str, str]


def _steps(*passes: str) -> tuple[_Step, ...]:
    return tuple((p, f"builtin.module({p})") for p in passes)


def _named_pipeline(pipeline: str) -> _Step:
    return (pipeline.removeprefix("builtin.module(").removesuffix(")"), pipeline)


_LINALG_BACKEND_PIPELINE = OutputType.LINALG_ON_TENSORS.backend_pipeline
assert _LINALG_BACKEND_PIPELINE is not None

_TO_LINALG_STEPS: dict[OutputType, tuple[_Step, ...]] = {
    OutputType.LINALG_ON_TENSORS: (),
    OutputType.TOSA: _steps(
        "func.func(tosa-optional-decompositions)",
        "func.func(tosa-to-linalg-named)",
        "func.func(tosa-to-linalg)",
        "func.func(tosa-to-arith)",
        "func.func(tosa-to-tensor)",
        "func.func(tosa-to-scf)",
        "func.func(canonicalize)",
    ),
    OutputType.STABLEHLO: _steps(
        "func.func(convert-shape-constraints)",
        "convert-shape-to-std",
        "func.func(canonicalize)",  # removes shape.assuming regions with a true witness
        "func.func(stablehlo-legalize-to-linalg)",
        "convert-shape-to-std",  # the legalization creates shape.shape_of for dynamic sizes
    ),
    OutputType.RAW: (
        _named_pipeline(TORCH_BACKEND_PIPELINE),
        _named_pipeline(_LINALG_BACKEND_PIPELINE),
    ),
}

# Dialects none of whose ops may survive the first stage, per output type.
_SOURCE_DIALECTS: dict[OutputType, frozenset[str]] = {
    OutputType.LINALG_ON_TENSORS: frozenset(),
    OutputType.TOSA: frozenset({"tosa"}),
    OutputType.STABLEHLO: frozenset({"stablehlo", "shape"}),
    OutputType.RAW: frozenset({"torch", "torch_c"}),
}

_PRE_BUFFERIZE_STEPS: tuple[_Step, ...] = _steps(
    "func.func(linalg-generalize-named-ops)",
    "func.func(linalg-fuse-elementwise-ops)",
    "func.func(lower-affine)",
    "func.func(tm-tensor-bufferize)",
)

_BUFFERIZE_STEPS: tuple[_Step, ...] = _steps(
    # allow-return-allocs-from-loops: an scf.while whose condition forwards its tensor
    # carries a new buffer per iteration, which is refused without it.
    "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map}",
    "buffer-deallocation-pipeline",
    "convert-bufferization-to-memref",
)

_TO_LLVM_STEPS: tuple[_Step, ...] = _steps(
    "func.func(refback-munge-memref-copy)",
    "func.func(tm-tensor-to-loops)",
    "func.func(convert-linalg-to-loops)",
    "func.func(convert-vector-to-scf)",
    "scf-forall-to-parallel",
    "func.func(lower-affine)",
    "convert-scf-to-cf",
    "expand-strided-metadata",
    "lower-affine",
    "convert-vector-to-llvm",
    "finalize-memref-to-llvm",
    # bf16 arithmetic (and half-precision math) runs in f32 and bf16 conversions become integer ops, so the
    # JIT never needs compiler-rt helpers such as __truncsfbf2 (absent in-process).
    "func.func(math-extend-to-supported-types{target-type=f32})",
    "func.func(arith-emulate-unsupported-floats{source-types=bf16 target-type=f32})",
    "func.func(arith-expand{include-bf16=true})",
    "func.func(convert-math-to-llvm)",
    "convert-math-to-libm",
    "convert-arith-to-llvm",
    "convert-index-to-llvm",
    "convert-func-to-llvm",
    "convert-cf-to-llvm",
    "convert-ub-to-llvm",
    "reconcile-unrealized-casts",
)

# MLIR element type -> torch dtype of a tensor argument or result.
_TENSOR_DTYPES: dict[str, torch.dtype] = {
    "f64": torch.float64,
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "i16": torch.int16,
    "i8": torch.int8,
    "i1": torch.bool,
}

# MLIR scalar type -> (ctypes type it is passed as, Python types accepted for it).
_SCALAR_KINDS: dict[str, tuple[type, tuple[type, ...]]] = {
    "i1": (ctypes.c_bool, (bool,)),
    "i8": (ctypes.c_int8, (int,)),
    "i16": (ctypes.c_int16, (int,)),
    "i32": (ctypes.c_int32, (int,)),
    "i64": (ctypes.c_int64, (int,)),
    "index": (ctypes.c_int64, (int,)),
    "f32": (ctypes.c_float, (int, float)),
    "f64": (ctypes.c_double, (int, float)),
}

# memref.get_global fills the "allocated" field of a descriptor with this marker: such
# a buffer is a constant inside the compiled code and must never be freed.
_GLOBAL_MEMREF_MARKER = 0xDEADBEEF

_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


@dataclass(frozen=True)
class TensorParam:
    """A ranked-tensor argument or result; ``None`` in ``dims`` is a dynamic (``?``) size."""

    mlir_type: str
    dims: tuple[int | None, ...]
    dtype: torch.dtype
    rank: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rank", len(self.dims))


@dataclass(frozen=True)
class ScalarParam:
    """A scalar argument, passed by value as ``ctype``."""

    mlir_type: str
    ctype: type
    accepted: tuple[type, ...]


_Param = TensorParam | ScalarParam


@functools.cache
def _descriptor_type(rank: int) -> type[ctypes.Structure]:
    """The C layout of a ranked memref descriptor, the unit of the C interface."""
    fields: list[tuple[str, type]] = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
    ]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRefDescriptor{rank}D", (ctypes.Structure,), {"_fields_": fields})


def _results_type(results: Sequence[TensorParam]) -> type[ctypes.Structure]:
    """The C layout the C interface writes results into: one descriptor per result.

    One result is written as its bare descriptor and several as the LLVM struct of
    their descriptors; both have this layout (every field is 8 bytes, so no padding).
    """
    fields = [(f"result{i}", _descriptor_type(r.rank)) for i, r in enumerate(results)]
    return type("Results", (ctypes.Structure,), {"_fields_": fields})


def _row_major_strides(sizes: Sequence[int]) -> list[int]:
    strides = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(sizes[i + 1], 1)
    return strides


class CompiledFunction:
    """A JIT-compiled MLIR function that takes and returns CPU torch tensors.

    Calling convention. The function is lowered with identity-layout memrefs at its
    boundary and marked ``llvm.emit_c_interface``. It is called through the engine's
    packed wrapper of ``_mlir_ciface_<name>``: the first slot points to the result
    descriptors (when there are results), then one slot per argument, pointing to a
    memref descriptor for a tensor (a contiguous copy is made of a non-contiguous
    tensor) or to the value of a scalar. bf16 and f16 tensors travel as raw pointers, so
    no dtype conversion happens on the way in or out.

    Tensor arguments are marked ``bufferization.writable = false``: the compiled code
    never writes into a caller's tensor, and a destination tensor the kernel updates is
    copied to a fresh buffer first, as value semantics demand. Results come back as
    memrefs the compiled code allocated with ``malloc`` (the deallocation pipeline
    clones a result that would alias an argument or a constant, so the caller owns every
    result buffer); each is copied into a new torch tensor and then freed.

    Results are returned as memrefs rather than rewritten into caller-allocated
    out-parameters (``buffer-results-to-out-params``) because only the compiled code
    knows the size of a dynamically shaped result before it runs. The price is one copy
    per result, small next to the kernel; in exchange the returned tensors own ordinary
    torch storage that outlives the engine.

    Arguments are checked against the static signature only. Relations between dynamic
    sizes are the module's business: a failing ``cf.assert`` aborts the process, as it
    does in any MLIR-compiled program.

    Calls do not take the MLIR lock: the compiled code touches only its arguments and
    its own allocations, so several threads may call the same function at once.
    """

    def __init__(
        self,
        engine: ExecutionEngine,
        entry_address: int,
        func_name: str,
        output_type: OutputType,
        params: tuple[_Param, ...],
        results: tuple[TensorParam, ...],
        *,
        lower_seconds: float,
        jit_seconds: float,
    ) -> None:
        self._engine = engine  # owns the compiled code behind the entry point
        self._entry: Callable[[ctypes.Array], None] = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            entry_address
        )
        self._results_type = _results_type(results)
        self.func_name = func_name
        self.output_type = output_type
        self.params = params
        self.results = results
        self.lower_seconds = lower_seconds
        self.jit_seconds = jit_seconds

    @property
    def signature(self) -> str:
        """The tensor-level type the arguments are checked against."""
        args = ", ".join(p.mlir_type for p in self.params)
        results = ", ".join(r.mlir_type for r in self.results)
        return f"@{self.func_name}({args}) -> ({results})"

    def __repr__(self) -> str:
        return f"CompiledFunction({self.signature}, output_type='{self.output_type.value}')"

    def __call__(self, *args: torch.Tensor | int | float | bool) -> tuple[torch.Tensor, ...]:
        """Run the function on ``args`` and return its results as new tensors.

        Raises :class:`~helion_mlir.errors.ArgumentError`, before anything runs, when the
        arguments do not match the signature.
        """
        if len(args) != len(self.params):
            raise ArgumentError(
                f"{self.signature} takes {len(self.params)} argument(s), got {len(args)}"
            )
        first = 1 if self.results else 0
        packed = (ctypes.c_void_p * (first + len(args)))()
        results = self._results_type()
        keep_alive: list[object] = []
        if self.results:
            result_pointer = ctypes.c_void_p(ctypes.addressof(results))
            keep_alive.append(result_pointer)
            packed[0] = ctypes.addressof(result_pointer)
        input_ranges: list[tuple[int, int]] = []
        for index, (param, value) in enumerate(zip(self.params, args)):
            if isinstance(param, TensorParam):
                tensor = self._check_tensor(index, param, value)
                descriptor = _descriptor_type(param.rank)()
                descriptor.allocated = descriptor.aligned = tensor.data_ptr()
                if param.rank:
                    descriptor.sizes[:] = tensor.shape
                    descriptor.strides[:] = _row_major_strides(tensor.shape)
                pointer = ctypes.c_void_p(ctypes.addressof(descriptor))
                keep_alive += (tensor, descriptor, pointer)
                packed[first + index] = ctypes.addressof(pointer)
                start = tensor.data_ptr()
                input_ranges.append((start, start + tensor.numel() * tensor.element_size()))
            else:
                scalar = param.ctype(self._check_scalar(index, param, value))
                keep_alive.append(scalar)
                packed[first + index] = ctypes.addressof(scalar)
        self._entry(packed)
        return self._take_results(results, input_ranges)

    def _where(self, index: int) -> str:
        return f"argument #{index} ({self.params[index].mlir_type}) of @{self.func_name}"

    def _check_tensor(self, index: int, param: TensorParam, value: object) -> torch.Tensor:
        if not isinstance(value, torch.Tensor):
            raise ArgumentError(
                f"{self._where(index)}: expected a torch.Tensor, got {type(value).__name__}"
            )
        problem = None
        if value.device.type != "cpu":
            problem = f"expected a CPU tensor, got one on {value.device}"
        elif value.layout != torch.strided:
            problem = f"expected a dense tensor, got layout {value.layout}"
        elif value.dtype != param.dtype:
            problem = f"expected dtype {param.dtype}, got {value.dtype}"
        elif value.dim() != param.rank:
            problem = f"expected rank {param.rank}, got shape {tuple(value.shape)}"
        else:
            for dim, (expected, actual) in enumerate(zip(param.dims, value.shape)):
                if expected is not None and expected != actual:
                    problem = f"dimension {dim} must be {expected}, got shape {tuple(value.shape)}"
                    break
        if problem is not None:
            raise ArgumentError(f"{self._where(index)}: {problem}")
        # Identity-layout memrefs describe a dense row-major buffer.
        return value if value.is_contiguous() else value.contiguous()

    def _check_scalar(self, index: int, param: ScalarParam, value: object) -> int | float | bool:
        # bool is an int to Python; an integer parameter must not silently take a flag.
        if not isinstance(value, param.accepted) or (
            isinstance(value, bool) and bool not in param.accepted
        ):
            expected = " or ".join(t.__name__ for t in param.accepted)
            raise ArgumentError(
                f"{self._where(index)}: expected {expected}, got {type(value).__name__}"
            )
        if param.accepted == (int,):
            bits = ctypes.sizeof(param.ctype) * 8
            if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):  # type: ignore[operator]
                raise ArgumentError(
                    f"{self._where(index)}: {value} does not fit in {param.mlir_type}"
                )
        return value  # type: ignore[return-value]

    def _take_results(
        self, results: ctypes.Structure, input_ranges: Sequence[tuple[int, int]]
    ) -> tuple[torch.Tensor, ...]:
        """Copy every result into a new tensor, then free the buffers the code allocated."""
        descriptors = [getattr(results, f"result{i}") for i in range(len(self.results))]
        try:
            return tuple(_copy_out(d, p) for d, p in zip(descriptors, self.results))
        finally:
            # A set: one buffer returned twice is freed once. Never free a constant or,
            # should the deallocation pipeline ever fail to clone one, a caller's tensor.
            owned = {
                d.allocated
                for d in descriptors
                if d.allocated
                and d.allocated != _GLOBAL_MEMREF_MARKER
                and not any(lo <= d.allocated < hi for lo, hi in input_ranges)
            }
            for allocated in owned:
                _libc.free(allocated)


def _copy_out(descriptor: ctypes.Structure, param: TensorParam) -> torch.Tensor:
    """A new contiguous tensor holding the elements a result descriptor points to."""
    sizes = list(descriptor.sizes) if param.rank else []
    if 0 in sizes:
        return torch.empty(sizes, dtype=param.dtype)
    strides = list(descriptor.strides) if param.rank else []
    itemsize = param.dtype.itemsize
    extent = 1 + sum((size - 1) * stride for size, stride in zip(sizes, strides))
    start = descriptor.aligned + descriptor.offset * itemsize
    raw = (ctypes.c_byte * (extent * itemsize)).from_address(start)
    source = torch.frombuffer(raw, dtype=torch.uint8).view(param.dtype).as_strided(sizes, strides)
    return source.clone(memory_format=torch.contiguous_format)


# Each entry holds an ExecutionEngine with its machine code; the least recently used go first.
COMPILED_FUNCTION_CACHE_CAPACITY = 256
_CACHE: "LRUCache[CompiledFunction]" = LRUCache(COMPILED_FUNCTION_CACHE_CAPACITY)
_PASS_MANAGERS: dict[str, PassManager] = {}


def compile_module(
    module_text: str,
    func_name: str,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
) -> CompiledFunction:
    """Lower ``@func_name`` of ``module_text`` to LLVM and JIT-compile it for this CPU.

    ``output_type`` says which dialects the module is written in, and so which
    conversions run first (see the module docstring). Compiled functions are cached on
    the module text, function name and output type (the most recently used
    :data:`COMPILED_FUNCTION_CACHE_CAPACITY`), so a kernel that is checked many times is
    compiled once.

    Raises :class:`~helion_mlir.errors.MLIRVerificationError` when the text does not
    parse, and :class:`~helion_mlir.errors.ExecutionError` when a pass fails (naming the
    pass and quoting its diagnostics), when the bundled MLIR has no lowering for some of
    the module's ops, or when the signature has types that cannot cross from Python.
    """
    kind = OutputType.parse(output_type)
    key = (hashlib.sha256(module_text.encode()).hexdigest(), func_name, kind)
    with mlir_session() as (ctx, diagnostics):
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        started = time.perf_counter()
        lowering = _Lowering(
            parse_module(module_text, what=f"module holding @{func_name}"),
            func_name,
            kind,
            diagnostics,
        )
        lowering.keep_only_the_function()
        lowering.run(_TO_LINALG_STEPS[kind])
        lowering.reject_ops(
            lambda name: name.split(".", 1)[0] in _SOURCE_DIALECTS[kind],
            "torch-mlir's bundled MLIR has no lowering to linalg for {ops}; "
            "a module using them cannot be executed",
        )
        params, results = lowering.signature()
        lowering.prepare_boundary(params)
        lowering.run(_PRE_BUFFERIZE_STEPS)
        _mark_fresh_buffers_restrict(lowering.module)
        lowering.run(_BUFFERIZE_STEPS)
        lowering.define_bf16_truncation()
        lowering.run(_TO_LLVM_STEPS)
        lowering.reject_ops(
            lambda name: name != "builtin.module" and not name.startswith("llvm."),
            "these ops were not lowered to the LLVM dialect: {ops}",
        )
        lowered = time.perf_counter()
        try:
            engine = ExecutionEngine(lowering.module, opt_level=JIT_OPT_LEVEL)
            engine.initialize()
            # Machine code is generated on the first lookup, so it belongs to the JIT time.
            entry_address = engine.raw_lookup(f"_mlir_ciface_{func_name}")
        except RuntimeError as err:
            raise lowering.error(f"JIT compilation failed: {err}", list(diagnostics)) from None
        if not entry_address:
            raise lowering.error("the JIT-compiled code has no C interface for the function")
        jitted = time.perf_counter()
        log.debug(
            "@%s (%s): lowered to LLVM in %.1f ms, JIT-compiled at O%d in %.1f ms",
            func_name,
            kind.value,
            (lowered - started) * 1e3,
            JIT_OPT_LEVEL,
            (jitted - lowered) * 1e3,
        )
        compiled = CompiledFunction(
            engine,
            entry_address,
            func_name,
            kind,
            params,
            results,
            lower_seconds=lowered - started,
            jit_seconds=jitted - lowered,
        )
        _CACHE.put(key, compiled)
        return compiled


def clear_compile_cache() -> None:
    """Forget every compiled function (one a caller still holds keeps working)."""
    with mlir_session():
        _CACHE.clear()


_TRUNCSFBF2 = """
func.func private @__truncsfbf2(%x: f32) -> bf16 attributes {passthrough = ["noinline", "optnone"]} {
  %bits = arith.bitcast %x : f32 to i32
  %c16 = arith.constant 16 : i32
  %c1 = arith.constant 1 : i32
  %bias = arith.constant 32767 : i32
  %quiet_nan = arith.constant 32704 : i16
  %high = arith.shrui %bits, %c16 : i32
  %lsb = arith.andi %high, %c1 : i32
  %rounding = arith.addi %bias, %lsb : i32
  %rounded = arith.addi %bits, %rounding : i32
  %shifted = arith.shrui %rounded, %c16 : i32
  %narrow = arith.trunci %shifted : i32 to i16
  %is_nan = arith.cmpf uno, %x, %x : f32
  %result = arith.select %is_nan, %quiet_nan, %narrow : i16
  %as_bf16 = arith.bitcast %result : i16 to bf16
  return %as_bf16 : bf16
}
"""


def _mark_fresh_buffers_restrict(module: ir.Module) -> None:
    """Let one-shot bufferization accept the ``to_tensor`` ops ``tm-tensor-bufferize`` leaves.

    That pass wraps each output buffer it allocates in a ``bufferization.to_tensor``
    without the ``restrict`` flag, which one-shot analysis refuses. A buffer straight
    from ``memref.alloc`` with a single ``to_tensor`` user is aliased by no other
    tensor, which is what ``restrict`` asserts.
    """

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "bufferization.to_tensor" and "restrict" not in op.attributes:
            buffer = op.operands[0]
            source = buffer.owner
            views = [use for use in buffer.uses if use.owner.name == "bufferization.to_tensor"]
            if (
                isinstance(source, ir.Operation | ir.OpView)
                and source.name == "memref.alloc"
                and len(views) == 1
            ):
                op.attributes["restrict"] = ir.UnitAttr.get()
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


@dataclass
class _Lowering:
    """One module on its way to LLVM, and what an error about it must mention."""

    module: ir.Module
    func_name: str
    kind: OutputType
    diagnostics: list[str]

    def error(
        self, message: str, diagnostics: Sequence[str] = (), *, pass_name: str | None = None
    ) -> ExecutionError:
        return ExecutionError(
            message,
            func_name=self.func_name,
            output_type=self.kind.value,
            pass_name=pass_name,
            diagnostics=diagnostics,
        )

    def function(self) -> ir.OpView:
        functions = {
            ir.StringAttr(op.attributes["sym_name"]).value: op
            for op in self.module.body.operations
            if op.operation.name == "func.func"
        }
        if self.func_name not in functions:
            names = ", ".join(sorted(functions)) or "none"
            raise self.error(f"the module has no func.func of that name (it has: {names})")
        return functions[self.func_name]

    def keep_only_the_function(self) -> None:
        """Drop every function ``@func_name`` does not call: no time spent compiling them."""
        target = self.function()  # fails early on a wrong name
        for op in self.module.body.operations:
            is_function = op.operation.name == "func.func"
            if is_function and ir.StringAttr(op.attributes["sym_name"]).value != self.func_name:
                op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        if "sym_visibility" in target.attributes:
            del target.attributes["sym_visibility"]  # public: kept, and given a C interface
        self.run(_steps("symbol-dce"))

    def define_bf16_truncation(self) -> None:
        """Define ``__truncsfbf2`` (f32 -> bf16, round to nearest even) in the module.

        bf16 conversions are expanded to integer ops, but LLVM's optimizer recognizes that
        idiom and turns it back into an ``fptrunc``, which x86 lowers to a call of this
        compiler-rt helper; the JIT has no compiler-rt. Our definition is ``optnone`` so the
        optimizer cannot fold it into a call of itself.
        """
        if "bf16" not in str(self.module.operation):
            return
        helper = ir.Module.parse(_TRUNCSFBF2)
        for op in helper.body.operations:
            op.operation.clone(ir.InsertionPoint(self.module.body))

    def run(self, steps: Sequence[_Step]) -> None:
        for name, pipeline in steps:
            manager = _PASS_MANAGERS.get(pipeline)
            if manager is None:
                manager = _PASS_MANAGERS[pipeline] = PassManager.parse(pipeline)
            already_reported = len(self.diagnostics)
            try:
                manager.run(self.module.operation)
            except ir.MLIRError as err:
                found = self.diagnostics[already_reported:] + [
                    format_diagnostic(d) for d in err.error_diagnostics
                ]
                raise self.error("the pass failed", found or [str(err)], pass_name=name) from None

    def reject_ops(self, is_left_over: Callable[[str], bool], message: str) -> None:
        left: set[str] = set()

        def visit(op: ir.Operation) -> ir.WalkResult:
            if is_left_over(op.name):
                left.add(op.name)
            return ir.WalkResult.ADVANCE

        self.module.operation.walk(visit)
        if left:
            raise self.error(message.format(ops=", ".join(sorted(left))))

    def _param(self, type_: ir.Type, what: str) -> _Param:
        if isinstance(type_, ir.RankedTensorType):
            element = str(type_.element_type)
            if element not in _TENSOR_DTYPES:
                raise self.error(
                    f"{what} has type {type_}: element type {element} has no torch dtype here"
                )
            dims = tuple(None if ir.ShapedType.is_dynamic_size(d) else d for d in type_.shape)
            return TensorParam(str(type_), dims, _TENSOR_DTYPES[element])
        if str(type_) in _SCALAR_KINDS:
            ctype, accepted = _SCALAR_KINDS[str(type_)]
            return ScalarParam(str(type_), ctype, accepted)
        raise self.error(
            f"{what} has type {type_}; only ranked tensors and "
            f"{', '.join(_SCALAR_KINDS)} scalars can be passed"
        )

    def signature(self) -> tuple[tuple[_Param, ...], tuple[TensorParam, ...]]:
        """The tensor-level signature, read after the first stage (no torch types left)."""
        func_type = ir.FunctionType(ir.TypeAttr(self.function().attributes["function_type"]).value)
        params = tuple(self._param(t, f"argument #{i}") for i, t in enumerate(func_type.inputs))
        results: list[TensorParam] = []
        for i, type_ in enumerate(func_type.results):
            result = self._param(type_, f"result #{i}")
            if not isinstance(result, TensorParam):
                raise self.error(f"result #{i} has type {type_}; only tensors can be returned")
            results.append(result)
        return params, tuple(results)

    def prepare_boundary(self, params: Sequence[_Param]) -> None:
        """Ask for a C interface and forbid writes into the caller's tensors."""
        func = self.function()
        func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        existing = (
            list(ir.ArrayAttr(func.attributes["arg_attrs"]))
            if "arg_attrs" in func.attributes
            else [ir.DictAttr.get({}) for _ in params]
        )
        updated = []
        for param, attrs in zip(params, existing):
            entries = {named.name: named.attr for named in ir.DictAttr(attrs)}
            if isinstance(param, TensorParam):
                entries["bufferization.writable"] = ir.BoolAttr.get(False)
            updated.append(ir.DictAttr.get(entries))
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(updated)
