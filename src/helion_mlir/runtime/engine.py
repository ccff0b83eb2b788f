"""Run an emitted MLIR module on CPU torch tensors, in-process.

The module is lowered to the LLVM dialect by :mod:`.pipeline` with torch-mlir's bundled
MLIR and JIT-compiled by its ``ExecutionEngine``; no external tool or runtime library is
involved. This is how the package checks that what it emits computes the same thing as
the Helion kernel it came from. See :class:`CompiledFunction` for the calling convention.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Sequence

import torch
from torch_mlir.execution_engine import ExecutionEngine

from ..errors import ArgumentError
from ..lru_cache import LRUCache
from ..mlir_context import mlir_session
from ..mlir_types import PACKED_PAIR_DTYPES
from ..output_type import OutputType
from ..verify import parse_module
from .low_precision import emulate_low_precision_floats, pack_pairs, unpack_pairs
from .params import Param, ScalarParam, TensorParam, check_scalar, check_tensor
from .pipeline import (
    BUFFERIZE_STEPS,
    JIT_OPT_LEVEL,
    PRE_BUFFERIZE_STEPS,
    SOURCE_DIALECTS,
    TO_LINALG_STEPS,
    TO_LLVM_STEPS,
    ModuleLowering,
    mark_fresh_buffers_restrict,
    move_bf16_through_memory_as_i16,
    store_single_elements_in_place,
)

__all__ = [
    "JIT_OPT_LEVEL",
    "CompiledFunction",
    "ScalarParam",
    "TensorParam",
    "clear_compile_cache",
    "compile_module",
]

log = logging.getLogger(__name__)

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


class CompiledFunction:
    """A JIT-compiled MLIR function that takes and returns CPU torch tensors.

    Calling convention. The function is lowered with identity-layout memrefs at its
    boundary and marked ``llvm.emit_c_interface``. It is called through the engine's
    packed wrapper of ``_mlir_ciface_<name>``: the first slot points to the result
    descriptors (when there are results), then one slot per argument, pointing to a
    memref descriptor for a tensor (a contiguous copy is made of a non-contiguous
    tensor) or to the value of a scalar. bf16, f16 and float8 tensors travel as raw
    pointers, so no dtype conversion happens on the way in or out; a uint8 tensor is
    accepted for an ``i8`` parameter (signless). A float4_e2m1fn_x2 tensor (or its uint8
    bytes) is unpacked to one 4-bit value per byte on the way in and packed again on the
    way out (:mod:`.low_precision`).

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
        params: tuple[Param, ...],
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
            where = f"argument #{index} ({param.mlir_type}) of @{self.func_name}"
            if isinstance(param, TensorParam):
                tensor = check_tensor(where, param, value)
                if param.dtype in PACKED_PAIR_DTYPES:
                    tensor = unpack_pairs(tensor)
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
                scalar = param.ctype(check_scalar(where, param, value))
                keep_alive.append(scalar)
                packed[first + index] = ctypes.addressof(scalar)
        self._entry(packed)
        return self._take_results(results, input_ranges)

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
    itemsize = param.dtype.itemsize  # 1 for a packed dtype too: one 4-bit value per byte
    extent = 1 + sum((size - 1) * stride for size, stride in zip(sizes, strides))
    start = descriptor.aligned + descriptor.offset * itemsize
    raw = (ctypes.c_byte * (extent * itemsize)).from_address(start)
    if param.dtype in PACKED_PAIR_DTYPES:
        return pack_pairs(torch.frombuffer(raw, dtype=torch.uint8).as_strided(sizes, strides), param.dtype)
    source = torch.frombuffer(raw, dtype=torch.uint8).view(param.dtype).as_strided(sizes, strides)
    return source.clone(memory_format=torch.contiguous_format)


# Each entry holds an ExecutionEngine with its machine code; the least recently used go first.
COMPILED_FUNCTION_CACHE_CAPACITY = 256
_CACHE: "LRUCache[CompiledFunction]" = LRUCache(COMPILED_FUNCTION_CACHE_CAPACITY)


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
        lowering = ModuleLowering(
            parse_module(module_text, what=f"module holding @{func_name}"),
            func_name,
            kind,
            diagnostics,
        )
        lowering.keep_only_the_function()
        lowering.run(TO_LINALG_STEPS[kind])
        lowering.reject_ops(
            lambda name: name.split(".", 1)[0] in SOURCE_DIALECTS[kind],
            "torch-mlir's bundled MLIR has no lowering to linalg for {ops}; "
            "a module using them cannot be executed",
        )
        params, results = lowering.signature()
        lowering.prepare_boundary(params)
        store_single_elements_in_place(lowering.module)
        lowering.run(PRE_BUFFERIZE_STEPS)
        mark_fresh_buffers_restrict(lowering.module)
        lowering.run(BUFFERIZE_STEPS)
        lowering.define_bf16_truncation()
        emulate_low_precision_floats(lowering.module)
        lowering.run(TO_LLVM_STEPS)
        move_bf16_through_memory_as_i16(lowering.module)
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
