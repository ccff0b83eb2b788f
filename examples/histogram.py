"""Histogram of float values into ``num_bins`` equal-width bins over ``[lo, hi)``.

Bin ids come from float arithmetic, a float->int64 conversion and clamping; counts are
accumulated with ``hl.atomic_add`` at a tensor index (several lanes may hit the same bin).
Exercises: ``atomic_add`` with a data-dependent tensor index and a scalar value, float scalar
arguments (``lo``, ``hi``), an int scalar argument (``num_bins``), ``convert_element_type`` to
int64, ``aten.clamp``, the host ``torch.zeros`` output.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[64]))
def histogram(x: torch.Tensor, lo: float, hi: float, num_bins: int) -> torch.Tensor:
    counts = torch.zeros([num_bins], dtype=torch.int32, device=x.device)
    bin_width = (hi - lo) / num_bins
    for tile in hl.tile(x.size(0)):
        scaled = (x[tile] - lo) / bin_width
        bins = torch.clamp(scaled.to(torch.int64), 0, num_bins - 1)
        hl.atomic_add(counts, [bins], 1)
    return counts


KERNEL = histogram
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": 1024, "ragged": 1000}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(28)
    x = torch.randn(SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return x, -2.0, 2.0, 16


def reference(x: torch.Tensor, lo: float, hi: float, num_bins: int) -> torch.Tensor:
    bins = ((x - lo) / ((hi - lo) / num_bins)).to(torch.int64).clamp(0, num_bins - 1)
    return torch.bincount(bins, minlength=num_bins).to(torch.int32)


def main() -> None:
    from _common import run_example

    run_example("histogram", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
