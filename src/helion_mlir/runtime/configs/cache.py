"""Helion's on-disk autotune cache, keyed for a CPU.

Helion caches the best config of a kernel in ``$HELION_CACHE_DIR`` (default: torch's cache
directory + ``/helion``), one ``<hash>.best_config`` file per key. Its key names the GPU
and the CUDA/ROCm runtime, which a CPU does not have (``LocalAutotuneCache`` refuses a CPU
device). The classes here keep Helion's file format, directory and everything else in the
key (the kernel's source, the arguments' specialization, the config space, ``best_of_k``)
and name instead:

* ``hardware``: the CPU model (``/proc/cpuinfo``), so a cache copied to another machine
  does not apply;
* ``runtime_name``: torch-mlir's version, the thread count the kernel runs with, the
  pipeline and the output type ATen ops are lowered to (each gives other code, so each
  its own best config);
* ``backend``: always ``mlir``, and ``config_spec_hash``: the fields the CPU search varies
  (block sizes, reduction loops, the kernel's tunables; see :mod:`.search_space`), so
  that ``compile_kernel`` finds the config tuned for a kernel whatever backend the
  kernel itself names (Triton's config space also holds GPU-only choices).

:class:`StrictCPUAutotuneCache` (``HELION_AUTOTUNE_CACHE=StrictLocalAutotuneCache``) also
keys on the source of Helion, torch and helion_mlir, as Helion's strict cache does with
Helion, torch and Triton.

The config a search writes is its best one, or the default config when a user's call of
the default is faster (see :mod:`..tuning.settle`). :func:`cached_config` reads the entry a tuning
run wrote, so that ``compile_kernel`` can use a tuned config without tuning.
An entry whose config the kernel no longer accepts (one written by an older version, or
edited) or that does not compile counts as a cache miss, with a warning naming the file:
``compile_kernel`` runs the default config, and a tuning run tunes again and rewrites the
entry; it never fails every later call.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import json
import logging
import platform
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import helion
from helion.autotuner.base_cache import (
    LooseAutotuneCacheKey,
    StrictAutotuneCacheKey,
    helion_key,
    should_skip_cache,
    torch_key_wrapper,
)
from helion.autotuner.local_cache import LocalAutotuneCache, get_helion_cache_dir
from helion.exc import InvalidConfig
from helion.runtime.config import Config
from torch._inductor.codecache import build_code_hash

from ...errors import HelionMLIRError
from ...lowering.kernel_config import resolve_config
from ...output_type import OutputType
from .search_space import TUNED_FIELDS

__all__ = [
    "CPUAutotuneCache",
    "StrictCPUAutotuneCache",
    "TunedConfig",
    "cache_class_for",
    "cache_path",
    "cached_config",
    "cpu_cache_key",
    "cpu_model",
]

log = logging.getLogger(__name__)

#: The pipeline the ``mlir`` backend runs kernels with (the only one it tunes for).
PIPELINE = "fast"
#: The backend named in the key: the one whose tuner wrote the entry.
BACKEND = "mlir"


@functools.cache
def cpu_model() -> str:
    """The CPU's model name, as the kernel's hardware in the cache key."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _runtime_name(output_type: OutputType, threads: int) -> str:
    return (f"torch-mlir {importlib.metadata.version('torch-mlir')}, {threads} thread(s), "
            f"{PIPELINE} pipeline, {output_type.value}")


@functools.cache
def _helion_mlir_key() -> str:
    digest = hashlib.sha256()
    build_code_hash([str(Path(__file__).resolve().parents[2])], "", digest)
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True, repr=False)
class StrictCPUAutotuneCacheKey(StrictAutotuneCacheKey):
    """The strict key with the source of helion_mlir where the GPU key has Triton's."""

    helion_mlir_key: str = dataclasses.field(default_factory=_helion_mlir_key)


def cpu_cache_key(bound: Any, args: Sequence[object] | None, *, output_type: OutputType, threads: int,
                  strict: bool = False, best_of_k: int = 1,
                  search_acf: Sequence[str] = ()) -> LooseAutotuneCacheKey:
    """The key Helion's local cache uses, with the CPU's fields (see the module docstring).

    The arguments' specialization is the bound kernel's (Helion computed it from the
    arguments it was bound to); ``args`` (by default the bound kernel's fake arguments, which
    have the same sizes) evaluate the ``hl.specialize`` extractors."""
    kernel = bound.kernel
    args = tuple(bound.fake_args if args is None else args)
    in_memory = kernel._create_bound_kernel_cache_key(bound, args, bound._base_spec_key)
    source = textwrap.dedent(inspect.getsource(kernel.fn))
    fields: dict[str, Any] = dict(
        specialization_key=in_memory.specialization_key,
        extra_results=in_memory.extra_results,
        compiler_seed_results=in_memory.compiler_seed_results,
        kernel_source_hash=hashlib.sha256(source.encode("utf-8")).hexdigest(),
        hardware=cpu_model(),
        runtime_name=_runtime_name(output_type, threads),
        backend=BACKEND,
        config_spec_hash=_searched_space_hash(bound, search_acf),
        extra_cache_key=bound.extra_cache_key(),
        best_of_k=best_of_k,
    )
    if strict:
        return StrictCPUAutotuneCacheKey(**fields, helion_key=helion_key(), torch_key=torch_key_wrapper(),
                                         triton_key="")
    return LooseAutotuneCacheKey(**fields)


def _searched_space_hash(bound: Any, search_acf: Sequence[str]) -> str:
    """A hash of the config fields the CPU search varies, as Helion's structure fingerprint
    describes them."""
    spec = bound.config_spec
    searched = TUNED_FIELDS | set(spec.user_defined_tunables)
    rows = [row for row in spec.structural_fingerprint(advanced_controls_files=list(search_acf) or None)
            if row and row[0] in searched]
    return hashlib.sha256(repr(rows).encode("utf-8")).hexdigest()


