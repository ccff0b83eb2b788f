"""The Helion backend ``"mlir"``: calling a Helion kernel runs it on CPU through helion_mlir.

Importing ``helion_mlir`` registers the backend, after which any of
``@helion.kernel(backend="mlir")``, ``helion.Settings(backend="mlir")`` or the environment
variable ``HELION_BACKEND=mlir`` (read when Helion builds a kernel's settings, so import
``helion_mlir`` first) makes a kernel call compile the bound kernel with
:func:`helion_mlir.runtime.kernel.compiled_kernel.compile_kernel` and run the native code on CPU tensors.

Design. Helion's backends are source-to-source: ``BoundKernel.compile_config`` turns a
config into the callable the kernel runs by generating Python source and importing it.
:class:`MLIRBackend` subclasses Helion's Triton backend and reuses its code generator
(``codegen_name`` is ``"triton"``, as Helion's own TileIR backend does), so a kernel binds
as it does under Helion's default backend, whose device IR helion_mlir lowers, and Helion
can still generate the host code that :mod:`helion_mlir.runtime.kernel.host_code` runs. Helion has no backend hook that supplies the callable
itself: ``compile_config`` always imports the generated module, which imports Triton (absent
from CPU installs) and exists only when Triton code generation succeeds for every device op
(helion_mlir needs only the host code, and takes it from the kernel source when generation
fails). So one method is wrapped, ``BoundKernel.compile_config``:
for bound kernels whose backend is ``"mlir"`` it returns a :class:`CompiledKernel` (cached
by ``compile_kernel``) instead; for every other backend it calls Helion's method unchanged.
Helion keeps the returned callable as the bound kernel's runner, so later calls with the
same signature go through Helion's own dispatch caches straight to it.

Threads. Helion's ``Kernel.bind`` is not safe in two threads at once (it traces with
torch.fx's process-wide state; docs/architecture.md, "Threads"), and a kernel's first call
binds it. ``Kernel.bind`` of kernels whose backend is ``"mlir"`` therefore runs under the
package's front-end lock (:mod:`helion_mlir.front_end_lock`), as every bind of the package's
own does; other backends' binds are left as they are.

Config. Configs are chosen as under Helion's default backend, by Helion's own code: a
kernel with one config runs it; with several (``configs=[...]``) the fastest is timed; with
none, Helion's autotuner searches (``autotune_effort`` / ``HELION_AUTOTUNE_EFFORT``:
``none`` runs the default config, ``quick`` and ``full`` search, ``full`` by default) and
caches the result on disk, so the next process with the same kernel, arguments and
machine times nothing. On CPU the search runs through :mod:`helion_mlir.runtime.tuning`:
candidates compile and run in a worker process that a crashing candidate cannot take this
process down with, are timed by wall clock there, and vary only the config fields that
change the emitted module. ``HELION_USE_DEFAULT_CONFIG=1``, the setting Helion replaced by
``HELION_AUTOTUNE_EFFORT=none``, is still honoured here (with a warning), as it was.

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

import contextlib
import contextvars
import functools
import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from helion._compiler.backend import BackendState
from helion._compiler.backend_registry import list_backends, register_compiler_backend
from helion._compiler.triton.backend import TritonBackend
from helion.exc import NoConfigFound
from helion.runtime.config import Config
from helion.runtime.kernel import BoundKernel, Kernel

from ...errors import HelionMLIRError
from ...front_end_lock import FRONT_END_LOCK
from ...output_type import OutputType
from ..configs import loop_hints, seeds
from . import helion_autodiff
from ..configs.default_config_hint import hint_default_config
from ..configs.search_space import cpu_fields
from ..kernel.compiled_kernel import CompiledKernel, compile_kernel
from ..tuning.session import CandidateKernel, active_session, cpu_do_bench, cpu_interleaved_bench, tuning

__all__ = [
    "BACKEND_NAME",
    "CHECKED_ENV",
    "DUMP_ENV",
    "LEGACY_DEFAULT_CONFIG_ENV",
    "OUTPUT_TYPE_ENV",
    "MLIRBackend",
    "checked_from_env",
    "dump_path",
    "install",
    "lowering_to",
    "output_type_from_env",
]

log = logging.getLogger(__name__)

BACKEND_NAME = "mlir"
OUTPUT_TYPE_ENV = "HELION_MLIR_OUTPUT_TYPE"
DUMP_ENV = "HELION_MLIR_DUMP"
CHECKED_ENV = "HELION_MLIR_CHECKED"
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off", ""})
#: Helion's former switch for "no autotuning" (now ``HELION_AUTOTUNE_EFFORT=none``).
LEGACY_DEFAULT_CONFIG_ENV = "HELION_USE_DEFAULT_CONFIG"


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

    # -- autotuning (see helion_mlir.runtime.tuning) ----------------------------------

    def supports_precompile(self) -> bool:
        # Helion's precompile forks Triton launchers; candidates compile in the JIT worker instead.
        return False

    def get_do_bench(self) -> Callable[..., float | tuple[float, ...] | list[float]]:
        return cpu_do_bench

    def get_interleaved_bench(self) -> Callable[..., list[float]]:
        return cpu_interleaved_bench

    def classify_autotune_exception(self, err: BaseException) -> str | None:
        # A candidate that does not lower, compile, run or finish in time is one failed
        # candidate (its reason is logged); Helion's fallback classifier knows only Triton's
        # messages and would abort the search on anything else.
        return "warn" if isinstance(err, Exception) else None

    def generated_source_hash(self, compiled_fn: object) -> str | None:
        return compiled_fn.module_key if isinstance(compiled_fn, CandidateKernel) else None

    def should_deduplicate_generated_sources(self, config_spec: Any) -> bool:
        # Equal module text, equal compile options: the same native code, timed once.
        return True

    def autotune(
        self, bound_kernel: BoundKernel[Any], args: Sequence[object], *, force: bool = True, **kwargs: object
    ) -> Config:
        """Helion's autotuning (one config, ``configs=[...]``, or a search) with CPU candidates."""
        if _legacy_default_config_requested():
            log.warning("%s is Helion's former spelling of HELION_AUTOTUNE_EFFORT=none; kernel %s runs its "
                        "default config", LEGACY_DEFAULT_CONFIG_ENV, bound_kernel.kernel.name)
            return bound_kernel.config_spec.default_config()
        with tuning(bound_kernel, args, output_type=output_type_from_env(), force=force) as session:
            try:
                return super().autotune(bound_kernel, args, force=force, **kwargs)
            except (NoConfigFound, AssertionError):  # Helion 1.5.1's FiniteSearch asserts a best config
                fallback = session.fallback_when_nothing_timed()
                if fallback is None:
                    raise
                return fallback


