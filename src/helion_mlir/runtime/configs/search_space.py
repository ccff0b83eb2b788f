"""The config space Helion's autotuner searches for a CPU.

A Helion config mixes what the kernel computes tile by tile with how a GPU runs it. The
emitted module depends on three kinds of fields only: ``block_sizes`` (the static tile
shapes), ``reduction_loops`` (which reductions Helion rolls into loops over chunks) and
the kernel's own tunables (``hl.register_tunable``, read by the kernel code itself).
Everything else (``num_warps``, ``num_stages``, ``pid_type``, ``l2_groupings``,
``loop_orders``, ``indexing``, eviction policies, range unrolling and pipelining, ...)
changes Triton code, not the module, so candidates differing only there would compile to
the same CPU code. Those fields are pinned to their default values through Helion's own
``autotune_config_overrides``: the search varies only what can change the CPU code, and
the autotune log shows the pinned fields as pinned. A user's own overrides win.

Two candidates can still emit the same module (a block size clamped to a small
dimension, a reduction that cannot roll); the tuner compiles and times such a module
once (see :meth:`helion_mlir.runtime.backend.helion_backend.MLIRBackend.generated_source_hash`).
"""

from __future__ import annotations

import copy
from typing import Any

from helion.runtime.config import Config

__all__ = ["TUNED_FIELDS", "cpu_config_overrides", "cpu_fields"]

#: Config fields that shape the emitted module (besides the kernel's own tunables).
TUNED_FIELDS = frozenset({"block_sizes", "reduction_loops"})


def cpu_config_overrides(bound: Any, user_overrides: dict[str, object] | None) -> dict[str, object]:
    """``autotune_config_overrides`` for tuning ``bound`` on CPU: every field of the default
    config that cannot change the emitted module, at its default value, then the user's."""
    spec = bound.config_spec
    tunables = set(getattr(spec, "user_defined_tunables", {}) or {})
    default = spec.default_config().config
    pinned = {key: copy.deepcopy(value) for key, value in default.items()
              if key not in TUNED_FIELDS and key not in tunables}
    pinned.update(user_overrides or {})
    return pinned


def cpu_fields(config: Any, spec: Any) -> Config:
    """``config`` with only the fields that shape the CPU code: what a user reads and writes
    into ``@helion.kernel(config=...)`` (the other fields take their defaults, with no effect
    on CPU). ``reduction_loops`` that roll nothing are left out too."""
    fields = dict(config.config if isinstance(config, Config) else config)
    tunables = set(getattr(spec, "user_defined_tunables", {}) or {})
    kept = {key: value for key, value in fields.items() if key in TUNED_FIELDS or key in tunables}
    if not any(kept.get("reduction_loops") or ()):
        kept.pop("reduction_loops", None)
    return Config(**kept)
