"""The CPU the JIT compiles for: this machine's, or this machine's without some features.

The JIT's code generation follows the CPU it runs on twice: LLVM selects instructions for
the host (a bf16 truncation is one ``vcvtneps2bf16`` with AVX512-BF16, a call of a helper
without it), and the package picks its own code by the CPU's vector features (register
blocks and polynomial scaling for AVX-512 or AVX2, bf16 dot products on AVX512-BF16,
glibc's vector math functions). ``HELION_MLIR_CPU_FEATURES`` (read at each compilation)
names LLVM features to leave out, e.g. ``-avx512bf16`` or ``-avx512bf16,-avx512f``: every
function then carries them as its ``target-features`` and the package's choices follow,
so code for a CPU without them is compiled, and tested, on a CPU that has them (the other
way round would fault). Only removals are accepted.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch

__all__ = ["CPU_FEATURES_VARIABLE", "CpuFeatures", "host_cpu"]

CPU_FEATURES_VARIABLE = "HELION_MLIR_CPU_FEATURES"


@dataclass(frozen=True)
class CpuFeatures:
    """What the JIT may use: torch's name of the CPU's vector capability (``AVX512``,
    ``AVX2``, ``DEFAULT``), AVX512-BF16's dot products, and the LLVM features left out."""

    capability: str
    bf16_dot: bool
    removed: tuple[str, ...] = ()  # LLVM feature names, without the leading '-'


def host_cpu() -> CpuFeatures:
    """This CPU as probed by torch, less the features ``HELION_MLIR_CPU_FEATURES`` removes."""
    return _cpu_without(os.environ.get(CPU_FEATURES_VARIABLE, ""))


@functools.cache
def _cpu_without(spec: str) -> CpuFeatures:
    names = [part.strip() for part in spec.split(",") if part.strip()]
    bad = [name for name in names if not name.startswith("-") or len(name) == 1]
    if bad:
        raise ValueError(f"{CPU_FEATURES_VARIABLE}={spec!r}: write LLVM features to leave out, each with a "
                         f"leading '-' (e.g. '-avx512bf16'); {', '.join(bad)} is not one")
    removed = tuple(sorted({name[1:].lower() for name in names}))
    capability = torch.backends.cpu.get_cpu_capability()
    if capability.startswith("AVX512") and "avx512f" in removed:
        capability = "AVX2"
    if capability.startswith("AVX2") and "avx2" in removed:
        capability = "DEFAULT"
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    bf16_dot = bool(probe and probe()) and capability.startswith("AVX512") and "avx512bf16" not in removed
    return CpuFeatures(capability, bf16_dot, removed)
