"""The Helion backend ``"mlir"``: calling a Helion kernel runs it on CPU through helion_mlir.

Importing ``helion_mlir`` registers the backend, after which any of
``@helion.kernel(backend="mlir")``, ``helion.Settings(backend="mlir")`` or the environment
variable ``HELION_BACKEND=mlir`` (read when Helion builds a kernel's settings, so import
``helion_mlir`` first) makes a kernel call compile the bound kernel with
:func:`helion_mlir.runtime.compiled_kernel.compile_kernel` and run the native code on CPU tensors.

Design. Helion's backends are source-to-source: ``BoundKernel.compile_config`` turns a
config into the callable the kernel runs by generating Python source and importing it.
:class:`MLIRBackend` subclasses Helion's Triton backend and reuses its code generator
(``codegen_name`` is ``"triton"``, as Helion's own TileIR backend does), so a kernel binds
as it does under Helion's default backend, whose device IR helion_mlir lowers, and Helion
can still generate the host code that :mod:`helion_mlir.runtime.host_code` runs. Helion has no backend hook that supplies the callable
itself: ``compile_config`` always imports the generated module, which imports Triton (absent
from CPU installs) and exists only when Triton code generation succeeds for every device op
(helion_mlir needs only the host code, and takes it from the kernel source when generation
fails). So one method is wrapped, ``BoundKernel.compile_config``:
for bound kernels whose backend is ``"mlir"`` it returns a :class:`CompiledKernel` (cached
by ``compile_kernel``) instead; for every other backend it calls Helion's method unchanged.
Helion keeps the returned callable as the bound kernel's runner, so later calls with the
same signature go through Helion's own dispatch caches straight to it.

Config. The backend never autotunes: a kernel runs with its config when it has one (the
first of several, as :func:`helion_mlir.lowering.kernel_model.resolve_config` chooses), otherwise
with Helion's default config for the bound kernel (``config_spec.default_config()``).
Timing candidate configs would mean compiling each one through MLIR, and on CPU the block
sizes only shape the emitted loops, not what the kernel computes (up to the order of
floating-point sums), so a fixed config keeps the first call fast at little cost.

Environment variables, read at each compilation:

* ``HELION_MLIR_OUTPUT_TYPE``: dialects to lower ATen ops to (``linalg-on-tensors``,
  the default, ``tosa``, ``stablehlo`` or ``raw``);
* ``HELION_MLIR_DUMP=<dir>``: write each compiled module to
  ``<dir>/<kernel>_<hash of config and argument shapes>_<output type>.mlir``;
* ``HELION_MLIR_CHECKED=1``: compile in checked mode (``compile_kernel(..., checked=True)``):
  every memory access is checked at run time, and one out of bounds raises
  :class:`~helion_mlir.errors.OutOfBoundsAccessError` naming the kernel source line. Read
  as Helion reads its boolean variables (``1``/``true``/``yes``/``on`` or
  ``0``/``false``/``no``/``off``).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helion._compiler.backend import BackendState
from helion._compiler.backend_registry import list_backends, register_compiler_backend
from helion._compiler.triton.backend import TritonBackend
from helion.runtime.config import Config
from helion.runtime.kernel import BoundKernel

from ..errors import HelionMLIRError
from ..lowering.kernel_model import resolve_config
from ..output_type import OutputType
from .compiled_kernel import CompiledKernel, compile_kernel

__all__ = [
    "BACKEND_NAME",
    "CHECKED_ENV",
    "DUMP_ENV",
    "OUTPUT_TYPE_ENV",
    "MLIRBackend",
    "checked_from_env",
    "dump_path",
    "install",
    "output_type_from_env",
]

log = logging.getLogger(__name__)

BACKEND_NAME = "mlir"
OUTPUT_TYPE_ENV = "HELION_MLIR_OUTPUT_TYPE"
DUMP_ENV = "HELION_MLIR_DUMP"
CHECKED_ENV = "HELION_MLIR_CHECKED"
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off", ""})


class MLIRBackend(TritonBackend):
    """Helion's Triton front end, with kernels compiled and run through MLIR on CPU."""

    @property
    def name(self) -> str:
        return BACKEND_NAME

    @property
    def state(self) -> BackendState:
        # Helion warns once per process: kernels using ops without an MLIR lowering fail.
        return BackendState.EXPERIMENTAL

    @property
    def codegen_name(self) -> str:
        # Helion generates the host code helion_mlir runs with its Triton code generator.
        return "triton"

    @property
    def supports_inductor_fusion(self) -> bool:
        # The lowering does not apply Inductor's prologue/epilogue hooks; fused code would be lost.
        return False

    def make_ephemeral_cache(self) -> None:
        # Nothing is written to Triton's cache, so there is no cache to redirect.
        return None

    def autotune(
        self, bound_kernel: BoundKernel[Any], args: Sequence[object], *, force: bool = True, **kwargs: object
    ) -> Config:
        """The kernel's config (or Helion's default): compiling candidates through MLIR to time them is not worth it."""
        config = resolve_config(bound_kernel)
        log.info("backend %r does not autotune; kernel %s uses %r", BACKEND_NAME, bound_kernel.kernel.name, config)
        return config


