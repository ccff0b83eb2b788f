"""Run an emitted MLIR module through IREE instead of torch-mlir's ExecutionEngine.

IREE is the MLIR compiler most downstream users take modules to, so running our
modules through it checks that they are what they claim to be: plain upstream dialects
with tensor value semantics that another MLIR stack compiles and runs as is.

The module is compiled by ``iree-compile`` (from ``iree-base-compiler``) for a device
(:class:`~.devices.IreeDevice`: by default the ``llvm-cpu`` backend and this machine's
CPU; another CPU model, or a GPU, which needs no GPU to compile for), with the input type of
its output type (:data:`INPUT_TYPES`) and otherwise IREE's default options, the flags a
user would pass (:data:`IREE_COMPILE_FLAGS` on CPU: a workaround for a wrong-result bug).
Integer divisions in the linalg bodies of linalg-on-tensors modules are guarded first as in
the CPU pipelines (:mod:`..cpu.rewrites.tensor.integer_division`): a zero divisor gives the same defined
value (stablehlo's conversion guards its own; tosa's is IREE's, see docs/abi.md).
The compiler runs in a subprocess: a crash in it is reported as an error instead of
taking the caller down. The compiled module runs on ``iree-base-runtime``'s driver for the
device (``local-task`` for CPUs), loaded at the first call: a module for a GPU this
machine lacks compiles, and only calling it fails.

Arguments are checked exactly as for the ExecutionEngine (:mod:`..params`). Tensors cross
as raw bytes (bf16, f16 and bool included) into buffers whose element type is the
MLIR one. IREE demotes f64 to f32 by default, at the function boundary too: f64
tensors and scalars go in as f32 and f64 results come back from f32.

IREE is an optional dependency (the ``test`` extra installs it); without it,
:func:`compile_with_iree` raises :class:`~helion_mlir.errors.ExecutionError` saying how
to install it.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ...errors import ExecutionError
from ...caches import LRUCache
from ...mlir_context import mlir_session
from ...output_type import OutputType
from ...verify import parse_module
from ..cpu.pipelines import ModuleLowering, PipelineOptions
from ..cpu.rewrites.tensor.integer_division import guard_integer_divisions
from ..function import NativeFunction
from ..params import Param, TensorParam, check_scalar, check_tensor
from .devices import IreeDevice

try:  # optional: pip install iree-base-compiler iree-base-runtime
    import iree.runtime as iree_runtime
    from iree.compiler.tools.binaries import find_tool
except ImportError:  # pragma: no cover - exercised only where IREE is missing
    iree_runtime = None

__all__ = ["INPUT_TYPES", "IREE_COMPILE_FLAGS", "IreeDevice", "IreeFunction", "compile_with_iree", "device_available",
           "iree_available"]

log = logging.getLogger(__name__)

#: ``--iree-input-type`` for each output type: linalg-on-tensors is IREE's own input,
#: raw goes through IREE's bundled torch-mlir input conversion.
INPUT_TYPES: dict[OutputType, str] = {
    OutputType.LINALG_ON_TENSORS: "auto",
    OutputType.TOSA: "tosa",
    OutputType.STABLEHLO: "stablehlo",
    OutputType.RAW: "torch",
}

#: The one flag besides the device's (:meth:`IreeDevice.compile_flags`) that CPU modules are
#: compiled with, to keep IREE 3.13 from returning wrong numbers: with 64-byte packing, a loop
#: carrying several dynamically sized tensors carries the second one's offset as a
#: ``util.align``, which ``iree-util-optimize-int-arithmetic`` folds to the loop's initial 0:
#: that tensor is then read at the first one's offset (docs/downstream.md has the reproduction).
#: GPU modules keep IREE's default alignment, which their buffer bindings require.
IREE_COMPILE_FLAGS: tuple[str, ...] = ("--iree-stream-resource-min-offset-alignment=1",)

# Seconds iree-compile may take: generous, a big tiled kernel compiles in a few seconds.
_COMPILE_TIMEOUT = 600
_INSTALL_HINT = "pip install iree-base-compiler==3.13.0 iree-base-runtime==3.13.0"

# torch dtype -> (dtype the bytes travel as, IREE element type name). f64 is demoted.
_ELEMENT_TYPES: dict[torch.dtype, tuple[torch.dtype, str]] = {
    torch.float64: (torch.float32, "FLOAT_32"),
    torch.float32: (torch.float32, "FLOAT_32"),
    torch.float16: (torch.float16, "FLOAT_16"),
    torch.bfloat16: (torch.bfloat16, "BFLOAT_16"),
    torch.int64: (torch.int64, "INT_64"),
    torch.int32: (torch.int32, "INT_32"),
    torch.int16: (torch.int16, "INT_16"),
    torch.int8: (torch.int8, "INT_8"),
    torch.uint8: (torch.uint8, "INT_8"),
    torch.uint16: (torch.uint16, "INT_16"),
    torch.uint32: (torch.uint32, "INT_32"),
    torch.uint64: (torch.uint64, "INT_64"),
    torch.bool: (torch.bool, "BOOL_8"),
    torch.float8_e4m3fn: (torch.float8_e4m3fn, "FLOAT_8_E4M3_FN"),
    torch.float8_e4m3fnuz: (torch.float8_e4m3fnuz, "FLOAT_8_E4M3_FNUZ"),
    torch.float8_e5m2: (torch.float8_e5m2, "FLOAT_8_E5M2"),
    torch.float8_e5m2fnuz: (torch.float8_e5m2fnuz, "FLOAT_8_E5M2_FNUZ"),
    torch.float8_e8m0fnu: (torch.float8_e8m0fnu, "FLOAT_8_E8M0_FNU"),
}


def iree_available() -> bool:
    """Whether IREE's compiler and runtime packages are installed."""
    return iree_runtime is not None


