"""Jagged (ragged-batch) sum: rows ``offsets[b]:offsets[b+1]`` of ``values`` summed per segment.

``values`` is ``[total_rows, D]``; ``offsets`` is an int64 ``[B + 1]`` prefix sum of segment
lengths (some segments are empty). There is one program per segment (``hl.grid``); for each
feature tile it loops over ``hl.tile(start, end)``, with ``start``/``end`` loaded from ``offsets``.
Exercises: ``hl.grid`` (scalar program ids), scalar loads with a SymInt index (``seg + 1``),
``_for_loop`` bounds that are loaded 0-d tensors, sums over a masked row tile.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[32, 8]))
def jagged_sum(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    segments = offsets.size(0) - 1
    features = values.size(1)
    out = torch.empty([segments, features], dtype=values.dtype, device=values.device)
    for seg in hl.grid(segments):
        start = offsets[seg]
        end = offsets[seg + 1]
        for tile_d in hl.tile(features):
            acc = hl.zeros([tile_d], dtype=torch.float32)
            for tile_r in hl.tile(start, end):
                acc = acc + values[tile_r, tile_d].to(torch.float32).sum(dim=0)
            out[seg, tile_d] = acc.to(out.dtype)
    return out


KERNEL = jagged_sum
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (segment lengths, features)
SHAPES = {
    "divisible": ([8, 16, 0, 24, 8, 16], 64),
    "ragged": ([5, 0, 13, 1, 22, 7, 9], 50),
}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    lengths, features = SHAPES[shape]
    gen = torch.Generator().manual_seed(20)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), dim=0)
    values = torch.randn(int(offsets[-1]), features, generator=gen).to(dtype or torch.float32)
    return values, offsets


def reference(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    bounds = offsets.tolist()
    rows = [values[a:b].float().sum(dim=0) for a, b in zip(bounds[:-1], bounds[1:])]
    return torch.stack(rows).to(values.dtype)


def main() -> None:
    from _common import run_example

    run_example("jagged_sum", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
