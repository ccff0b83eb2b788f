"""The config a kernel is lowered with, normalized by Helion's own code.

Every entry point (``generate_mlir``, ``compile_kernel``, the ``"mlir"`` backend, a tuning
candidate, a config read back from the autotune cache) calls :func:`resolve_config` once and
hands the result down: the kernel model, the host code and the cache keys all see the same
normalized config.

The config chosen is the one given (a ``helion.Config`` or a dict of its fields), else the
bound kernel's own, else the kernel's first, else Helion's default. It is then normalized as
``BoundKernel.compile_config`` normalizes it, by ``ConfigSpec.normalized_config``: aliases
become lists (``block_size=16`` is ``block_sizes=[16]``; ``reduction_loop``, ``loop_order``,
``l2_grouping``, ...), nested lists are flattened, omitted fields take their defaults,
fields the backend does not know are dropped, and a config Helion refuses raises Helion's
:class:`helion.exc.InvalidConfig` naming the field (zero, negative, non-integer or
non-power-of-two block sizes, the wrong number of them, unknown keys or values). Helion's
rules are kept as they are even where the CPU would not need them (powers of two, a matmul
tile of at least 16): a config means the same on every backend, and Helion's autotuner and
cache assume it.

On CPU, ``block_sizes``, ``reduction_loops`` and the kernel's own tunables
(``hl.register_tunable``) shape the emitted code; the other fields (``num_warps``,
``num_stages``, ``pid_type``, ``indexing``, ``loop_orders``, ``l2_groupings``, ...) are
validated and then change nothing (docs/lowering.md, "Configs").
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import helion
from helion.exc import InvalidConfig

from ..caches import LRUCache

__all__ = ["RESOLVED_CONFIGS", "resolve_config"]

#: Configs remembered per bound kernel, as given and as resolved: normalizing takes 0.4-0.7 ms,
#: a thousand times what a ``compile_kernel`` served from its cache takes besides.
RESOLVED_CONFIGS = 64
_RESOLVED: "weakref.WeakKeyDictionary[Any, LRUCache[helion.Config]]" = weakref.WeakKeyDictionary()


def resolve_config(bound: Any, config: Any = None) -> helion.Config:
    """The normalized config ``bound`` is lowered with (see the module docstring); the same
    ``helion.Config`` for the same config, which nothing may change.

    Raises :class:`helion.exc.InvalidConfig` for a config Helion refuses."""
    chosen = _chosen_config(bound, config)
    key = repr(chosen)
    resolved = _RESOLVED.get(bound)
    if resolved is None:
        resolved = _RESOLVED.setdefault(bound, LRUCache(RESOLVED_CONFIGS))
    found = resolved.get(key)
    if found is None:
        try:
            found = bound.config_spec.normalized_config(chosen)
        except InvalidConfig as err:
            raise InvalidConfig(f"{err} (kernel '{bound.kernel.name}', {chosen!r})") from err
        resolved.put(key, found)
    return found


def _chosen_config(bound: Any, config: Any) -> helion.Config:
    """The explicit config as a ``helion.Config``, else the one the bound kernel implies."""
    if config is None:
        own = getattr(bound, "_config", None)
        if isinstance(own, helion.Config):
            return own
        configs = list(getattr(bound.kernel, "configs", None) or [])
        return configs[0] if configs else bound.config_spec.default_config()
    if isinstance(config, helion.Config):
        return config
    if not isinstance(config, Mapping):
        raise InvalidConfig(f"a config is a helion.Config or a dict of its fields, got {type(config).__name__} "
                            f"{config!r} (kernel '{bound.kernel.name}')")
    try:
        return helion.Config(**config)
    except TypeError as err:
        raise InvalidConfig(f"{err} (kernel '{bound.kernel.name}', config {config!r})") from err
