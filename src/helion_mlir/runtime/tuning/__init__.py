"""Autotuning ``backend="mlir"`` kernels on CPU with Helion's own autotuner.

Helion's search algorithms, effort levels, logs and on-disk cache run unchanged; this
package supplies what a CPU needs from the backend's extension points: candidates
compiled and run in a separate worker process (:mod:`.worker`, :mod:`.worker_process`,
:mod:`.protocol`), so that a candidate whose JIT-compiled code crashes cannot take the
tuning process down; wall-clock timing made for a shared, noisy CPU (:mod:`.timing`); the
default config kept when a user's call of it is faster than one of the search's best
(:mod:`.settle`); and the tuning session that routes Helion's compilations and timings
(:mod:`.session`). The search space, seeds and cache key it uses are
:mod:`helion_mlir.runtime.configs`'; :func:`helion_mlir.runtime.backend.tune.tune` runs it
for the command line.
"""
