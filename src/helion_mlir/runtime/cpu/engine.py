"""Run an emitted MLIR module on CPU torch tensors, in-process.

The module is lowered to the LLVM dialect by one of the pipelines of :mod:`.pipelines`
with torch-mlir's bundled MLIR and JIT-compiled by its ``ExecutionEngine``; no external tool or runtime library is
involved. This is how the package checks that what it emits computes the same thing as
the Helion kernel it came from. See :class:`CompiledFunction` for the calling convention.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

import torch
from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine

from ...caches import LRUCache, cache_directory
from ...mlir_context import mlir_session
from ...mlir_types import PACKED_PAIR_DTYPES
from ...output_type import OutputType
from . import native_cache
from .check_failures import CheckFailures
from .host_cpu import host_cpu
from .openmp import register_openmp
from .packed_pairs import pack_pairs, unpack_pairs
from ..function import NativeFunction
from ..params import Param, ScalarParam, TensorParam, check_scalar, check_tensor, check_writable
from .pipelines import DUMP_ENVIRONMENT_VARIABLE, PIPELINES, ModuleLowering, Pipeline, PipelineOptions, lower_to_llvm

__all__ = [
    "JIT_OPT_LEVEL",
    "COMPILED_FUNCTION_CACHE_BYTES",
    "CompiledFunction",
    "Pipeline",
    "ScalarParam",
    "TensorParam",
    "clear_compile_cache",
    "compile_module",
    "engine_bytes",
    "lower_module",
]

log = logging.getLogger(__name__)

#: LLVM optimization level of the JIT. Measured on this package's test kernels: O3 neither
#: compiled nor ran faster than O2; O0 compiled 3-4x faster but ran a matmul 2-3x slower.
JIT_OPT_LEVEL = 2

# memref.get_global fills the "allocated" field of a descriptor with this marker: such
# a buffer is a constant inside the compiled code and must never be freed.
_GLOBAL_MEMREF_MARKER = 0xDEADBEEF

_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


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


class _Packing:
    """One thread's argument buffers for a compiled function: a descriptor per tensor, a
    cell per scalar and the packed array of pointers to them, built once and refilled on
    every call (static sizes and strides are written once)."""

    def __init__(self, params: Sequence[Param], results_type: type[ctypes.Structure] | None) -> None:
        first = 1 if results_type is not None else 0
        self.packed = (ctypes.c_void_p * (first + len(params)))()
        self.results = results_type() if results_type is not None else None
        self.cells: list[ctypes.Structure | ctypes._SimpleCData] = []
        self._pointers: list[ctypes.c_void_p] = []
        if self.results is not None:
            self._pointers.append(ctypes.c_void_p(ctypes.addressof(self.results)))
            self.packed[0] = ctypes.addressof(self._pointers[-1])
        for index, param in enumerate(params):
            if isinstance(param, TensorParam):
                cell = _descriptor_type(param.rank)()
                if param.rank and None not in param.dims:
                    cell.sizes[:] = param.dims
                    cell.strides[:] = _row_major_strides(param.dims)  # type: ignore[arg-type]
                self._pointers.append(ctypes.c_void_p(ctypes.addressof(cell)))
                self.packed[first + index] = ctypes.addressof(self._pointers[-1])
            else:
                cell = param.ctype()
                self.packed[first + index] = ctypes.addressof(cell)
            self.cells.append(cell)


class CompiledFunction(NativeFunction):
    """A JIT-compiled MLIR function that takes and returns CPU torch tensors (its
    :attr:`nbytes` estimates the engine's memory, :func:`engine_bytes`).

    Calling convention. The function is lowered with identity-layout memrefs at its
    boundary and marked ``llvm.emit_c_interface``. It is called through the engine's
    packed wrapper of ``_mlir_ciface_<name>``: the first slot points to the result
    descriptors (when results are returned), then one slot per argument, pointing to a
    memref descriptor for a tensor (a contiguous copy is made of a non-contiguous
    tensor) or to the value of a scalar. bf16, f16 and float8 tensors travel as raw
    pointers, so no dtype conversion happens on the way in or out; an unsigned tensor is
    accepted for the signless integer of its width (uint8 for ``i8``, uint64 for ``i64``). A float4_e2m1fn_x2 tensor (or its uint8
    bytes) is unpacked to one 4-bit value per byte on the way in and packed again on the
    way out (:mod:`.packed_pairs`). The descriptors and the pointer array are built once
    per calling thread and only refilled per call.

    By default tensor arguments are marked ``bufferization.writable = false``: the
    compiled code never writes into a caller's tensor, and a destination tensor the kernel
    updates is copied to a fresh buffer first, as value semantics demand. Results come
    back as memrefs the compiled code allocated with ``malloc`` (the deallocation pipeline
    clones a result that would alias an argument or a constant, so the caller owns every
    result buffer); each is copied into a new torch tensor and then freed.

    Compiled ``in_place`` (fast pipeline), the destination arguments are written instead:
    a result held by an argument (:attr:`held_by`) is returned as that very tensor, with
    no copy. When such an argument is not contiguous or shares memory with another
    argument, the code works on a contiguous copy that is written back afterwards.

    Results are returned as memrefs rather than rewritten into caller-allocated
    out-parameters (``buffer-results-to-out-params``) because only the compiled code
    knows the size of a dynamically shaped result before it runs.

    Arguments are checked against the static signature only. Relations between dynamic
    sizes are the module's business: a failing ``cf.assert`` aborts the process, as it
    does in any MLIR-compiled program, unless the function was compiled ``checked``: then
    every memory access is checked at run time and a failed check (or assert) raises an
    :class:`~helion_mlir.errors.OutOfBoundsAccessError` (or another
    :class:`~helion_mlir.errors.RuntimeCheckError`) naming the kernel source line, after
    the code returned early, with nothing of the call's results kept.

    Calls do not take the MLIR lock and release the GIL: the compiled code touches only its
    arguments and its own allocations, and each thread packs its arguments into buffers
    of its own, so several threads may call the same function at once.
    """

    def __init__(
        self,
        engine: object,
        entry_address: int,
        func_name: str,
        output_type: OutputType,
        params: tuple[Param, ...],
        results: tuple[TensorParam, ...],
        *,
        lower_seconds: float,
        jit_seconds: float,
        nbytes: int,
        pipeline: Pipeline = Pipeline.PLAIN,
        threads: int = 1,
        held_by: tuple[int | None, ...] | None = None,
        check_failures: CheckFailures | None = None,
        from_disk: bool = False,
    ) -> None:
        super().__init__(func_name, output_type, params, results, nbytes=nbytes)
        #: Whether the code was loaded from the native cache (:mod:`.native_cache`) rather than compiled.
        self.from_disk = from_disk
        self._engine = engine  # owns the compiled code: an ExecutionEngine, or a library from the native cache
        #: Checked mode: the function's run-time checks (None when compiled unchecked).
        self.check_failures = check_failures
        self._entry: Callable[[ctypes.Array], None] = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            entry_address
        )
        self.lower_seconds = lower_seconds
        self.jit_seconds = jit_seconds
        self.pipeline = pipeline
        self.threads = threads
        #: Per result, the argument whose tensor holds it after a call (in place), or None.
        self.held_by: tuple[int | None, ...] = held_by if held_by is not None else (None,) * len(results)
        self._returned = tuple(r for r, h in zip(results, self.held_by) if h is None)
        self._results_type = _results_type(self._returned) if self._returned else None
        self._written = tuple(sorted({h for h in self.held_by if h is not None}))
        self._local = threading.local()
        # Per argument: (index, its TensorParam or None for a scalar, its sizes if all static).
        self._checks = tuple(
            (i, p, p.dims if None not in p.dims else None) if isinstance(p, TensorParam) else (i, None, None)
            for i, p in enumerate(params)
        )

    def __call__(self, *args: torch.Tensor | int | float | bool) -> tuple[torch.Tensor, ...]:
        """Run the function on ``args`` and return its results.

        Raises :class:`~helion_mlir.errors.ArgumentError`, before anything runs, when the
        arguments do not match the signature.
        """
        self._check_count(args)
        packing = self._local.__dict__.get("packing")
        if packing is None:
            packing = self._local.packing = _Packing(self.params, self._results_type)
        cells = packing.cells
        passed: list[object] = list(args)  # what the code sees: contiguous tensors, checked scalars
        spans: dict[int, tuple[int, int]] = {}  # argument -> (first byte, end) of every tensor
        for index, param, static_dims in self._checks:
            value = args[index]
            if param is None:  # a scalar
                cells[index].value = check_scalar(self._where(index), self.params[index], value, index)  # type: ignore[arg-type,union-attr]
                continue
            if not (
                isinstance(value, torch.Tensor)
                and value.dtype == param.dtype
                and value.is_cpu
                and value.layout == torch.strided
                and (value.shape == static_dims if static_dims is not None else value.dim() == param.rank)
                and value.is_contiguous()
            ):  # not the common case: full checks, a contiguous copy or unpacked pairs when needed
                value = check_tensor(self._where(index), param, value, index)
                if param.dtype in PACKED_PAIR_DTYPES:
                    value = unpack_pairs(value)
                passed[index] = value
            cell = cells[index]
            cell.allocated = cell.aligned = start = value.data_ptr()  # type: ignore[union-attr]
            spans[index] = (start, start + value.nbytes)
            if static_dims is None and param.rank:
                cell.sizes[:] = value.shape  # type: ignore[union-attr]
                cell.strides[:] = _row_major_strides(value.shape)  # type: ignore[union-attr]
        staged = self._stage_written(args, passed, packing, spans) if self._written else ()
        self._entry(packing.packed)
        if self.check_failures is not None:
            self.check_failures.raise_failure()
        for original, copy in staged:
            original.copy_(copy)
        if not self._returned:
            return tuple(args[held] for held in self.held_by)  # type: ignore[index,misc]
        returned = iter(self._take_results(packing.results, passed))  # type: ignore[arg-type]
        return tuple(next(returned) if held is None else args[held] for held in self.held_by)  # type: ignore[misc]

    def _stage_written(
        self, args: Sequence[object], passed: list[object], packing: _Packing, spans: dict[int, tuple[int, int]]
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Arguments written in place that the code cannot write directly (a contiguous copy
        was passed, or their memory overlaps another argument's) work on a copy; returns
        (argument, copy) pairs to write back after the call."""
        staged = []
        for index in self._written:
            original, tensor = args[index], passed[index]
            assert isinstance(original, torch.Tensor) and isinstance(tensor, torch.Tensor)
            check_writable(self._where(index), original, index)
            if tensor is original:
                start, end = spans[index]
                if start < end and _overlaps_another(index, start, end, spans):
                    tensor = passed[index] = original.clone()
                    cell = packing.cells[index]
                    cell.allocated = cell.aligned = tensor.data_ptr()  # type: ignore[union-attr]
            if tensor is not original:
                staged.append((original, tensor))
        return staged

    def _take_results(self, results: ctypes.Structure, passed: Sequence[object]) -> tuple[torch.Tensor, ...]:
        """Copy every returned result into a new tensor, then free the buffers the code allocated."""
        descriptors = [getattr(results, f"result{i}") for i in range(len(self._returned))]
        input_ranges = [_byte_range(t) for t in passed if isinstance(t, torch.Tensor)]
        try:
            return tuple(_copy_out(d, p) for d, p in zip(descriptors, self._returned))
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


def _overlaps_another(index: int, start: int, end: int, spans: dict[int, tuple[int, int]]) -> bool:
    """Whether bytes [start, end) of argument ``index`` overlap another argument's."""
    for other, (first, stop) in spans.items():
        if other != index and first < end and start < stop:
            return True
    return False


def _byte_range(tensor: torch.Tensor) -> tuple[int, int]:
    start = tensor.data_ptr()
    return start, start + tensor.nbytes


def _copy_out(descriptor: ctypes.Structure, param: TensorParam) -> torch.Tensor:
    """A new contiguous tensor holding the elements a result descriptor points to."""
    sizes = list(descriptor.sizes) if param.rank else []
    if 0 in sizes:
        return torch.empty(sizes, dtype=param.dtype)
    strides = list(descriptor.strides) if param.rank else []
    itemsize = param.dtype.itemsize  # 1 for a packed dtype too: one 4-bit value per byte
    extent = 1 + sum((size - 1) * stride for size, stride in zip(sizes, strides))
    start = descriptor.aligned + descriptor.offset * itemsize
    raw = (ctypes.c_byte * (extent * itemsize)).from_address(start)
    if param.dtype in PACKED_PAIR_DTYPES:
        return pack_pairs(torch.frombuffer(raw, dtype=torch.uint8).as_strided(sizes, strides), param.dtype)
    source = torch.frombuffer(raw, dtype=torch.uint8).view(param.dtype).as_strided(sizes, strides)
    return source.clone(memory_format=torch.contiguous_format)


# What an ExecutionEngine holds, measured by scripts/compile_memory.py over the examples
# (resident memory per engine against the ops of its LLVM-dialect module; docs/benchmarks.md,
# "Memory while compiling many configs"): mostly a fixed cost (LLVM's JIT, its target
# machine, its memory manager), plus the code, which grows with the module.
ENGINE_BASE_BYTES = 686 * 1024
ENGINE_BYTES_PER_LLVM_OP = 75


def engine_bytes(llvm_ops: int) -> int:
    """Estimated memory an ExecutionEngine holds for a module of ``llvm_ops`` LLVM-dialect ops."""
    return ENGINE_BASE_BYTES + ENGINE_BYTES_PER_LLVM_OP * llvm_ops


#: Bytes of compiled functions the cache keeps (by :attr:`CompiledFunction.nbytes`, the
#: least recently used go first): about 85 engines of ~0.75 MiB. A function a caller
#: still holds stays alive and usable after it leaves the cache.
COMPILED_FUNCTION_CACHE_BYTES = 64 * 2**20
_CACHE: "LRUCache[CompiledFunction]" = LRUCache(COMPILED_FUNCTION_CACHE_BYTES, weigh=lambda f: f.nbytes)


def _options(pipeline: Pipeline | str, output_type: OutputType | str, threads: int | None, in_place: bool,
             checked: bool) -> tuple[Pipeline, PipelineOptions]:
    """The pipeline and its options, parsed and checked once for a lowering."""
    pipeline = Pipeline.parse(pipeline)
    return pipeline, PipelineOptions.of(pipeline, output_type, threads, in_place, checked)


def _lower(module_text: str, func_name: str, pipeline: Pipeline, options: PipelineOptions,
           diagnostics: list[str]) -> ModuleLowering:
    """Run ``pipeline`` on the module; the caller holds the MLIR session of ``diagnostics``."""
    return lower_to_llvm(module_text, func_name, pipeline, PIPELINES[pipeline], options, diagnostics)


def _count_ops(lowering: ModuleLowering) -> tuple[int, bool]:
    """Ops of the LLVM-dialect module (what the JIT compiles), and whether parallel loops
    in it run on OpenMP workers (tile nests or the module's own)."""
    count = 0
    openmp = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal count, openmp
        count += 1
        openmp = openmp or op.name.startswith("omp.")
        return ir.WalkResult.ADVANCE

    lowering.module.operation.walk(visit)
    return count, openmp


def lower_module(
    module_text: str,
    func_name: str,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    pipeline: Pipeline | str = Pipeline.FAST,
    threads: int | None = None,
    in_place: bool = False,
    checked: bool = False,
) -> str:
    """The LLVM-dialect module :func:`compile_module` would JIT-compile (same options), as
    text: what the pipelines make of a module, for inspection and tests."""
    pipeline, options = _options(pipeline, output_type, threads, in_place, checked)
    with mlir_session() as (_ctx, diagnostics):
        return str(_lower(module_text, func_name, pipeline, options, diagnostics).module)


def compile_module(
    module_text: str,
    func_name: str,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    pipeline: Pipeline | str = Pipeline.FAST,
    threads: int | None = None,
    in_place: bool = False,
    checked: bool = False,
) -> CompiledFunction:
    """Lower ``@func_name`` of ``module_text`` to LLVM and JIT-compile it for this CPU.

    ``output_type`` says which dialects the module is written in, and so which
    conversions run first (see :mod:`.pipelines`). ``pipeline`` is a :class:`Pipeline`
    (or its name, ``"fast"`` or ``"plain"``); the fast one runs parallel tile loops on
    ``threads`` OpenMP workers (default ``torch.get_num_threads()``) and, with
    ``in_place``, writes the destination arguments instead of returning copies (see
    :class:`CompiledFunction`). Compiled functions are cached on the module text, function
    name and those options (the most recently used, up to
    :data:`COMPILED_FUNCTION_CACHE_BYTES` of estimated memory), so a kernel that is checked
    many times is compiled once; unless ``HELION_MLIR_CACHE=0``, the code is also kept on
    disk, where a compile in another process finds it (:mod:`.native_cache`; not in checked
    mode). With ``HELION_MLIR_DUMP_PIPELINE=DIR`` in the environment, the IR after
    every step of a lowering is written under ``DIR`` (:mod:`.pipelines.runner`).

    ``checked`` (plain pipeline only) checks every memory access at run time: a call that
    would access memory outside a buffer raises
    :class:`~helion_mlir.errors.OutOfBoundsAccessError` naming the source line instead
    (see :mod:`.check_failures`).

    Raises :class:`~helion_mlir.errors.MLIRVerificationError` when the text does not
    parse, and :class:`~helion_mlir.errors.ExecutionError` when a pass fails (naming the
    pass and quoting its diagnostics), when the bundled MLIR has no lowering for some of
    the module's ops, or when the signature has types that cannot cross from Python.
    """
    pipeline, options = _options(pipeline, output_type, threads, in_place, checked)
    key = (hashlib.sha256(module_text.encode()).hexdigest(), func_name, pipeline, options, host_cpu())
    with mlir_session() as (_ctx, diagnostics):
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        disk_key = _disk_key(module_text, func_name, pipeline, options)
        if disk_key is not None and (native := native_cache.load(disk_key, func_name)) is not None:
            compiled = CompiledFunction(
                native.library, native.entry_address, func_name, options.output_type, native.params,
                native.results, lower_seconds=0.0, jit_seconds=native.load_seconds, nbytes=native.nbytes,
                pipeline=pipeline, threads=options.threads, held_by=native.held_by, from_disk=True)
            _CACHE.put(key, compiled)
            return compiled
        started = time.perf_counter()
        lowering = _lower(module_text, func_name, pipeline, options, diagnostics)
        llvm_ops, uses_openmp = _count_ops(lowering)
        after_lowering = time.perf_counter()
        check_failures = CheckFailures(lowering.checks, func_name) if options.checked else None
        try:
            # Position-independent for the native cache, which links this very code into a library.
            engine = ExecutionEngine(lowering.module, opt_level=JIT_OPT_LEVEL, enable_pic=disk_key is not None)
            if uses_openmp:  # parallel regions run on torch's OpenMP runtime
                register_openmp(engine)
            if check_failures is not None and check_failures.checks:
                check_failures.register(engine)
            engine.initialize()
            # Machine code is generated on the first lookup, so it belongs to the JIT time.
            entry_address = engine.raw_lookup(f"_mlir_ciface_{func_name}")
        except RuntimeError as err:
            raise lowering.error(f"JIT compilation failed: {err}", list(diagnostics)) from None
        if not entry_address:
            raise lowering.error("the JIT-compiled code has no C interface for the function")
        jitted = time.perf_counter()
        log.debug(
            "@%s (%s, %s pipeline, %d thread(s)): lowered to LLVM in %.1f ms, JIT-compiled at O%d in %.1f ms",
            func_name,
            options.output_type.value,
            pipeline.value,
            options.threads,
            (after_lowering - started) * 1e3,
            JIT_OPT_LEVEL,
            (jitted - after_lowering) * 1e3,
        )
        compiled = CompiledFunction(
            engine,
            entry_address,
            func_name,
            options.output_type,
            lowering.params,
            lowering.results,
            lower_seconds=after_lowering - started,
            jit_seconds=jitted - after_lowering,
            nbytes=engine_bytes(llvm_ops),
            pipeline=pipeline,
            threads=options.threads,
            held_by=lowering.held_by,
            check_failures=check_failures,
        )
        _CACHE.put(key, compiled)
        if disk_key is not None:
            native_cache.store(disk_key, func_name, engine, lowering.params, lowering.results, compiled.held_by,
                               uses_openmp)
        return compiled


def _disk_key(module_text: str, func_name: str, pipeline: Pipeline, options: PipelineOptions) -> str | None:
    """The native cache's key of a compile, or None when it is not cached on disk: the cache is
    disabled, the code calls back into Python (checked mode), or the pipeline's IR is dumped."""
    if options.checked or os.environ.get(DUMP_ENVIRONMENT_VARIABLE) or cache_directory() is None:
        return None
    return native_cache.entry_key(module_text, func_name, f"{pipeline.value} {options!r} {host_cpu()!r} O{JIT_OPT_LEVEL}")


def clear_compile_cache() -> None:
    """Forget every compiled function (one a caller still holds keeps working)."""
    with mlir_session():
        _CACHE.clear()
