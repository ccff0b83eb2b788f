"""Row mean with ``static_shapes=False``: one compiled kernel serves every input size.

With dynamic shapes the host sizes are symbols, so the column loop ends at
``_get_symnode('x_size1')`` (not a literal) and the division uses the symbolic column count.
Exercises: ``static_shapes=False``, symbolic ``_for_loop`` bounds, a SymInt divisor,
``aten.sum`` in a loop with a float32 accumulator.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 32]), static_shapes=False)
def row_mean_dynamic(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty([rows], dtype=torch.float32, device=x.device)
    for tile_r in hl.tile(rows):
        acc = hl.zeros([tile_r], dtype=torch.float32)
        for tile_c in hl.tile(cols):
            acc = acc + torch.sum(x[tile_r, tile_c].to(torch.float32), dim=1)
        out[tile_r] = acc / cols
    return out


KERNEL = row_mean_dynamic
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(36)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.float().mean(dim=1)


def main() -> None:
    from _common import run_example

    run_example("row_mean_dynamic", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
