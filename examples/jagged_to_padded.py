"""Jagged to padded dense: segment b (rows ``offsets[b]:offsets[b+1]`` of ``values``) becomes
row b of a ``[batch, max_len, features]`` tensor, zero past the segment's end.

``max_len`` is read from the offsets on the host (``int((...).max().item())``), as FBGEMM's
``jagged_to_padded_dense`` users compute it: the output is allocated with it and the tile
loop runs to it, so one compiled kernel serves every ``max_len``.
Exercises: a value read from tensor data on the host (``.item()``) as a dynamic output
dimension and a loop bound, a gather with a 2-D row index and a tile of columns masked by
``extra_mask``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[2, 8, 16]), ignore_warnings=[helion.exc.TensorOperationInWrapper])
def jagged_to_padded(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    batch = offsets.size(0) - 1
    features = values.size(1)
    max_len = int((offsets[1:] - offsets[:-1]).max().item())
    out = torch.zeros([batch, max_len, features], dtype=values.dtype, device=values.device)
    for tile_b, tile_l, tile_f in hl.tile([batch, max_len, features]):
        starts = offsets[tile_b]
        lengths = offsets[tile_b.index + 1] - starts
        rows = starts[:, None] + tile_l.index[None, :]
        valid = tile_l.index[None, :] < lengths[:, None]
        out[tile_b, tile_l, tile_f] = hl.load(values, [rows, tile_f], extra_mask=valid[:, :, None])
    return out


KERNEL = jagged_to_padded
TOLERANCE = dict(rtol=0.0, atol=0.0)
# (segment lengths, features)
SHAPES = {"divisible": ([8, 16, 0, 8], 32), "ragged": ([5, 0, 13, 1, 7], 20)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None, lengths: list[int] | None = None) -> tuple:
    """``lengths`` overrides the shape's segment lengths (same features)."""
    default_lengths, features = SHAPES[shape]
    lengths = default_lengths if lengths is None else lengths
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), dim=0)
    values = torch.randn(int(offsets[-1]), features, generator=torch.Generator().manual_seed(50))
    return values.to(dtype or torch.float32), offsets


def reference(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    bounds = offsets.tolist()
    segments = [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return torch.nn.utils.rnn.pad_sequence(segments, batch_first=True)


def main() -> None:
    from _common import run_example

    run_example("jagged_to_padded", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
