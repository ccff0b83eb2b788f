""":func:`tune`: run Helion's autotuner for a kernel on CPU and report what it did.

What ``helion-mlir tune`` calls. The kernel is tuned as a ``backend="mlir"`` twin without
configs of its own (the same function, so the same cache entry as the kernel under
``backend="mlir"``), at the requested effort.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import helion
import torch

from ...output_type import OutputType
from ..helion_backend import lowering_to
from .cache import BACKEND, CPUAutotuneCache, cache_class_for, cache_path, cpu_cache_key
from .session import observed_sessions

__all__ = ["TuneResult", "tune", "tuning_twin"]


@dataclasses.dataclass
class TuneResult:
    """The outcome of one :func:`tune`."""

    bound: Any  #: the twin's bound kernel, with the chosen config set
    config: helion.Config
    default_config: helion.Config
    cache_file: Path
    from_cache: bool  #: the config came from the cache; nothing was compiled or timed
    candidates: int  #: configs compiled (the reference config included)
    timed: int  #: distinct modules timed
    failures: int  #: configs that did not lower or compile
    dropped: int  #: modules given up because their worker died each time they were tried
    seconds: float  #: wall time of the tuning run


def tuning_twin(kernel: helion.Kernel, effort: str) -> helion.Kernel:
    """``kernel``'s function on the ``mlir`` backend at ``effort``, without configs."""
    settings = dataclasses.replace(kernel.settings, backend=BACKEND, autotune_effort=effort)
    return helion.kernel(kernel.fn, settings=settings)


def tune(kernel: helion.Kernel, args: Sequence[object], *, effort: str = "quick", force: bool = False,
         output_type: OutputType = OutputType.LINALG_ON_TENSORS) -> TuneResult:
    """Tune ``kernel`` for ``args`` (``force``: even when a result is cached), lowering ATen
    ops to ``output_type``."""
    twin = tuning_twin(kernel, effort)
    args = tuple(args)
    bound = twin.bind(args)
    settings = bound.settings
    cache_cls: type[CPUAutotuneCache] = cache_class_for(settings.autotune_cache, output_type=output_type,
                                                        threads=max(1, torch.get_num_threads()))
    key = cpu_cache_key(bound, args, output_type=output_type, threads=cache_cls.threads, strict=cache_cls.strict,
                        best_of_k=settings.autotune_best_of_k, search_acf=settings.autotune_search_acf)
    with lowering_to(output_type), observed_sessions() as sessions:
        config = bound.autotune(args, force=force)
    candidates = sum(s.candidates for s in sessions)
    timed = sum(s.timed for s in sessions)
    return TuneResult(
        bound=bound,
        config=config,
        default_config=bound.config_spec.default_config(),
        cache_file=cache_path(key),
        from_cache=candidates == 0 and timed == 0,
        candidates=candidates,
        timed=timed,
        failures=sum(s.failures for s in sessions),
        dropped=sum(s.dropped for s in sessions),
        seconds=sum(s.seconds for s in sessions),
    )
