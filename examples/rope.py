"""Rotary position embedding (interleaved pairs) with ``hl.split`` / ``hl.join``.

``x`` is ``[seq, dim]``; the pair ``(x[s, 2i], x[s, 2i+1])`` is rotated by angle
``s * base ** (-2i / dim)``. The kernel views ``x`` as ``[seq, dim/2, 2]``, splits the last axis,
rotates and joins it back. Frequencies come from ``hl.arange(dim/2)``, positions from
``tile.index``.
Exercises: ``split`` and ``join``, ``prims.iota`` (``hl.arange``), ``tile_index``, ``aten.pow``
with a float base, ``aten.sin``/``cos``, ``subscript`` broadcasts, 3-D host views.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16]))
def rope(x: torch.Tensor, base: float) -> torch.Tensor:
    seq, dim = x.size()
    half = hl.specialize(dim // 2)
    pairs = x.view(seq, half, 2)
    out = torch.empty_like(x)
    out_pairs = out.view(seq, half, 2)
    for tile_s in hl.tile(seq):
        even, odd = hl.split(pairs[tile_s, :, :])
        freq_index = hl.arange(half).to(torch.float32)
        inv_freq = torch.pow(base, freq_index * (-2.0 / dim))
        angle = tile_s.index.to(torch.float32)[:, None] * inv_freq[None, :]
        cos, sin = torch.cos(angle), torch.sin(angle)
        out_pairs[tile_s, :, :] = hl.join(even * cos - odd * sin, even * sin + odd * cos)
    return out


KERNEL = rope
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 32), "ragged": (45, 32)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(37)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return x, 10000.0


def reference(x: torch.Tensor, base: float) -> torch.Tensor:
    seq, dim = x.shape
    inv_freq = base ** (torch.arange(dim // 2, dtype=torch.float32) * (-2.0 / dim))
    angle = torch.arange(seq, dtype=torch.float32)[:, None] * inv_freq[None, :]
    even, odd = x[:, 0::2], x[:, 1::2]
    out = torch.empty_like(x)
    out[:, 0::2] = even * torch.cos(angle) - odd * torch.sin(angle)
    out[:, 1::2] = even * torch.sin(angle) + odd * torch.cos(angle)
    return out


def main() -> None:
    from _common import run_example

    run_example("rope", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
