"""Helion's generated host code kept on disk, so that a process compiling a kernel another
process compiled skips Helion's code generator (15-35 ms per kernel and config, more in a
process's first kernel, which imports the generator's modules).

The key is everything Helion's generator reads: the bound kernel as Helion prints it
(``BoundKernel._debug_str``: the host function's code with the type and origin of every
expression, constants and input shapes included, and the device IR's graphs), the
normalized config, the settings that are not the autotuner's, the kernel's source and
file, the input signature Helion keys bound kernels by, and the versions of Helion, Triton,
torch, torch-mlir and this package. Kept only where generation has no effect beyond its
text: Helion's ``static_shapes=True`` (its default). Under ``static_shapes=False`` the
generator also publishes guards on input sizes to Helion's dispatch, which a kept copy would
skip, so dynamic-shape kernels always generate. Distributed kernels and CuTe's structural
policies, whose generation records more state, are not kept either; nor is a key holding an
object shown by its address (it renders differently in another process).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import logging
import weakref
from collections.abc import Callable
from typing import Any

import helion

from ...caches import DiskCache, cache_directory, compiler_fingerprint, installed_fingerprint

__all__ = ["host_source"]

log = logging.getLogger(__name__)

_ENTRIES = DiskCache("host", durable=False)

# The printed bound kernel of each bound kernel (config-independent; 2-5 ms to print), kept for
# the life of the bound kernel: tuning generates host code for many configs of one.
_PRINTED: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def host_source(bound: Any, config: Any, generate: Callable[[], str]) -> str:
    """Helion's generated source of ``bound`` under ``config``: ``generate()``'s, or the copy a
    process kept of it. Called under the front-end lock."""
    key = _key(bound, config) if cache_directory() is not None else None
    if key is None:
        return generate()
    found = _ENTRIES.read(key)
    if found is not None:
        log.debug("host code of %s from disk (%s)", bound.kernel.name, key[:12])
        return found[1].decode()
    source = generate()
    try:
        _ENTRIES.write([(key, {"kernel": bound.kernel.name}, source.encode())])
    except OSError as err:
        log.warning("could not keep the host code of %s on disk: %s", bound.kernel.name, err)
    return source


def _key(bound: Any, config: Any) -> str | None:
    """The entry's key, or None when this generation is not kept (see the module's docstring)."""
    settings = bound.settings
    if not settings.static_shapes or settings.distributed or bound.kernel.cute_structural_policy is not None:
        return None
    kept_settings = {field.name: getattr(settings, field.name) for field in dataclasses.fields(settings)
                     if not field.name.startswith("autotune")}
    fn = bound.kernel.fn
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    parts = [
        _generator_fingerprint(),
        f"{inspect.getsourcefile(fn)} {fn.__module__} {fn.__qualname__}",
        source,
        repr(sorted(kept_settings.items())),
        repr(config),
        repr(bound._base_spec_key),
        _printed(bound),
    ]
    if any(" at 0x" in part for part in parts[3:6]):
        return None
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _printed(bound: Any) -> str:
    printed = _PRINTED.get(bound)
    if printed is None:
        printed = _PRINTED[bound] = bound._debug_str()
    return printed


@functools.cache
def _generator_fingerprint() -> str:
    """The versions of what generates host code: Helion's and Triton's installs, and what
    :func:`compiler_fingerprint` covers."""
    parts = [
        compiler_fingerprint(),
        installed_fingerprint("helion", helion.__path__, (".py",)),
        installed_fingerprint("triton", (), (".py",)),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