def device_available(device: IreeDevice | str) -> bool:
    """Whether this machine runs code compiled for ``device``: IREE's driver for it loads and
    makes a device (any CPU model counts: the caller picks one this CPU runs)."""
    try:
        _Device.get(IreeDevice.parse(device).driver)
    except ExecutionError:
        return False
    return True


class _Device:
    """The process's IREE VM instance and one device per driver, made on first use."""

    _lock = threading.Lock()
    _instance: Any = None
    _devices: "dict[str, Any]" = {}
    _functions: "weakref.WeakSet[IreeFunction]" = weakref.WeakSet()

    @classmethod
    def get(cls, driver: str) -> tuple[Any, Any]:
        """The VM instance and the driver's default device; raises :class:`ExecutionError`
        when the driver has no device here (no GPU, no driver library)."""
        with cls._lock:
            if cls._instance is None:
                cls._instance = iree_runtime.VmInstance()
            if driver not in cls._devices:
                try:
                    cls._devices[driver] = iree_runtime.get_driver(driver).create_default_device()
                except Exception as err:  # IREE maps its status codes to several exception types
                    raise ExecutionError(f"IREE's {driver!r} driver has no device here: {err}") from None
            return cls._instance, cls._devices[driver]

    @classmethod
    def release(cls) -> None:
        """Drop every IREE object before the interpreter exits (IREE's bindings report
        objects still alive at exit as leaks)."""
        for function in list(cls._functions):
            function.release()
        _CACHE.clear()
        cls._devices = {}
        cls._instance = None


atexit.register(_Device.release)