def _legacy_default_config_requested() -> bool:
    return os.environ.get(LEGACY_DEFAULT_CONFIG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


_OUTPUT_TYPE: contextvars.ContextVar[OutputType | None] = contextvars.ContextVar("helion_mlir_output_type",
                                                                               default=None)


@contextlib.contextmanager
def lowering_to(output_type: OutputType) -> Iterator[None]:
    """Inside the block, the backend lowers ATen ops to ``output_type`` whatever
    ``HELION_MLIR_OUTPUT_TYPE`` says (for callers such as ``helion-mlir tune -t``)."""
    token = _OUTPUT_TYPE.set(output_type)
    try:
        yield
    finally:
        _OUTPUT_TYPE.reset(token)


def output_type_from_env() -> OutputType:
    """The output type ``HELION_MLIR_OUTPUT_TYPE`` asks for (linalg-on-tensors when unset),
    unless :func:`lowering_to` chose one."""
    chosen = _OUTPUT_TYPE.get()
    if chosen is not None:
        return chosen
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
    if config is not None and not bound.kernel.configs and (
            bound.kernel.settings.autotune_effort == "none" or _legacy_default_config_requested()):
        hint_default_config(bound, config)  # Helion chose its default config: tuning is off
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
            session = active_session(self)
            if session is not None and config is not None:
                return session.candidate(config)
            return _compile_through_mlir(self, config)
        return helion_compile_config(self, config, allow_print=allow_print)

    compile_config._helion_mlir_wrapped = True  # type: ignore[attr-defined]
    BoundKernel.compile_config = compile_config  # type: ignore[method-assign]


def _wrap_bind() -> None:
    """Serialize ``Kernel.bind`` of kernels whose backend is ``"mlir"`` with the package's other binds (once)."""
    helion_bind = Kernel.bind
    if getattr(helion_bind, "_helion_mlir_wrapped", False):
        return

    @functools.wraps(helion_bind)
    def bind(self: Kernel[Any], args: tuple[object, ...]) -> BoundKernel[Any]:
        if self.settings.backend != BACKEND_NAME:
            return helion_bind(self, args)
        with FRONT_END_LOCK:
            return helion_bind(self, args)

    bind._helion_mlir_wrapped = True  # type: ignore[attr-defined]
    Kernel.bind = bind  # type: ignore[method-assign]


def _wrap_format_kernel_decorator() -> None:
    """Show configs of kernels whose backend is ``"mlir"`` with the fields that matter on CPU
    (once): Helion's "Using implicit config: @helion.kernel(config=...)" and its tuning
    reports print every GPU field (``num_warps``, ``indexing=['pointer', ...]``)."""
    helion_format = BoundKernel.format_kernel_decorator
    if getattr(helion_format, "_helion_mlir_wrapped", False):
        return

    @functools.wraps(helion_format)
    def format_kernel_decorator(self: BoundKernel[Any], config: Any, settings: Any) -> str:
        if settings.backend == BACKEND_NAME:
            config = cpu_fields(config, self.config_spec)
        return helion_format(self, config, settings)

    format_kernel_decorator._helion_mlir_wrapped = True  # type: ignore[attr-defined]
    BoundKernel.format_kernel_decorator = format_kernel_decorator  # type: ignore[method-assign]


def install() -> None:
    """Register the ``"mlir"`` backend (and its CPU seed configs, :mod:`..configs.seeds`) with
    Helion, route its compilations and binds here, give its kernels Triton's loop-hint
    config fields (:mod:`..configs.loop_hints`) and let Helion's autodiff differentiate CPU
    kernels (:mod:`.helion_autodiff`) (idempotent)."""
    if BACKEND_NAME not in list_backends():
        register_compiler_backend(MLIRBackend)
    seeds.install()
    loop_hints.install(MLIRBackend)
    _wrap_compile_config()
    _wrap_bind()
    _wrap_format_kernel_decorator()
    helion_autodiff.install(BACKEND_NAME)


install()
