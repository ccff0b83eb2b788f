"""Rotary embedding of queries as LLaMA checkpoints store them: interleaved pairs, cos/sin tables.

``q`` is ``[batch, heads, seq, head_dim]`` (f32 or bf16); the pair ``(q[..., s, 2i], q[..., s, 2i+1])``
is rotated by the angle whose cosine and sine are ``cos[s, i]`` and ``sin[s, i]`` (tables computed
once per model, ``[seq, head_dim / 2]`` f32). The kernel tiles batch-heads and positions, views the
head dimension as ``[head_dim / 2, 2]``, splits, rotates in f32 and joins back in ``q``'s dtype.
Exercises: ``split``/``join`` on 4-D tiles of a 5-D view, tables broadcast over heads, a cast back to
the input dtype.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[2, 32]))
def rope_tables(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    batch, heads, seq, head_dim = q.size()
    half = hl.specialize(head_dim // 2)
    bh = batch * heads
    pairs = q.view(bh, seq, half, 2)
    out = torch.empty_like(q)
    out_pairs = out.view(bh, seq, half, 2)
    for tile_bh, tile_s in hl.tile([bh, seq]):
        even, odd = hl.split(pairs[tile_bh, tile_s, :, :].to(torch.float32))
        c = cos[tile_s, :][None, :, :]
        s = sin[tile_s, :][None, :, :]
        rotated = hl.join(even * c - odd * s, even * s + odd * c)
        out_pairs[tile_bh, tile_s, :, :] = rotated.to(q.dtype)
    return out


KERNEL = rope_tables
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (2, 4, 64, 64), "ragged": (3, 3, 45, 64)}


def tables(seq: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The cos/sin tables a model precomputes, in float64 then rounded once."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angle = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angle.cos().float(), angle.sin().float()


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(41)
    batch, heads, seq, head_dim = SHAPES[shape]
    q = torch.randn(batch, heads, seq, head_dim, generator=gen).to(dtype or torch.float32)
    return (q, *tables(seq, head_dim))


def reference(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x = q.float()
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out.to(q.dtype)


def main() -> None:
    from _common import run_example

    run_example("rope_tables", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
