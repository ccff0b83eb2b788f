"""A one-line hint when a kernel runs on Helion's default config without anyone choosing it.

Helion's default config is made for GPUs (32-wide blocks); on a CPU a tuned config is
often several times faster (docs/your-own-kernel.md measures one). A kernel runs the
default config implicitly when it has no config of its own and no tuned config is cached:
``compile_kernel`` (and ``helion-mlir run``) then, or ``backend="mlir"`` with
``autotune_effort="none"``. Tuning can only help where the config has something to choose
on CPU (a block size, a reduction that can roll, a tunable of the kernel's), so kernels
without one get no hint. The hint is logged once per kernel function and process.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import logging
from collections.abc import Iterator
from typing import Any

from .search_space import cpu_fields

__all__ = ["hint_default_config", "suggesting"]

log = logging.getLogger(__name__)

_HINTED: set[tuple[str, str]] = set()  # (source file, qualified name) of kernels hinted at
_COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("helion_mlir_tune_command", default=None)


@contextlib.contextmanager
def suggesting(command: str) -> Iterator[None]:
    """Inside the block, the hint suggests ``command`` to tune (the command line knows the
    kernel's file and arguments; the hint alone does not)."""
    token = _COMMAND.set(command)
    try:
        yield
    finally:
        _COMMAND.reset(token)


def _has_choices(spec: Any) -> bool:
    """Whether a config can differ from the default in what shapes the CPU code."""
    return bool(len(spec.block_sizes) or len(spec.reduction_loops) or getattr(spec, "user_defined_tunables", None))


def hint_default_config(bound: Any, config: Any) -> None:
    """Log how to tune ``bound``'s kernel, which runs the default ``config`` implicitly (once
    per kernel)."""
    fn = bound.kernel.fn
    try:
        source = inspect.getsourcefile(fn) or "FILE.py"
    except TypeError:
        source = "FILE.py"
    key = (source, fn.__qualname__)
    if key in _HINTED or not _has_choices(bound.config_spec):
        return
    _HINTED.add(key)
    name = fn.__name__
    fields = ", ".join(f"{key}={value!r}" for key, value in cpu_fields(config, bound.config_spec).config.items())
    command = _COMMAND.get() or f"helion-mlir tune {source}:{name} --args '...'"
    log.warning(
        "kernel '%s' runs Helion's default config (%s), chosen for GPUs; tuning it for this CPU can make it "
        "faster: %s (or %s.autotune(args) with backend='mlir'), cached and used from then on; give the "
        "kernel a config to run that one instead", name, fields, command, name)
