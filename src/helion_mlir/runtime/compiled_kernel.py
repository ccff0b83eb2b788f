"""``compile_kernel``: run a Helion kernel on CPU through its emitted MLIR.

The kernel's own host code runs as Helion generated it (see :mod:`helion_mlir.runtime.host_code`);
its device launch calls the emitted function, compiled to native code in-process
(:mod:`helion_mlir.runtime.engine`), and the results are written back into the tensors the
device code writes, so in-place arguments change exactly as with Helion.
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

__all__ = ["CompiledKernel", "compile_kernel"]

log = logging.getLogger(__name__)

# Each entry holds its bound kernel and JIT-compiled code; the least recently used go first.
COMPILED_KERNEL_CACHE_CAPACITY = 256
_CACHE: "LRUCache[CompiledKernel]" = LRUCache(COMPILED_KERNEL_CACHE_CAPACITY)


class CompiledKernel:
    """A Helion kernel compiled through MLIR; call it like the kernel.

    With the fast pipeline (the default) the compiled code writes the tensors the device
    code writes in place (see :class:`~helion_mlir.runtime.engine.CompiledFunction`), as
    Helion's own launch does, so a call copies nothing back.
    """

    def __init__(
        self,
        bound: Any,
        *,
        output_type: OutputType | str,
        config: Any = None,
        pipeline: str = "fast",
        threads: int | None = None,
    ) -> None:
        started = time.perf_counter()
        self.output_type = OutputType.parse(output_type)
        self.bound = bound
        self.config = resolve_config(bound, config)
        self.model = KernelModel(bound, self.config)
        self.mlir = generate_mlir(bound, output_type=self.output_type, config=self.config)
        self.emit_seconds = time.perf_counter() - started
        self.function: CompiledFunction = compile_module(
            self.mlir,
            self.model.name,
            output_type=self.output_type,
            pipeline=pipeline,
            threads=threads,
            in_place=pipeline == "fast",
        )
        self.host = HostCode.from_bound(bound, self.config)
        self.compile_seconds = time.perf_counter() - started - self.emit_seconds
        self._params = list(bound.host_function.params.arguments)
        self._fake_args = list(bound.fake_args)
        self._device_names = [arg.name for arg in self.model.args]
        # Per parameter: None for a scalar, else (dtype, rank, sizes with None where symbolic).
        self._expected = [
            (a.dtype, a.dim(), tuple(d if isinstance(d, int) else None for d in a.shape))
            if isinstance(a, torch.Tensor) else None
            for a in self._fake_args
        ]
        log.info("compiled kernel %s: emit %.0f ms, compile %.0f ms (%s pipeline, %d thread(s))", self.model.name,
                 self.emit_seconds * 1e3, self.compile_seconds * 1e3, pipeline, self.function.threads)

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
        if not self._arguments_match(args):
            self.check_arguments(args)
        by_param = dict(zip(self._params, args))

        def launch(device_args: dict[str, Any]) -> None:
            call = []
            for name in self._device_names:
                if name in device_args:
                    call.append(device_args[name])
                elif name in by_param:
                    call.append(by_param[name])
                else:
                    raise ArgumentError(f"the host code of '{self.name}' did not provide '{name}'")
            results = self.function(*call)
            for name, result in zip(self.model.results, results):
                target = device_args.get(name, by_param.get(name))
                if result is not target:  # written in place already otherwise
                    target.copy_(result)

        return self.host.run(tuple(args), launch)

    def _arguments_match(self, args: tuple[Any, ...]) -> bool:
        """The common case of :meth:`check_arguments`, cheaply: every argument as bound."""
        if len(args) != len(self._expected):
            return False
        for value, expected in zip(args, self._expected):
            if expected is None:
                if isinstance(value, torch.Tensor) or not isinstance(value, (int, float, bool)):
                    return False
            elif not (
                isinstance(value, torch.Tensor)
                and value.dtype == expected[0]
                and value.is_cpu
                and value.dim() == expected[1]
                and all(want is None or want == got for want, got in zip(expected[2], value.shape))
            ):
                return False
        return True

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
    pipeline: str = "fast",
    threads: int | None = None,
) -> CompiledKernel:
    """Compile a bound Helion kernel (or a ``helion.Kernel`` with example args) for the CPU.

    ``pipeline`` is ``"fast"`` (parallel tiles on ``threads`` workers, default
    ``torch.get_num_threads()``, vectorized tile bodies) or ``"plain"`` (sequential scalar
    loops; see :data:`~helion_mlir.runtime.engine.PIPELINES`). Compiled kernels are cached
    per kernel, config, argument signature, output type, pipeline and thread count (the
    most recently used :data:`COMPILED_KERNEL_CACHE_CAPACITY`).
    """
    bound = bind_kernel(kernel, args)
    kind = OutputType.parse(output_type)
    cfg = resolve_config(bound, config)
    threads = 1 if pipeline == "plain" else max(1, threads or torch.get_num_threads())
    key = (id(bound.kernel), repr(cfg), _signature_key(tuple(bound.fake_args)), kind, pipeline, threads)
    cached = _CACHE.get(key)
    if cached is not None and cached.bound.kernel is bound.kernel:  # an id may be reused
        return cached
    compiled = CompiledKernel(bound, output_type=kind, config=cfg, pipeline=pipeline, threads=threads)
    _CACHE.put(key, compiled)
    return compiled