class IreeFunction(NativeFunction):
    """An emitted function compiled by IREE; call it like a
    :class:`~helion_mlir.runtime.cpu.engine.CompiledFunction`: CPU tensors and numbers in, a
    tuple of new tensors (the function's results) out.

    Calls on one function are serialized (one VM context holds its state).
    """

    def __init__(
        self,
        vmfb: bytes,
        func_name: str,
        output_type: OutputType,
        params: tuple[Param, ...],
        results: tuple[TensorParam, ...],
        *,
        compile_seconds: float,
        device: IreeDevice | None = None,
    ) -> None:
        # IREE copies the module and loads its executable (about twice the module's size),
        # plus the VM context.
        super().__init__(func_name, output_type, params, results, nbytes=IREE_FUNCTION_BASE_BYTES + 2 * len(vmfb))
        self._vmfb = vmfb
        self._context = self._function = self._hal_device = None
        self._lock = threading.Lock()
        _Device._functions.add(self)
        self.compile_seconds = compile_seconds
        self.device = device or IreeDevice()
        if self.device.is_host:  # load now: a module this machine cannot run fails at once
            self.load()

    @property
    def vmfb(self) -> bytes:
        """The compiled module (IREE's ``.vmfb`` flatbuffer), e.g. to deploy it elsewhere."""
        return self._vmfb

    def load(self) -> None:
        """Load the module into a VM context on its device's driver (the first call does it
        otherwise); raises :class:`~helion_mlir.errors.ExecutionError` when this machine has
        no such device."""
        with self._lock:
            if self._context is None:
                self._load()

    def _load(self) -> None:
        try:
            instance, device = _Device.get(self.device.driver)
        except ExecutionError as err:
            raise ExecutionError(f"{err.args[0]}; the module for {self.device} compiled, running it needs that device",
                                 func_name=self.func_name, output_type=self.output_type.value) from None
        module = iree_runtime.VmModule.copy_buffer(instance, self._vmfb)
        function = module.lookup_function(self.func_name)
        if function is None:
            raise ExecutionError(f"IREE's module exports no @{self.func_name} (it has: {', '.join(module.function_names)})",
                                 func_name=self.func_name, output_type=self.output_type.value)
        self._context = iree_runtime.VmContext(instance, [iree_runtime.create_hal_module(instance, device), module])
        self._function, self._hal_device = function, device

    def release(self) -> None:
        """Drop the VM context and device (at exit; a later call would load them again)."""
        self._context = self._function = self._hal_device = None

    def _described(self) -> str:
        return f", device='{self.device}'"

    def __call__(self, *args: torch.Tensor | int | float | bool) -> tuple[torch.Tensor, ...]:
        """Run the function on ``args`` and return its results as new tensors.

        Raises :class:`~helion_mlir.errors.ArgumentError`, before anything runs, when the
        arguments do not match the signature, and :class:`~helion_mlir.errors.ExecutionError`
        when IREE's runtime reports an error.
        """
        self._check_count(args)
        self.load()
        inputs = iree_runtime.VmVariantList(len(args))
        keep_alive = []
        for index, (param, value) in enumerate(zip(self.params, args)):
            where = self._where(index)
            if isinstance(param, TensorParam):
                view = self._buffer_view(check_tensor(where, param, value, index))
                keep_alive.append(view)
                inputs.push_ref(view.ref)
            elif param.mlir_type in ("f32", "f64"):
                inputs.push_float(float(check_scalar(where, param, value, index)))
            else:
                inputs.push_int(int(check_scalar(where, param, value, index)))
        outputs = iree_runtime.VmVariantList(len(self.results))
        with self._lock:
            try:
                self._context.invoke(self._function, inputs, outputs)
            except Exception as err:  # IREE maps its status codes to several exception types
                raise ExecutionError(f"IREE's runtime failed: {err}", func_name=self.func_name,
                                     output_type=self.output_type.value) from None
        return tuple(self._to_tensor(outputs.get_as_object(i, iree_runtime.HalBufferView), r)
                     for i, r in enumerate(self.results))

    def _buffer_view(self, tensor: torch.Tensor) -> Any:
        storage, element_type = _ELEMENT_TYPES[tensor.dtype]
        raw = tensor.to(storage).reshape(-1).view(torch.uint8).numpy()
        buffer = self._hal_device.allocator.allocate_buffer_copy(
            memory_type=iree_runtime.MemoryType.DEVICE_LOCAL,
            allowed_usage=iree_runtime.BufferUsage.DEFAULT,
            device=self._hal_device,
            buffer=raw,
        )
        return iree_runtime.HalBufferView(buffer, list(tensor.shape), getattr(iree_runtime.HalElementType, element_type))

    def _to_tensor(self, view: Any, param: TensorParam) -> torch.Tensor:
        """A new tensor of ``param``'s dtype holding a result buffer's elements."""
        storage, _ = _ELEMENT_TYPES[param.dtype]
        shape = list(view.shape)
        if view.byte_length == 0:
            return torch.empty(shape, dtype=param.dtype)
        raw = np.array(self._host_bytes(view))
        return torch.from_numpy(raw).view(storage).reshape(shape).to(param.dtype)

    def _host_bytes(self, view: Any) -> np.ndarray:
        """A result's bytes: mapped where the host sees its memory (CPU devices), else copied
        by the device's queue into a host buffer first (GPU memory)."""
        buffer = view.get_buffer()
        visible = int(iree_runtime.MemoryType.HOST_VISIBLE)
        if buffer.memory_type() & visible == visible:
            return view.map().asarray([view.byte_length], np.dtype(np.uint8))
        usage = int(iree_runtime.BufferUsage.TRANSFER_TARGET | iree_runtime.BufferUsage.MAPPING_SCOPED)
        staging = self._hal_device.allocator.allocate_buffer(
            memory_type=int(iree_runtime.MemoryType.HOST_LOCAL | iree_runtime.MemoryType.DEVICE_VISIBLE),
            allowed_usage=usage, allocation_size=buffer.byte_length())
        done = self._hal_device.create_semaphore(0)
        self._hal_device.queue_copy(buffer, staging, wait_semaphores=iree_runtime.HalFence.create_at(done, 0),
                                    signal_semaphores=iree_runtime.HalFence.create_at(done, 1))
        iree_runtime.HalFence.create_at(done, 1).wait()
        return staging.map().asarray([view.byte_length], np.dtype(np.uint8))