def cache_path(key: LooseAutotuneCacheKey) -> Path:
    """Where Helion's local cache keeps the entry of ``key``."""
    return get_helion_cache_dir() / f"{key.stable_hash()}.best_config"


class CPUAutotuneCache(LocalAutotuneCache):
    """Helion's ``LocalAutotuneCache`` with the CPU key of :func:`cpu_cache_key`.

    The output type and thread count come from the tuning session that creates it, and so
    does :attr:`after_search`: what turns the search's best config into the one cached."""

    strict = False
    output_type = OutputType.LINALG_ON_TENSORS
    threads = 1
    after_search: Callable[[Config, Sequence[object]], Config] | None = None

    def _run_autotune_trials(self, *, skip_cache: bool = False) -> Config:
        best = super()._run_autotune_trials(skip_cache=skip_cache)
        if self.after_search is None or not isinstance(self.args, (tuple, list)):  # (Helion's multi-shape args)
            return best
        return self.after_search(best, self.args)
    #: What makes a cached config usable: resolving it, or (set by the tuning session)
    #: compiling it as the kernel will run it.
    check: Callable[[Any, Config], Config] = staticmethod(resolve_config)

    def get(self) -> Config | None:
        """Helion's cached config, or None (a cache miss: the kernel is tuned again and the
        entry rewritten) when it is not valid for the kernel or does not compile."""
        config = super().get()
        if config is None or _usable(self.kernel, config, self._get_local_cache_path(), self.check) is None:
            return None
        return config

    def _generate_key(self) -> LooseAutotuneCacheKey:
        settings = self.autotuner.settings
        return cpu_cache_key(self.kernel, self.args, output_type=self.output_type, threads=self.threads,
                             strict=self.strict, best_of_k=settings.autotune_best_of_k,
                             search_acf=settings.autotune_search_acf)

    def _get_cache_info_message(self) -> str:
        return (f"Cache file: {self._get_local_cache_path()}. To re-tune and update the cache, "
                "set HELION_FORCE_AUTOTUNE=1.")


class StrictCPUAutotuneCache(CPUAutotuneCache):
    """The CPU counterpart of Helion's ``StrictLocalAutotuneCache``."""

    strict = True


_CACHE_CLASSES: dict[str, type[CPUAutotuneCache]] = {
    "LocalAutotuneCache": CPUAutotuneCache,
    "StrictLocalAutotuneCache": StrictCPUAutotuneCache,
}


def cache_class_for(name: str, *, output_type: OutputType, threads: int,
                    check: Callable[[Any, Config], Config] | None = None) -> type[CPUAutotuneCache]:
    """The CPU cache class standing for Helion's cache class ``name`` (``HELION_AUTOTUNE_CACHE``);
    ``check`` replaces :attr:`CPUAutotuneCache.check`."""
    base = _CACHE_CLASSES.get(name)
    if base is None:
        raise HelionMLIRError(
            f"HELION_AUTOTUNE_CACHE={name!r} is not available for backend 'mlir' on CPU; "
            f"use one of {', '.join(_CACHE_CLASSES)}")
    fields: dict[str, Any] = {"output_type": output_type, "threads": threads}
    if check is not None:
        fields["check"] = staticmethod(check)
    return type(base.__name__, (base,), fields)


@dataclasses.dataclass(frozen=True)
class TunedConfig:
    """A config read back from the autotune cache, resolved for its kernel, and its file."""

    config: Config
    path: Path


def cached_config(bound: Any, args: Sequence[object] | None, *, output_type: OutputType, threads: int,
                  check: Callable[[Any, Config], Config] = resolve_config, warn: bool = True) -> TunedConfig | None:
    """The config a tuning run cached for ``bound`` on these arguments as ``check`` returns
    it (by default resolved, :func:`~helion_mlir.lowering.kernel_config.resolve_config`;
    ``compile_kernel`` compiles it), or None; one the kernel no longer accepts or that does
    not compile is skipped, with a warning naming its file (``warn``)."""
    settings = bound.settings
    if settings.autotune_cache not in _CACHE_CLASSES or should_skip_cache():
        return None
    key = cpu_cache_key(bound, args, output_type=output_type, threads=threads,
                        strict=_CACHE_CLASSES[settings.autotune_cache].strict,
                        best_of_k=settings.autotune_best_of_k, search_acf=settings.autotune_search_acf)
    path = cache_path(key)
    try:
        data = json.loads(path.read_text())
        config = Config.from_json(data["config"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    resolved = _usable(bound, config, path, check, warn=warn)
    if resolved is None:
        return None
    log.info("kernel %s: tuned config %r from %s", bound.kernel.name, resolved, path)
    return TunedConfig(resolved, path)


def _usable(bound: Any, config: Config, path: Path, check: Callable[[Any, Config], Config], *,
            warn: bool = True) -> Config | None:
    """``check(bound, config)``, or None when the cached ``config`` is invalid for ``bound``
    or does not compile: then the entry counts as a cache miss, with a warning naming its file."""
    try:
        return check(bound, config)
    except (helion.exc.Base, HelionMLIRError) as err:
        problem = "is not valid for it" if isinstance(err, InvalidConfig) else "does not compile"
        log.log(logging.WARNING if warn else logging.DEBUG,
                "kernel %s: the tuned config cached in %s %s (%s); it counts as a cache miss (a tuning run tunes "
                "again and replaces it, compile_kernel runs the default config)", bound.kernel.name, path, problem,
                str(err).strip().splitlines()[0])
        return None
