"""Jagged mean: the rows ``offsets[b]:offsets[b+1]`` of ``values`` averaged per segment, with
empty segments giving zeros.

One program per segment (``hl.grid``); for each feature tile, ``if length > 0`` runs the row
loop and divides, ``else`` makes zeros; the value either branch defines is stored after the
``if``.
Exercises: ``_if`` on a data-dependent 0-d tensor (two loaded offsets), a value defined in
both branches and used after them (one ``scf.if`` result), a ``_for_loop`` with loaded bounds
inside a branch, empty segments.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[32, 16]))
def jagged_mean(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    segments = offsets.size(0) - 1
    features = values.size(1)
    out = torch.empty([segments, features], dtype=values.dtype, device=values.device)
    for seg in hl.grid(segments):
        start = offsets[seg]
        end = offsets[seg + 1]
        length = end - start
        for tile_d in hl.tile(features):
            if length > 0:
                acc = hl.zeros([tile_d], dtype=torch.float32)
                for tile_r in hl.tile(start, end):
                    acc = acc + values[tile_r, tile_d].to(torch.float32).sum(dim=0)
                mean = acc / length.to(torch.float32)
            else:
                mean = hl.zeros([tile_d], dtype=torch.float32)
            out[seg, tile_d] = mean.to(out.dtype)
    return out


KERNEL = jagged_mean
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
# (segment lengths, features)
SHAPES = {"divisible": ([16, 32, 0, 48, 16], 64), "ragged": ([5, 0, 13, 1, 40, 0, 9], 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    lengths, features = SHAPES[shape]
    gen = torch.Generator().manual_seed(11)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), dim=0)
    values = torch.randn(int(offsets[-1]), features, generator=gen).to(dtype or torch.float32)
    return values, offsets


def reference(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    bounds = offsets.tolist()
    rows = [values[a:b].float().mean(dim=0) if b > a else torch.zeros(values.size(1))
            for a, b in zip(bounds[:-1], bounds[1:])]
    return torch.stack(rows).to(values.dtype)


def main() -> None:
    from _common import run_example

    run_example("jagged_mean", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