# Each entry holds a VM context with its compiled module (resident memory per function,
# measured over four examples: about 10 KiB plus twice the module); the least recently
# used go first.
IREE_FUNCTION_BASE_BYTES = 16 * 1024
IREE_FUNCTION_CACHE_BYTES = 16 * 2**20
_CACHE: "LRUCache[IreeFunction]" = LRUCache(IREE_FUNCTION_CACHE_BYTES, weigh=lambda f: f.nbytes)


def compile_with_iree(
    module_text: str,
    func_name: str,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    device: IreeDevice | str | None = None,
    extra_flags: Sequence[str] = (),
) -> IreeFunction:
    """Compile ``@func_name`` of ``module_text`` with IREE for ``device`` (by default this
    CPU; ``"cpu:MODEL"``, ``"cuda:sm_80"``, ``"rocm:gfx942"``, ``"vulkan:rdna3"``, see
    :class:`~.devices.IreeDevice`).

    Cached on the module text, function name, output type and flags (the most recently
    used, up to :data:`IREE_FUNCTION_CACHE_BYTES` of estimated memory). Raises
    :class:`~helion_mlir.errors.MLIRVerificationError` when the text does not parse and
    :class:`~helion_mlir.errors.ExecutionError` when IREE is not installed or
    ``iree-compile`` rejects the module (quoting its errors). A module for a GPU compiles
    without one; calling it needs the GPU and its driver.
    """
    kind = OutputType.parse(output_type)
    target = IreeDevice.parse(device)
    if not iree_available():
        raise ExecutionError(f"IREE is not installed ({_INSTALL_HINT})", func_name=func_name, output_type=kind.value)
    flags = (f"--iree-input-type={INPUT_TYPES[kind]}", *target.compile_flags(),
             *(IREE_COMPILE_FLAGS if target.is_host else ()), *extra_flags)
    key = (hashlib.sha256(module_text.encode()).hexdigest(), func_name, kind, flags)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    with mlir_session() as (_ctx, diagnostics):
        module = parse_module(module_text, what=f"module holding @{func_name}")
        lowering = ModuleLowering(module, func_name, PipelineOptions(kind), diagnostics)
        lowering.read_signature()
        params, results = lowering.params, lowering.results
        # linalg bodies' divisions by zero give what the CPU pipelines give; only linalg input
        # is printed again: the bundled MLIR prints tosa and stablehlo ops in a syntax of its
        # own version, which iree-compile's parser may not read (tosa.const_shape)
        if kind is OutputType.LINALG_ON_TENSORS and guard_integer_divisions(module):
            module_text = module.operation.get_asm(enable_debug_info=True)
    started = time.perf_counter()
    try:
        done = subprocess.run([find_tool("iree-compile"), "-", "-o", "-", *flags], input=module_text.encode(),
                              capture_output=True, timeout=_COMPILE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise ExecutionError(f"iree-compile took longer than {_COMPILE_TIMEOUT} s", func_name=func_name,
                             output_type=kind.value) from None
    if done.returncode != 0:
        raise ExecutionError(f"iree-compile {' '.join(flags)} failed (exit status {done.returncode})",
                             func_name=func_name, output_type=kind.value,
                             diagnostics=_compiler_errors(done.stderr.decode(errors="replace")))
    seconds = time.perf_counter() - started
    log.debug("@%s (%s, %s): compiled by IREE in %.0f ms", func_name, kind.value, target, seconds * 1e3)
    compiled = IreeFunction(done.stdout, func_name, kind, params, results, compile_seconds=seconds, device=target)
    _CACHE.put(key, compiled)
    return compiled


def _compiler_errors(stderr: str, limit: int = 8) -> list[str]:
    """iree-compile's error lines (each with the source line it points to), at most ``limit``."""
    lines = stderr.splitlines()
    errors = [line for line in lines if ": error:" in line]
    if not errors:
        return [stderr.strip()[-2000:] or "no diagnostics (the compiler exited without a message)"]
    return errors[:limit] + ([f"... and {len(errors) - limit} more"] if len(errors) > limit else [])