def output_type_from_env() -> OutputType:
    """The output type ``HELION_MLIR_OUTPUT_TYPE`` asks for (linalg-on-tensors when unset)."""
    value = os.environ.get(OUTPUT_TYPE_ENV, "").strip()
    if not value:
        return OutputType.LINALG_ON_TENSORS
    try:
        return OutputType.parse(value)
    except ValueError as err:
        raise HelionMLIRError(f"{OUTPUT_TYPE_ENV}: {err}") from None


def checked_from_env() -> bool:
    """Whether ``HELION_MLIR_CHECKED`` asks for checked mode (off when unset)."""
    value = os.environ.get(CHECKED_ENV, "").strip().lower()
    if value not in _TRUE | _FALSE:
        raise HelionMLIRError(f"{CHECKED_ENV} must be one of 1, true, yes, on, 0, false, no, off; got {value!r}")
    return value in _TRUE


def dump_path(directory: str | os.PathLike[str], compiled: CompiledKernel) -> Path:
    """``<directory>/<kernel>_<hash>_<output type>.mlir`` for a compiled kernel; the hash is
    of its config and argument signature, so other shapes do not overwrite the file."""
    digest = hashlib.sha256(f"{compiled.config!r}|{compiled.signature}".encode()).hexdigest()[:8]
    return Path(directory) / f"{compiled.name}_{digest}_{compiled.output_type.value}.mlir"


def _dump(compiled: CompiledKernel) -> None:
    directory = os.environ.get(DUMP_ENV, "").strip()
    if not directory:
        return
    path = dump_path(directory, compiled)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"// kernel {compiled.name}, output type {compiled.output_type.value}\n"
        f"// {compiled.config!r}\n// arguments: {compiled.signature}\n"
    )
    path.write_text(header + compiled.mlir)
    log.info("wrote the module of kernel %s to %s", compiled.name, path)


def _compile_through_mlir(bound: BoundKernel[Any], config: Any) -> CompiledKernel:
    """``compile_kernel`` for Helion's ``compile_config``; without a config, the one the kernel implies."""
    output_type, checked = output_type_from_env(), checked_from_env()
    log.debug("compiling kernel %s through MLIR (%s%s)", bound.kernel.name, output_type.value,
              ", checked" if checked else "")
    compiled = compile_kernel(bound, config=config, output_type=output_type, checked=checked)
    _dump(compiled)
    return compiled


def _wrap_compile_config() -> None:
    """Route ``compile_config`` of bound kernels whose backend is ``"mlir"`` to helion_mlir (once)."""
    helion_compile_config = BoundKernel.compile_config
    if getattr(helion_compile_config, "_helion_mlir_wrapped", False):
        return

    @functools.wraps(helion_compile_config)
    def compile_config(self: BoundKernel[Any], config: Any = None, *, allow_print: bool = True) -> Any:
        if isinstance(self.env.backend, MLIRBackend):
            return _compile_through_mlir(self, config)
        return helion_compile_config(self, config, allow_print=allow_print)

    compile_config._helion_mlir_wrapped = True  # type: ignore[attr-defined]
    BoundKernel.compile_config = compile_config  # type: ignore[method-assign]


def install() -> None:
    """Register the ``"mlir"`` backend with Helion and route its compilations here (idempotent)."""
    if BACKEND_NAME not in list_backends():
        register_compiler_backend(MLIRBackend)
    _wrap_compile_config()


install()
