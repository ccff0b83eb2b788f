"""Row argmax with ``hl.reduce`` over a (value, index) tuple and a custom combine function.

The combine keeps the larger value and, on ties, the smaller index, so the result matches
``torch.argmax`` (first maximal element). Masked lanes get ``(-inf, large index)``.
Exercises: ``_reduce`` with a tuple input (``is_tuple=True``), its combine function as a
``HelperFunctionGraphInfo`` (``aten.gt``/``eq``/``lt``/``bitwise_and``/``bitwise_or``/``where``),
masked lanes via two ``_mask_to`` fills, column indices built from ``tile.index`` broadcast
against an int64 ``hl.zeros`` block, and the same combine reused as plain code to merge tiles.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


def argmax_combine(
    lhs_value: torch.Tensor,
    lhs_index: torch.Tensor,
    rhs_value: torch.Tensor,
    rhs_index: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    take_rhs = (rhs_value > lhs_value) | ((rhs_value == lhs_value) & (rhs_index < lhs_index))
    return torch.where(take_rhs, rhs_value, lhs_value), torch.where(take_rhs, rhs_index, lhs_index)


@helion.kernel(config=helion.Config(block_sizes=[8, 32]))
def argmax_reduce(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty([rows], dtype=torch.int64, device=x.device)
    for tile_r in hl.tile(rows):
        best_value = hl.full([tile_r], float("-inf"), dtype=torch.float32)
        best_index = hl.full([tile_r], cols, dtype=torch.int64)
        for tile_c in hl.tile(cols):
            values = x[tile_r, tile_c]
            indices = tile_c.index[None, :] + hl.zeros([tile_r, tile_c], dtype=torch.int64)
            chunk_value, chunk_index = hl.reduce(
                argmax_combine,
                (values, indices),
                dim=1,
                other=(float("-inf"), cols),
            )
            best_value, best_index = argmax_combine(
                best_value, best_index, chunk_value, chunk_index
            )
        out[tile_r] = best_index
    return out


KERNEL = argmax_reduce
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(23)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.argmax(x, dim=1)


def main() -> None:
    from _common import run_example

    run_example("argmax_reduce", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
