""":func:`tune`: run Helion's autotuner for a kernel on CPU and report what it did.

What ``helion-mlir tune`` calls. The kernel is tuned as a ``backend="mlir"`` twin without
configs of its own (the same function, so the same cache entry as the kernel under
``backend="mlir"``), at the requested effort. The times it reports are those the search's
last step took to choose the config it caches (:mod:`..tuning.settle`: calls of the tuned config,
the default config, and what the caller adds, such as torch eager, round-robin); when the
config came from the cache, the same comparison is made to report them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import helion
import torch

from ...output_type import OutputType
from ..configs.cache import (
    BACKEND,
    CPUAutotuneCache,
    cache_class_for,
    cache_path,
    cpu_cache_key,
)
from ..tuning.session import Beside, observed_sessions, timed_beside
from ..tuning.settle import Settlement, settle
from .helion_backend import lowering_to

__all__ = ["TuneResult", "tune", "tuning_twin"]


@dataclasses.dataclass
class TuneResult:
    """The outcome of one :func:`tune`."""

    bound: Any  #: the twin's bound kernel, with the chosen config set
    config: helion.Config  #: the config cached (the search's best, or the default config)
    default_config: helion.Config
    cache_file: Path
    from_cache: bool  #: the config came from the cache; nothing was compiled or timed in the worker
    candidates: int  #: configs compiled (the reference config included)
    timed: int  #: distinct modules timed
    failures: int  #: configs that did not lower or compile
    dropped: int  #: modules given up because their worker died each time they were tried
    seconds: float  #: wall time of the tuning run
    settlement: Settlement  #: the times of a call of each config and reference
    untimed: bool = False  #: the time budget ran out before any config was timed: the default config, not cached


def tuning_twin(kernel: helion.Kernel, effort: str) -> helion.Kernel:
    """``kernel``'s function on the ``mlir`` backend at ``effort``, without configs."""
    settings = dataclasses.replace(kernel.settings, backend=BACKEND, autotune_effort=effort)
    return helion.kernel(kernel.fn, settings=settings)


def tune(kernel: helion.Kernel, args: Sequence[object], *, effort: str = "quick", force: bool = False,
         output_type: OutputType = OutputType.LINALG_ON_TENSORS, configs: Mapping[str, helion.Config] | None = None,
         references: Mapping[str, Callable[..., object]] | None = None) -> TuneResult:
    """Tune ``kernel`` for ``args`` (``force``: even when a result is cached), lowering ATen
    ops to ``output_type``; ``configs`` and ``references`` (callables taking the kernel's
    arguments) are timed beside the tuned and default configs, under their labels."""
    twin = tuning_twin(kernel, effort)
    args = tuple(args)
    bound = twin.bind(args)
    settings = bound.settings
    cache_cls: type[CPUAutotuneCache] = cache_class_for(settings.autotune_cache, output_type=output_type,
                                                        threads=max(1, torch.get_num_threads()))
    key = cpu_cache_key(bound, args, output_type=output_type, threads=cache_cls.threads, strict=cache_cls.strict,
                        best_of_k=settings.autotune_best_of_k, search_acf=settings.autotune_search_acf)
    beside = Beside(configs=dict(configs or {}), references=dict(references or {}))
    with lowering_to(output_type), observed_sessions() as sessions, timed_beside(beside):
        config = bound.autotune(args, force=force)
    candidates = sum(s.candidates for s in sessions)
    timed = sum(s.timed for s in sessions)
    default = bound.config_spec.default_config()
    settled = next((s.settlement for s in sessions if s.settlement is not None), None)
    untimed = any(s.untimed is not None for s in sessions)
    if settled is None:  # a cached config, or a search whose default config did not run in the worker
        timed_default = default if untimed or not candidates else None
        settled = settle(bound, args, config, output_type=output_type, default=timed_default,
                         configs=beside.configs, references=beside.references)
    return TuneResult(
        bound=bound,
        config=config,
        default_config=default,
        cache_file=cache_path(key),
        from_cache=candidates == 0 and timed == 0,
        candidates=candidates,
        timed=timed,
        failures=sum(s.failures for s in sessions),
        dropped=sum(s.dropped for s in sessions),
        seconds=sum(s.seconds for s in sessions),
        settlement=settled,
        untimed=untimed,
    )
