"""``compile_kernel``: run a Helion kernel on CPU through its emitted MLIR.

The kernel's own host code runs as Helion generated it (see :mod:`helion_mlir.runtime.kernel.host_code`);
its device launch calls the emitted function, compiled to native code in-process
(:mod:`helion_mlir.runtime.cpu.engine`, ``runtime="jit"``) or by IREE
(:mod:`helion_mlir.runtime.iree.engine`, ``runtime="iree"``), and the results are written
back into the tensors the device code writes, so in-place arguments change exactly as with
Helion.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

import helion
import torch

from ...errors import ArgumentError, HelionMLIRError
from ...front_end_lock import FRONT_END_LOCK
from ...generate import bind_kernel, emit_module
from ...kinds import Kind
from ...lowering.host_values import evaluate_origin, imported_modules
from ...lowering.kernel_config import resolve_config
from ...lowering.kernel_model import KernelModel
from ...lowering.kernel_parts import ArgKind, FunctionArg
from ...caches import LRUCache
from ...mlir_types import PACKED_PAIR_DTYPES
from ...output_type import OutputType
from ..configs.cache import cached_config
from ..configs.default_config_hint import hint_default_config
from ..cpu.engine import clear_compile_cache, compile_module
from ..cpu.host_cpu import CpuFeatures, host_cpu
from ..cpu.pipelines import Pipeline
from ..iree.devices import IreeDevice
from ..iree.engine import compile_with_iree
from ..params import check_writable
from .argument_checks import ArgumentChecks, ReadGuards, describe_value
from .host_code import HostCode
from .launch_checks import LaunchChecks

__all__ = ["RUNTIMES", "CompiledKernel", "Runtime", "clear_kernel_cache", "compile_kernel"]

log = logging.getLogger(__name__)

# What a compiled kernel holds besides its compiled function: its kernel model (with the
# graphs Helion built for its config), host code, argument checks and module text, measured
# with tracemalloc over the examples by scripts/compile_memory.py (20-320 KiB).
KERNEL_BASE_BYTES = 8 * 1024
KERNEL_BYTES_PER_NODE = 1536

#: Bytes of compiled kernels the cache keeps (by :attr:`CompiledKernel.nbytes`, which counts
#: the compiled code; the least recently used go first). Their compiled functions are the
#: ones the compiled-function cache keeps, mostly: together the two keep about this much.
COMPILED_KERNEL_CACHE_BYTES = 64 * 2**20
_CACHE: "LRUCache[CompiledKernel]" = LRUCache(COMPILED_KERNEL_CACHE_BYTES, weigh=lambda k: k.nbytes)


class Runtime(Kind):
    """What runs the emitted function: torch-mlir's ExecutionEngine in-process, or IREE.
    Plain strings are accepted wherever a ``Runtime`` is, through :meth:`Runtime.parse`."""

    JIT = "jit"
    IREE = "iree"


RUNTIMES = tuple(r.value for r in Runtime)


class CompiledKernel:
    """A Helion kernel compiled through MLIR; call it like the kernel.

    With the JIT runtime and the fast pipeline (the defaults) the compiled code writes the
    tensors the device code writes in place (see
    :class:`~helion_mlir.runtime.cpu.engine.CompiledFunction`), as Helion's own launch does,
    so a call copies nothing back.
    """

    def __init__(
        self,
        model: KernelModel,
        *,
        output_type: OutputType,
        runtime: Runtime = Runtime.JIT,
        pipeline: Pipeline = Pipeline.FAST,
        threads: int | None = None,
        checked: bool = False,
        device: IreeDevice | None = None,
    ) -> None:
        """Compile ``model`` (its config resolved by the caller, its enums parsed): the
        argument checks, the host code and the emitted module share it."""
        started = time.perf_counter()
        if checked and runtime is not Runtime.JIT:
            raise ValueError("checked mode runs on the JIT runtime")
        if device is not None and runtime is not Runtime.IREE:
            raise ValueError(f"device {str(device)!r} is one IREE compiles for: pass runtime='iree'")
        self.output_type, self.runtime, self.checked = output_type, runtime, checked
        #: What IREE compiled for (``runtime="iree"``), else None (the JIT runs on this CPU).
        self.device = IreeDevice.parse(device) if runtime is Runtime.IREE else None
        self.model = model
        self.bound = bound = model.bound
        self.config = model.config
        # Emission takes the front-end lock itself; verification and compilation hold only
        # the MLIR lock, so another thread may emit meanwhile. With locations: the CPU
        # pipeline's and IREE's diagnostics then name kernel lines, and HELION_MLIR_DUMP
        # files show them. Emission records in the model the relations a launch must check
        # (its launch checks); checked mode checks every access in the code instead.
        self.mlir = emit_module(model, output_type, debug_info=True, checked=checked, launch_checks=not checked)
        self.emit_seconds = time.perf_counter() - started
        self._pipeline, self._threads = pipeline, threads
        self.function = self._build_function(self.mlir, pipeline, threads)
        self._guarded: Any = None  # the form without launch checks, compiled when a launch needs it
        self._guarded_lock = threading.Lock()
        with FRONT_END_LOCK:  # the model as emission left it, and the bound kernel's compile state
            self._read_guards = ReadGuards(model)
            self._launch_checks = LaunchChecks(model)
            wanted = {name for arg in model.args for name in (arg.name, arg.ssa_name, *arg.aliases) if name}
            self.host = HostCode.from_bound(bound, self.config,
                                            wanted | self._read_guards.names | self._launch_checks.names,
                                            model.rng_seed_count)
            self._params = list(bound.host_function.params.arguments)
            self._fake_args = list(bound.fake_args)
            self._checks = ArgumentChecks(bound, model)
        self.compile_seconds = time.perf_counter() - started - self.emit_seconds
        nodes = sum(len(graph.graph.nodes) for graph in model.graphs)
        #: Estimated bytes of memory the compiled kernel holds, its compiled code included.
        self.nbytes: int = (self.function.nbytes + KERNEL_BASE_BYTES + KERNEL_BYTES_PER_NODE * nodes
                            + len(self.mlir))
        log.info("compiled kernel %s (%s, %s pipeline%s, %s thread(s)): emit %.0f ms, compile %.0f ms", model.name,
                 runtime.value, pipeline.value, ", checked" if checked else "", threads or "default",
                 self.emit_seconds * 1e3, self.compile_seconds * 1e3)

    def _build_function(self, text: str, pipeline: Pipeline, threads: int | None) -> Any:
        """The native function of the module ``text`` (a subclass may compile it elsewhere)."""
        if self.runtime is Runtime.IREE:
            return compile_with_iree(text, self.model.name, output_type=self.output_type, device=self.device)
        return compile_module(text, self.model.name, output_type=self.output_type, pipeline=pipeline,
                              threads=threads, in_place=pipeline is Pipeline.FAST, checked=self.checked)

    def _function_for(self, values: dict[str, Any]) -> Any:
        """The function a launch with these host ``values`` runs: :attr:`function`, unless a
        relation its code assumes is false for them (a tensor shorter than a loop's range
        over it); then the kernel's guarded form, emitted and compiled on first need."""
        failure = self._launch_checks.failure(values) if self._launch_checks.checks else None
        if failure is None:
            return self.function
        with self._guarded_lock:
            if self._guarded is None:
                log.info("kernel %s: %s, so it runs its guarded form", self.name, failure)
                text = emit_module(self.model, self.output_type, debug_info=True)
                self._guarded = self._build_function(text, self._pipeline, self._threads)
            return self._guarded

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def signature(self) -> str:
        """The arguments it was compiled for, e.g. ``float32[37, 100], float, 'mean'``."""
        return ", ".join(describe_value(a) for a in self._fake_args)

    def __call__(self, *args: Any, _launcher: Any = None, **kwargs: Any) -> Any:
        """Run the kernel; with Helion's ``_launcher`` keyword (a torch custom op's fake
        implementation passes one that launches nothing, to learn the outputs' shapes), the
        host code runs with that launcher and the compiled function does not run."""
        args = self._checks.normalize(args, kwargs)
        if _launcher is not None:
            return self.host.run_with_launcher(tuple(args), _launcher)
        self._checks.check(args)
        by_param = dict(zip(self._params, args))

        def launch(device_args: dict[str, Any]) -> None:
            call = [self._device_value(arg, device_args, by_param) for arg in self.model.args]
            if self._read_guards.checks:
                self._read_guards.check(device_args)
            targets = [self._device_value(self.model.arg(name), device_args, by_param) for name in self.model.results]
            function = self._function_for({**by_param, **device_args})
            try:
                for name, target in zip(self.model.results, targets):
                    check_writable(self._describe(self.model.arg(name)), target)
                results = self._run_function(function, call, args)
            except ArgumentError as err:
                if err.position is None:
                    raise
                raise ArgumentError(f"{self._describe(self.model.args[err.position])}: {err.problem}") from None
            for target, result in zip(targets, results):
                if result is target:  # written in place (fast pipeline)
                    continue
                if result.dtype in PACKED_PAIR_DTYPES:  # no copy_ for it (and Helion passes bytes)
                    target, result = target.view(torch.uint8), result.view(torch.uint8)
                target.copy_(result)

        return self.host.run(tuple(args), launch)

    def _run_function(self, function: Any, call: list[Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        """Run ``function`` (:attr:`function` or the guarded form) on the device arguments
        ``call`` of a call of the kernel on ``args`` (a subclass may run it elsewhere)."""
        return function(*call)

    def _device_value(self, arg: FunctionArg, device_args: dict[str, Any], by_param: dict[str, Any]) -> Any:
        """What the host code passes for ``arg`` (under any of its names), else the parameter,
        else the value its origin has now (a closure cell, an item of an argument)."""
        for key in (arg.name, arg.ssa_name, *arg.aliases):
            if key and key in device_args:
                return device_args[key]
        if arg.name in by_param:
            return by_param[arg.name]
        if arg.origin is not None:
            try:
                return evaluate_origin(arg.origin, by_param, self.bound.kernel.fn, imported_modules(self.bound))
            except HelionMLIRError:
                pass
        raise ArgumentError(f"the host code of '{self.name}' did not provide '{arg.name}'")

    def _describe(self, arg: FunctionArg) -> str:
        """How a message names an argument of the emitted function: by the kernel's parameter,
        or by the host code's variable for the values its host code computes."""
        if arg.is_kernel_param:
            return f"argument '{arg.name}' of {self.name}"
        what = "host tensor" if arg.kind is ArgKind.TENSOR else "host value"
        return f"{what} '{arg.name}' of {self.name} (computed by its host code), passed as {arg.ssa}: {arg.mlir_type}"

    def check_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> None:
        """Reject arguments the kernel was not compiled for (see :class:`ArgumentChecks`)."""
        self._checks.check(self._checks.normalize(args, kwargs or {}))


def _has_own_config(bound: Any) -> bool:
    """Whether the bound kernel has a config set, or its kernel one or more configs."""
    return getattr(bound, "_config", None) is not None or bool(getattr(bound.kernel, "configs", None))


def compile_kernel(
    kernel: Any,
    args: tuple[Any, ...] | None = None,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    config: Any = None,
    runtime: Runtime | str = Runtime.JIT,
    pipeline: Pipeline | str | None = None,
    threads: int | None = None,
    checked: bool = False,
    device: IreeDevice | str | None = None,
) -> CompiledKernel:
    """Compile a bound Helion kernel (or a ``helion.Kernel`` with example args) for the CPU.

    ``runtime`` is ``"jit"`` (torch-mlir's ExecutionEngine, in-process) or ``"iree"``
    (``iree-compile`` and IREE's runtime; needs ``iree-base-compiler`` and
    ``iree-base-runtime``). Both run the same host code with the same argument checks.
    With IREE, ``device`` is what it compiles for: this CPU (the default), ``"cpu:MODEL"``
    (an LLVM CPU model, e.g. ``"cpu:skylake-avx512"``), or a GPU: ``"cuda:sm_80"``,
    ``"rocm:gfx942"``, ``"vulkan:rdna3"`` (``"cuda"``, ``"rocm"``, ``"vulkan"`` pick those
    targets). A GPU module compiles without the GPU; calling the kernel runs it there, the
    tensors copied to and from the device.
    For the JIT, ``pipeline`` is ``"fast"`` (parallel tiles on ``threads`` workers, default
    ``torch.get_num_threads()``, vectorized tile bodies) or ``"plain"`` (sequential scalar
    loops; see :class:`~helion_mlir.runtime.cpu.pipelines.Pipeline`); by default fast, plain
    when ``checked``. Compiled kernels are cached per bound kernel (Helion binds one per
    specialization of the arguments), config, output type, runtime, pipeline, thread count
    and checked mode (the most recently used, up to :data:`COMPILED_KERNEL_CACHE_BYTES` of
    estimated memory).

    ``checked=True`` (JIT, plain pipeline) checks every memory access of the compiled code
    at run time (MLIR's ``generate-runtime-verification``): a call that would load, store or
    slice outside a tensor raises :class:`~helion_mlir.errors.OutOfBoundsAccessError`
    naming the kernel source line, instead of corrupting memory. It costs speed
    (docs/benchmarks.md); it is for hunting a wrong number or a crash.

    ``config`` (a ``helion.Config`` or a dict of its fields) is normalized as Helion
    normalizes it (aliases, nested lists, defaults for omitted fields); one Helion refuses
    raises :class:`helion.exc.InvalidConfig` naming the field. A kernel without a config of
    its own runs Helion's default config, or, with the JIT and the fast pipeline, the config
    Helion's autotuner cached for it on this machine for these arguments and thread count
    (``backend="mlir"`` tuning, or ``helion-mlir tune``); a cached config that is invalid or
    does not compile is skipped with a warning naming its file.
    """
    bound = bind_kernel(kernel, args)
    kind = OutputType.parse(output_type)
    runtime = Runtime.parse(runtime)
    pipeline = Pipeline.parse(pipeline) if pipeline is not None else Pipeline.PLAIN if checked else Pipeline.FAST
    if device is not None and runtime is not Runtime.IREE:
        raise ValueError(f"device {str(device)!r} is one IREE compiles for: pass runtime='iree'")
    # The JIT's code also depends on the CPU features it may use (HELION_MLIR_CPU_FEATURES).
    target = IreeDevice.parse(device) if runtime is Runtime.IREE else host_cpu()
    options = _Options(kind, runtime, pipeline, pipeline.thread_count(threads), checked, target)
    may_use_tuned = (config is None and runtime is Runtime.JIT and pipeline is Pipeline.FAST
                     and not _has_own_config(bound))
    if not may_use_tuned:
        return _compiled(bound, _resolved(bound, config), options)
    found = _CACHE.get((id(bound), None, options))  # the tuned config is looked up once per bound kernel
    if found is not None and found.bound is bound:
        return found

    def compiles(cached_bound: Any, cached: helion.Config) -> helion.Config:
        """A cached config is used if it compiles (then the compiled kernel is cached)."""
        return _compiled(cached_bound, resolve_config(cached_bound, cached), options).config

    tuned = cached_config(bound, args, output_type=kind, threads=options.threads, check=compiles)
    compiled = _compiled(bound, tuned.config if tuned is not None else _resolved(bound, None), options)
    _CACHE.put((id(bound), None, options), compiled)
    return compiled


def _resolved(bound: Any, config: Any) -> helion.Config:
    """``config`` resolved; when that is Helion's default config for want of one of the
    kernel's own, the one-time hint that tuning exists is given."""
    resolved = resolve_config(bound, config)
    if config is None and not _has_own_config(bound):
        hint_default_config(bound, resolved)
    return resolved


@dataclasses.dataclass(frozen=True)
class _Options:
    """How a kernel is compiled besides its config (part of the compiled-kernel cache key)."""

    output_type: OutputType
    runtime: Runtime
    pipeline: Pipeline
    threads: int
    checked: bool
    #: What the code is compiled for: IREE's device, or this CPU's usable features for the JIT.
    target: IreeDevice | CpuFeatures


def _compiled(bound: Any, config: helion.Config, options: _Options) -> CompiledKernel:
    """The compiled kernel of ``bound`` under the resolved ``config`` (cached)."""
    key = (id(bound), repr(config), options)
    found = _CACHE.get(key)
    if found is None or found.bound is not bound:  # an id may be reused
        with FRONT_END_LOCK:  # what reads the bound kernel's shared compile state
            model = KernelModel(bound, config)
        found = CompiledKernel(model, output_type=options.output_type, runtime=options.runtime,
                               pipeline=options.pipeline, threads=options.threads, checked=options.checked,
                               device=options.target if isinstance(options.target, IreeDevice) else None)
        _CACHE.put(key, found)
    return found


def clear_kernel_cache() -> None:
    """Forget every compiled kernel and compiled function, so that the next ``compile_kernel``
    lowers again: a compiled kernel is cached per bound kernel, config and options, not per
    setting of the rewrites (a threshold changed in the process)."""
    _CACHE.clear()
    clear_compile_cache()
