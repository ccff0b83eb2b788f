"""Autotuning ``backend="mlir"`` kernels on CPU with Helion's own autotuner.

Helion's search algorithms, effort levels, logs and on-disk cache run unchanged; this
package supplies what a CPU needs from the backend's extension points: candidates
compiled and run in a separate worker process (:mod:`.worker`, :mod:`.worker_process`,
:mod:`.protocol`), so that a candidate whose JIT-compiled code crashes cannot take the
tuning process down; wall-clock timing made for a shared, noisy CPU (:mod:`.timing`); a
search space without the GPU-only knobs (:mod:`.search_space`) and starting points for
CPU tiles (:mod:`.seeds`); a cache key naming the CPU and the thread count
(:mod:`.cache`), which keeps Helion's default config when a user's call of it is faster
than one of the search's best (:mod:`.settle`); the tuning session that routes Helion's compilations
and timings (:mod:`.session`); and :func:`.tune.tune` for the command line.
"""
