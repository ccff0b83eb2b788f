"""Padded dense to jagged: the first ``offsets[b+1] - offsets[b]`` rows of ``padded[b]`` are
packed into rows ``offsets[b]:offsets[b+1]`` of a ``[total, features]`` output.

The output is allocated on the host from ``total = int(offsets[-1].item())``, a value read
from tensor data, and written through a flat index (``row * features + column``) as
Helion's jagged examples write theirs; one compiled kernel serves every total.
Exercises: a value read from tensor data on the host as the dynamic size of an output, a
store at a 3-D tensor index with an ``extra_mask``, int32 offsets, a host view after the loop.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[2, 8, 16]))
def padded_to_jagged(padded: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    batch, max_len, features = padded.shape
    total = int(offsets[-1].item())
    out = torch.empty([total * features], dtype=padded.dtype, device=padded.device)
    for tile_b, tile_l, tile_f in hl.tile([batch, max_len, features]):
        starts = offsets[tile_b]
        lengths = offsets[tile_b.index + 1] - starts
        rows = starts[:, None] + tile_l.index[None, :]
        flat = rows[:, :, None] * features + tile_f.index[None, None, :]
        valid = tile_l.index[None, :] < lengths[:, None]
        hl.store(out, [flat], padded[tile_b, tile_l, tile_f], extra_mask=valid[:, :, None])
    return out.view(total, features)


KERNEL = padded_to_jagged
TOLERANCE = dict(rtol=0.0, atol=0.0)
# (segment lengths, padded length, features)
SHAPES = {"divisible": ([8, 16, 0, 8], 16, 32), "ragged": ([5, 0, 13, 1, 7], 13, 20)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None, lengths: list[int] | None = None) -> tuple:
    """``lengths`` overrides the shape's segment lengths (at most the padded length each)."""
    default_lengths, max_len, features = SHAPES[shape]
    lengths = default_lengths if lengths is None else lengths
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int32), dim=0)
    padded = torch.randn(len(lengths), max_len, features, generator=torch.Generator().manual_seed(51))
    return padded.to(dtype or torch.float32), offsets


def reference(padded: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    lengths = (offsets[1:] - offsets[:-1]).tolist()
    return torch.cat([padded[b, :n] for b, n in enumerate(lengths)], dim=0)


def main() -> None:
    from _common import run_example

    run_example("padded_to_jagged", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
