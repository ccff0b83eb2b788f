"""Jagged HSTU-style attention: q, k, v are ``[total, heads, dim]`` with sequence b at rows
``offsets[b]:offsets[b+1]``; scores are ``silu(q k^T * alpha)`` under a causal mask, times v.

Each program takes a tile of sequences and loops over heads (``hl.grid``); query, key and value
blocks are gathered from the flattened tensors with 3-D index tiles
``((starts[:, None] + tile.index[None, :]) * heads + h)[:, :, None] * dim + arange(dim)``, and
the result is scattered back through the same index with a mask that broadcasts over ``dim``.
Exercises: 3-D gathers from 1-D tensors with ``extra_mask``, ``torch.bmm`` / ``torch.baddbmm``
on gathered blocks, a scatter ``store`` whose ``[b, q, 1]`` mask broadcasts to ``[b, q, dim]``,
loop bounds from ``lengths.amax()``, ``hl.arange`` (``prims.iota``), ``F.silu``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[2, 16, 16]))
def jagged_hstu_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offsets: torch.Tensor,
                          alpha: float) -> torch.Tensor:
    heads = hl.specialize(q.size(1))
    dim = hl.specialize(q.size(2))
    batches = offsets.size(0) - 1
    q_flat, k_flat, v_flat = q.view(-1), k.view(-1), v.view(-1)
    out = torch.zeros_like(v)
    out_flat = out.view(-1)
    for tile_b in hl.tile(batches):
        starts = offsets[tile_b]
        lengths = offsets[tile_b.index + 1] - starts
        max_len = lengths.amax()
        cols = hl.arange(dim)
        for h in hl.grid(heads):
            for tile_q in hl.tile(max_len):
                q_rows = (starts[:, None] + tile_q.index[None, :]) * heads + h
                q_idx = q_rows[:, :, None] * dim + cols[None, None, :]
                q_valid = (tile_q.index[None, :] < lengths[:, None])[:, :, None]
                q_blk = hl.load(q_flat, [q_idx], extra_mask=q_valid)
                acc = hl.zeros([tile_b, tile_q, dim], dtype=torch.float32)
                for tile_kv in hl.tile(max_len):
                    kv_rows = (starts[:, None] + tile_kv.index[None, :]) * heads + h
                    kv_idx = kv_rows[:, :, None] * dim + cols[None, None, :]
                    kv_valid = (tile_kv.index[None, :] < lengths[:, None])[:, :, None]
                    k_blk = hl.load(k_flat, [kv_idx], extra_mask=kv_valid)
                    v_blk = hl.load(v_flat, [kv_idx], extra_mask=kv_valid)
                    scores = torch.nn.functional.silu(torch.bmm(q_blk, k_blk.transpose(1, 2)) * alpha)
                    causal = tile_q.index[:, None] >= tile_kv.index[None, :]
                    scores = torch.where(causal[None, :, :], scores, 0.0)
                    acc = torch.baddbmm(acc, scores, v_blk)
                hl.store(out_flat, [q_idx], acc.to(out.dtype), extra_mask=q_valid)
    return out


KERNEL = jagged_hstu_attention
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (sequence lengths, heads, head dim)
SHAPES = {"divisible": ([16, 8, 0, 24], 2, 16), "ragged": ([5, 13, 0, 9, 1], 3, 8)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    lengths, heads, dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(49)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), dim=0)
    total = int(offsets[-1])
    q, k, v = (torch.randn(total, heads, dim, generator=gen).to(dtype or torch.float32) for _ in range(3))
    return q, k, v, offsets, 1.0 / dim


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offsets: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.zeros_like(v)
    bounds = offsets.tolist()
    for s, e in zip(bounds[:-1], bounds[1:]):
        qs, ks, vs = (t[s:e].transpose(0, 1) for t in (q, k, v))
        scores = torch.tril(torch.nn.functional.silu(qs @ ks.transpose(1, 2) * alpha))
        out[s:e] = (scores @ vs).transpose(0, 1)
    return out


def main() -> None:
    from _common import run_example

    run_example("jagged_hstu_attention", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
