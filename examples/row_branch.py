"""Per-row activation chosen at run time: ``relu`` where ``mode[row] == 0``, ``sigmoid`` otherwise.

One program per row (``hl.grid``) loads the row's int32 ``mode`` and branches on it inside the
column loop; both branches store into the same output tile.
Exercises: ``_if`` with a data-dependent 0-d tensor test, ``IfGraphInfo`` and ``ElseGraphInfo``
bodies that each contain a ``store``, ``aten.eq.Scalar``, ``aten.relu``, ``aten.sigmoid``,
a load indexed by a scalar program id.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[32]))
def row_branch(x: torch.Tensor, mode: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for row in hl.grid(rows):
        row_mode = mode[row]
        for tile_c in hl.tile(cols):
            vals = x[row, tile_c]
            if row_mode == 0:
                out[row, tile_c] = torch.relu(vals)
            else:
                out[row, tile_c] = torch.sigmoid(vals)
    return out


KERNEL = row_branch
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (16, 128), "ragged": (13, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(24)
    x = torch.randn(rows, cols, generator=gen).to(dtype or torch.float32)
    mode = torch.randint(0, 2, (rows,), generator=gen, dtype=torch.int32)
    return x, mode


def reference(x: torch.Tensor, mode: torch.Tensor) -> torch.Tensor:
    return torch.where((mode == 0)[:, None], torch.relu(x), torch.sigmoid(x))


def main() -> None:
    from _common import run_example

    run_example("row_branch", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
