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
from the best of them. They are not promoted to the default: ``autotune_effort="none"``
still runs Helion's default config.
"""

from __future__ import annotations

from typing import Any

from helion._compiler.autotuner_heuristics import HEURISTICS_BY_BACKEND
from helion._compiler.autotuner_heuristics.registry import AutotunerHeuristic
from helion.runtime.config import Config

__all__ = ["SEED_TILES", "CPUTileSeeds", "install"]

#: Tile extents of the seeds, one seed each.
SEED_TILES = (32, 64, 128)


class CPUTileSeeds(AutotunerHeuristic):
    """Uniform tiles of :data:`SEED_TILES` (see the module docstring)."""

    name = "mlir_cpu_tiles"
    backend = "mlir"

    @classmethod
    def is_eligible(cls, env: Any, device_ir: Any) -> bool:
        return len(env.config_spec.block_sizes) > 0

    @classmethod
    def get_seed_configs(cls, env: Any, device_ir: Any) -> list[Config] | None:
        seeds: list[Config] = []
        for tile in SEED_TILES:
            sizes = [min(max(tile, spec.min_size, spec.autotuner_min), spec.max_size)
                     for spec in env.config_spec.block_sizes]
            seed = Config(block_sizes=sizes)
            if seed not in seeds:
                seeds.append(seed)
        return seeds

    @classmethod
    def get_seed_config(cls, env: Any, device_ir: Any) -> Config | None:
        seeds = cls.get_seed_configs(env, device_ir)
        return seeds[0] if seeds else None


def install() -> None:
    """Register the seeds with Helion for the ``mlir`` backend (idempotent)."""
    planted = HEURISTICS_BY_BACKEND.get(CPUTileSeeds.backend, ())
    if CPUTileSeeds not in planted:
        HEURISTICS_BY_BACKEND[CPUTileSeeds.backend] = (*planted, CPUTileSeeds)
