"""OpenMP workers take tiles one at a time (``schedule(dynamic)``).

With fixed shares a call lasts as long as its slowest worker: a core that the operating
system (or, on a virtual machine, the hypervisor) gives to someone else for a while holds
up the whole call. Taking tiles one at a time costs one atomic increment per tile, and a
tile is at least :data:`~.tile_parallel.MIN_PARALLEL_WORK` / trip-count operations of work.
``convert-scf-to-openmp`` has no option for the schedule, so it is set on the
``omp.wsloop`` ops it creates.
"""

from __future__ import annotations

from torch_mlir import ir

from .ir_walk import ops_where

__all__ = ["schedule_tiles_dynamically"]


def schedule_tiles_dynamically(module: ir.Module) -> int:
    """Every ``omp.wsloop`` gets ``schedule(dynamic)``; returns how many."""
    dynamic = ir.Attribute.parse("#omp<schedulekind dynamic>")
    loops = ops_where(module, lambda op: op.name == "omp.wsloop")
    for loop in loops:
        loop.attributes["schedule_kind"] = dynamic
    return len(loops)
