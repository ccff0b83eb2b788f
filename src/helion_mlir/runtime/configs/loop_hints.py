"""Helion's loop-hint config fields on CPU: accepted, validated, ignored.

Helion gives each device loop of a kernel the config fields ``static_ranges``,
``range_unroll_factors``, ``range_num_stages``, ``range_multi_buffers`` and
``range_flattens`` (``tl.range`` / ``tl.static_range`` hints) only when Triton is installed
and its ``tl.range`` takes the hint (``helion.language.loops._add_config_range_choice``). On
a CPU install without Triton the config spec has none of them, and every config that names
one is refused ("Too many values for config['range_unroll_factors'], expected 0, got 2"),
although Helion's Triton backend, whose front end the mlir backend is, accepts it. So the
fields are added as a current Triton gets them (``range_warp_specializes`` only on CUDA
devices, hence never) for kernels of the mlir backend, and for kernels of Helion's default
Triton backend when Triton is not installed (only helion_mlir compiles those, and a config
the mlir backend tuned and cached must fit the same kernel bound under the default
backend): Helion validates and normalizes them, and they change nothing on CPU (the tuner
pins them, :mod:`.search_space`).

Helion's Triton code generation, which produces the host code the compiled kernel runs,
reads the hints in ``TileStrategy.get_tl_range_kwargs``; with both ``range_num_stages`` and
``range_unroll_factors`` above 1 it takes ``int()`` of a fixed block size. When that size is
a module-level value (``hl.tile(n, block_size=BLOCK)``), ``int()`` specializes its symbol,
which is also the tile-size symbol of the block, to a number in the bound kernel's shared
shape environment: the tile can no longer be told apart from a constant dimension, and a
later emission would index with the block size as a scalar. For the same kernels the
method runs with the shape environment's guards suppressed: it computes Triton hints only,
from the same values, and records nothing.
"""

from __future__ import annotations

import functools
from typing import Any

from helion._compiler.compile_environment import CompileEnvironment
from helion._compiler.tile_strategy import TileStrategy
from helion._utils import triton_is_available
from helion.autotuner.config_spec import (
    RangeFlattenSpec,
    RangeMultiBufferSpec,
    RangeNumStagesSpec,
    RangeUnrollFactorSpec,
    StaticRangeSpec,
)
from helion.language import loops as helion_loops

__all__ = ["install"]


def install(backend: type) -> None:
    """Give device loops of kernels whose backend is a ``backend`` (or Helion's Triton backend
    without Triton) the loop-hint fields, and keep Helion's reading of them from specializing
    tile sizes (once)."""
    _wrap_range_choices(backend)
    _wrap_range_kwargs(backend)


def _on_cpu(env: CompileEnvironment, backend: type) -> bool:
    """Whether ``env``'s kernel is compiled by helion_mlir: its backend is ``backend``, or
    Helion's Triton backend on an install without Triton."""
    return isinstance(env.backend, backend) or (env.backend.name == "triton" and not triton_is_available())


def _wrap_range_choices(backend: type) -> None:
    helion_add = helion_loops._add_config_range_choice
    if getattr(helion_add, "_helion_mlir_wrapped", False):
        return

    @functools.wraps(helion_add)
    def add_range_choice(block_ids: list[int], allow_static_range: bool = False) -> None:
        env = CompileEnvironment.current()
        if not _on_cpu(env, backend):
            helion_add(block_ids, allow_static_range)
            return
        spec = env.config_spec
        if allow_static_range:
            spec.static_ranges.append(StaticRangeSpec(block_ids))
        spec.range_unroll_factors.append(RangeUnrollFactorSpec(block_ids))
        spec.range_num_stages.append(RangeNumStagesSpec(block_ids))
        spec.range_multi_buffers.append(RangeMultiBufferSpec(block_ids))
        spec.range_flattens.append(RangeFlattenSpec(block_ids))

    add_range_choice._helion_mlir_wrapped = True  # type: ignore[attr-defined]
    helion_loops._add_config_range_choice = add_range_choice  # type: ignore[assignment]


def _wrap_range_kwargs(backend: type) -> None:
    helion_kwargs = TileStrategy.get_tl_range_kwargs
    if getattr(helion_kwargs, "_helion_mlir_wrapped", False):
        return

    @functools.wraps(helion_kwargs)
    def range_kwargs(config: Any, block_idx: int) -> list[str]:
        env = CompileEnvironment.current()
        if not _on_cpu(env, backend):
            return helion_kwargs(config, block_idx)
        with env.shape_env.suppress_guards():
            return helion_kwargs(config, block_idx)

    range_kwargs._helion_mlir_wrapped = True  # type: ignore[attr-defined]
    TileStrategy.get_tl_range_kwargs = staticmethod(range_kwargs)  # type: ignore[method-assign]
