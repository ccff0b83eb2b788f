"""Per-row k-th smallest value by bisection: a ``while`` loop halves ``[lo, hi]`` a fixed
number of times, and an ``if`` on the count of values at or below the midpoint moves one end
(``hi = mid`` or ``lo = mid``).

One program per row (``hl.grid``); the row is loaded whole.
Exercises: an ``_if`` inside a ``_while_loop`` whose branches only copy a value computed
before it into one of two loop-carried variables (a select of the two, no ``scf.if``), a
condition from a reduction of a comparison (``(vals <= mid).sum() >= k``), ``amin``/``amax``,
an int32 loop counter, int scalar arguments.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[]))
def kth_smallest(x: torch.Tensor, k: int, steps: int) -> torch.Tensor:
    rows, _cols = x.shape
    out = torch.empty([rows], dtype=torch.float32, device=x.device)
    for row in hl.grid(rows):
        vals = x[row, :].to(torch.float32)
        lo = vals.amin()
        hi = vals.amax()
        step = hl.zeros([], dtype=torch.int32)
        while step < steps:
            mid = (lo + hi) * 0.5
            if (vals <= mid).to(torch.int32).sum() >= k:
                hi = mid
            else:
                lo = mid
            step = step + 1
        out[row] = hi
    return out


KERNEL = kth_smallest
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (rows, columns, k); 40 halvings of a range below 10 leave an interval far below atol
SHAPES = {"divisible": (16, 64, 10), "ragged": (13, 37, 5)}
STEPS = 40


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols, k = SHAPES[shape]
    gen = torch.Generator().manual_seed(57)
    return torch.randn(rows, cols, generator=gen).to(dtype or torch.float32), k, STEPS


def reference(x: torch.Tensor, k: int, steps: int) -> torch.Tensor:
    return torch.kthvalue(x.float(), k, dim=1).values


def main() -> None:
    from _common import run_example

    run_example("kth_smallest", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
