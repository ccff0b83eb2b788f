"""Divide a vector by its global max magnitude, in two grid phases separated by ``hl.barrier()``.

Phase 1 reduces each tile to ``max |x|`` and merges it into a one-element buffer with
``hl.atomic_max``; after the grid-wide barrier, phase 2 reads the buffer (``peak[0]``) and scales.
Exercises: two ``RootGraphInfo`` graphs (``phase_index`` 0 and 1), ``atomic_max`` at an int
index, a load with an int index, ``aten.abs``/``amax``/``div``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[64, 64]))
def global_max_normalize(x: torch.Tensor) -> torch.Tensor:
    total = x.size(0)
    peak = torch.zeros([1], dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    for tile in hl.tile(total):
        hl.atomic_max(peak, [0], torch.amax(torch.abs(x[tile].to(torch.float32))))
    hl.barrier()
    for tile in hl.tile(total):
        out[tile] = (x[tile].to(torch.float32) / peak[0]).to(out.dtype)
    return out


KERNEL = global_max_normalize
TOLERANCE = dict(rtol=1e-4, atol=1e-6)
SHAPES = {"divisible": 1024, "ragged": 1000}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(31)
    x = (5 * torch.randn(SHAPES[shape], generator=gen)).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return (x.float() / x.float().abs().max()).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("global_max_normalize", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
