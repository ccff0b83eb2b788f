"""Where Helion's search starts on CPU: compiler seed configs for backend ``"mlir"``.

Helion lets a backend plant configs its searches try first ("autotuner heuristics",
registered per backend name); its quick effort starts from those, the default config and
cached results only, and moves one block size by a step or two per generation. Helion's
default config tiles every dimension by 16 (1 for rows), sized for GPU thread blocks; on
a CPU such tiles leave the vector units and caches underused (docs/benchmarks.md, "Autotuning
on CPU": the default config against the tuned one), so a quick search from the default
alone spends its budget walking towards larger tiles. The seeds here tile every block
dimension alike by 32, 64 and 128 (within each dimension's allowed range), so the search
starts near the tile sizes that suit vector registers and per-core caches and refines
from the best of them. Two more shapes of tile suit row kernels on a CPU and lie many steps
from both the default and the uniform seeds: each uniform seed again with every reduction
kept whole (``reduction_loops`` of ``None``: a row of tens of KiB still fits a core's L2),
and, for a nest of several tiles, a narrow outer tile with every inner tile at its largest
(:data:`SEED_OUTER_TILE` rows, each row in one piece, as the two-pass softmax wants). A
kernel with a loop of tiles inside its grid (a matmul's loop over K) gets one more seed:
grid tiles of 64 and loop tiles of :data:`SEED_LOOP_TILE`, so that each step of the loop
does enough work to amortize reading and writing its accumulator, and a grid dimension that
only splits another's range (split-K's outer K tile) taken whole, one tile running the
whole loop, as a CPU core wants it. They are not promoted to the default:
``autotune_effort="none"`` still runs Helion's default config.
"""

from __future__ import annotations

from typing import Any

from helion._compiler.autotuner_heuristics import HEURISTICS_BY_BACKEND
from helion._compiler.autotuner_heuristics.registry import AutotunerHeuristic
from helion.runtime.config import Config

__all__ = ["SEED_LOOP_TILE", "SEED_OUTER_TILE", "SEED_TILES", "CPUTileSeeds", "install"]

#: Tile extents of the uniform seeds, one seed each.
SEED_TILES = (32, 64, 128)
#: Outer tile of the seed whose inner tiles are as large as allowed.
SEED_OUTER_TILE = 2
#: Tile of the loops inside the grid (a matmul's K) in the deep-loop seed; its grid tiles are 64.
SEED_LOOP_TILE = 512


class CPUTileSeeds(AutotunerHeuristic):
    """Uniform tiles of :data:`SEED_TILES` (see the module docstring)."""

    name = "mlir_cpu_tiles"
    backend = "mlir"

    @classmethod
    def is_eligible(cls, env: Any, device_ir: Any) -> bool:
        return len(env.config_spec.block_sizes) > 0

    @classmethod
    def get_seed_configs(cls, env: Any, device_ir: Any) -> list[Config] | None:
        specs = list(env.config_spec.block_sizes)
        uniform = [[_clamp(spec, tile) for spec in specs] for tile in SEED_TILES]
        shapes = [Config(block_sizes=sizes) for sizes in uniform]
        whole_reductions = [None] * len(env.config_spec.reduction_loops)
        if whole_reductions:
            shapes += [Config(block_sizes=sizes, reduction_loops=whole_reductions) for sizes in uniform]
        if len(specs) > 1:
            shapes.append(Config(block_sizes=[_clamp(specs[0], SEED_OUTER_TILE)] + [spec.max_size for spec in specs[1:]]))
        deep_loop = _deep_loop_seed(specs, {b for ids in device_ir.grid_block_ids for b in ids})
        if deep_loop is not None:
            shapes.append(Config(block_sizes=deep_loop))
        seeds: list[Config] = []
        for seed in shapes:
            if seed not in seeds:
                seeds.append(seed)
        return seeds

    @classmethod
    def get_seed_config(cls, env: Any, device_ir: Any) -> Config | None:
        seeds = cls.get_seed_configs(env, device_ir)
        return seeds[0] if seeds else None


def _deep_loop_seed(specs: list[Any], grid: set[int]) -> list[int] | None:
    """Grid tiles of 64, loop tiles of :data:`SEED_LOOP_TILE`, a grid dimension bounding a
    loop's range whole; None without a loop inside the grid."""
    bounding = {spec.bounded_by_block_id for spec in specs if spec.bounded_by_block_id is not None}
    if all(set(spec.block_ids) <= grid for spec in specs):
        return None
    sizes = []
    for spec in specs:
        if set(spec.block_ids) & bounding:
            sizes.append(spec.max_size)
        elif set(spec.block_ids) <= grid:
            sizes.append(_clamp(spec, 64))
        else:
            sizes.append(_clamp(spec, SEED_LOOP_TILE))
    return sizes


def _clamp(spec: Any, tile: int) -> int:
    """``tile`` within the block size's allowed range."""
    return min(max(tile, spec.min_size, spec.autotuner_min), spec.max_size)


def install() -> None:
    """Register the seeds with Helion for the ``mlir`` backend (idempotent)."""
    planted = HEURISTICS_BY_BACKEND.get(CPUTileSeeds.backend, ())
    if CPUTileSeeds not in planted:
        HEURISTICS_BY_BACKEND[CPUTileSeeds.backend] = (*planted, CPUTileSeeds)
