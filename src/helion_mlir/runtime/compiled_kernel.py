"""``compile_kernel``: run a Helion kernel on CPU through its emitted MLIR.

The kernel's own host code runs as Helion generated it (see :mod:`helion_mlir.runtime.host_code`);
its device launch calls the emitted function, compiled to native code in-process
(:mod:`helion_mlir.runtime.engine`, ``runtime="jit"``) or by IREE
(:mod:`helion_mlir.runtime.iree_engine`, ``runtime="iree"``), and the results are written
back into the tensors the device code writes, so in-place arguments change exactly as with
Helion.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from ..errors import ArgumentError
from ..generate import bind_kernel, generate_mlir
from ..lowering.kernel_model import KernelModel, resolve_config
from ..lru_cache import LRUCache
from ..output_type import OutputType
from .engine import CompiledFunction, compile_module
from .host_code import HostCode
from .iree_engine import IreeFunction, compile_with_iree

__all__ = ["RUNTIMES", "CompiledKernel", "compile_kernel"]

log = logging.getLogger(__name__)

# Each entry holds its bound kernel and JIT-compiled code; the least recently used go first.
COMPILED_KERNEL_CACHE_CAPACITY = 256
_CACHE: "LRUCache[CompiledKernel]" = LRUCache(COMPILED_KERNEL_CACHE_CAPACITY)

#: What runs the emitted function: torch-mlir's ExecutionEngine in-process, or IREE.
RUNTIMES = ("jit", "iree")


class CompiledKernel:
    """A Helion kernel compiled through MLIR; call it like the kernel."""

    def __init__(self, bound: Any, *, output_type: OutputType | str, config: Any = None, runtime: str = "jit") -> None:
        started = time.perf_counter()
        self.output_type = OutputType.parse(output_type)
        self.runtime = _check_runtime(runtime)
        self.bound = bound
        self.config = resolve_config(bound, config)
        self.model = KernelModel(bound, self.config)
        self.mlir = generate_mlir(bound, output_type=self.output_type, config=self.config)
        self.emit_seconds = time.perf_counter() - started
        compile_function = compile_with_iree if self.runtime == "iree" else compile_module
        self.function: CompiledFunction | IreeFunction = compile_function(
            self.mlir, self.model.name, output_type=self.output_type)
        self.host = HostCode.from_bound(bound, self.config)
        self.compile_seconds = time.perf_counter() - started - self.emit_seconds
        self._params = list(bound.host_function.params.arguments)
        self._fake_args = list(bound.fake_args)
        log.info("compiled kernel %s (%s): emit %.0f ms, compile %.0f ms", self.model.name, self.runtime,
                 self.emit_seconds * 1e3, self.compile_seconds * 1e3)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def signature(self) -> str:
        """The arguments it was compiled for, e.g. ``float32[37, 100], float``."""
        return ", ".join(
            f"{str(a.dtype).removeprefix('torch.')}[{', '.join(map(str, a.shape))}]"
            if isinstance(a, torch.Tensor) else type(a).__name__
            for a in self._fake_args
        )

    def __call__(self, *args: Any) -> Any:
        self.check_arguments(args)
        by_param = dict(zip(self._params, args))

        def launch(device_args: dict[str, Any]) -> None:
            call = []
            for arg in self.model.args:
                if arg.name in device_args:
                    call.append(device_args[arg.name])
                elif arg.name in by_param:
                    call.append(by_param[arg.name])
                else:
                    raise ArgumentError(f"the host code of '{self.name}' did not provide '{arg.name}'")
            results = self.function(*call)
            for name, result in zip(self.model.results, results):
                target = device_args.get(name, by_param.get(name))
                target.copy_(result)

        return self.host.run(tuple(args), launch)

    def check_arguments(self, args: tuple[Any, ...]) -> None:
        """Reject arguments that do not match the signature the kernel was bound with."""
        if len(args) != len(self._params):
            raise ArgumentError(f"{self.name} takes {len(self._params)} arguments ({', '.join(self._params)}), got {len(args)}")
        for name, value, fake in zip(self._params, args, self._fake_args):
            if isinstance(fake, torch.Tensor):
                if not isinstance(value, torch.Tensor):
                    raise ArgumentError(f"argument '{name}' of {self.name} must be a tensor, got {type(value).__name__}")
                if value.device.type != "cpu":
                    raise ArgumentError(f"argument '{name}' of {self.name} must be on the CPU, got {value.device}")
                if value.dtype != fake.dtype:
                    raise ArgumentError(f"argument '{name}' of {self.name} must have dtype {fake.dtype}, got {value.dtype}")
                if value.dim() != fake.dim():
                    raise ArgumentError(f"argument '{name}' of {self.name} must have {fake.dim()} dimensions, got shape {tuple(value.shape)}")
                for axis, (want, got) in enumerate(zip(fake.shape, value.shape)):
                    if isinstance(want, int) and want != got:
                        raise ArgumentError(
                            f"argument '{name}' of {self.name} must have size {want} in dimension {axis}, got shape "
                            f"{tuple(value.shape)}; compile the kernel again for other shapes (or use static_shapes=False)"
                        )
            elif isinstance(value, torch.Tensor):
                raise ArgumentError(f"argument '{name}' of {self.name} must be a scalar, got a tensor")
            elif not isinstance(value, (int, float, bool)):
                raise ArgumentError(f"argument '{name}' of {self.name} must be a number, got {type(value).__name__}")


def _check_runtime(runtime: str) -> str:
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
    return runtime


def _signature_key(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        (tuple(str(d) for d in a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor) else type(a).__name__
        for a in args
    )


def compile_kernel(
    kernel: Any,
    args: tuple[Any, ...] | None = None,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    config: Any = None,
    runtime: str = "jit",
) -> CompiledKernel:
    """Compile a bound Helion kernel (or a ``helion.Kernel`` with example args) for the CPU.

    ``runtime`` is ``"jit"`` (torch-mlir's ExecutionEngine, in-process) or ``"iree"``
    (``iree-compile`` for llvm-cpu and IREE's runtime; needs ``iree-base-compiler`` and
    ``iree-base-runtime``). Both run the same host code with the same argument checks.
    Compiled kernels are cached per kernel, config, argument signature, output type and
    runtime (the most recently used :data:`COMPILED_KERNEL_CACHE_CAPACITY`).
    """
    bound = bind_kernel(kernel, args)
    kind = OutputType.parse(output_type)
    cfg = resolve_config(bound, config)
    key = (id(bound.kernel), repr(cfg), _signature_key(tuple(bound.fake_args)), kind, _check_runtime(runtime))
    cached = _CACHE.get(key)
    if cached is not None and cached.bound.kernel is bound.kernel:  # an id may be reused
        return cached
    compiled = CompiledKernel(bound, output_type=kind, config=cfg, runtime=runtime)
    _CACHE.put(key, compiled)
    return compiled
