"""Attention scores of padded batches with per-sequence lengths: the key loop of a batch tile
runs to its longest length (``lengths[tile_b].amax()``, data-dependent), ``torch.baddbmm``
accumulates ``q k^T`` over head-dim tiles, and keys past a sequence's length are zeroed.

Exercises: ``aten.baddbmm`` on 3-D tiles (batch tile, query tile, key tile) in a loop whose
end is a reduction of loaded lengths, a transposed 3-D operand, a 3-D ``tile_index`` mask.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[2, 16, 16, 16]))
def padded_attention_scores(q: torch.Tensor, k: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    batch, seq, head_dim = q.shape
    out = torch.zeros([batch, seq, seq], dtype=torch.float32, device=q.device)
    for tile_b, tile_q in hl.tile([batch, seq]):
        max_len = lengths[tile_b].amax()
        for tile_k in hl.tile(max_len):
            acc = hl.zeros([tile_b, tile_q, tile_k], dtype=torch.float32)
            for tile_d in hl.tile(head_dim):
                acc = torch.baddbmm(acc, q[tile_b, tile_q, tile_d], k[tile_b, tile_k, tile_d].transpose(1, 2))
            valid = tile_k.index[None, None, :] < lengths[tile_b][:, None, None]
            out[tile_b, tile_q, tile_k] = torch.where(valid, acc, 0.0)
    return out


KERNEL = padded_attention_scores
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (batch, padded sequence, head dim, lengths)
SHAPES = {"divisible": (4, 32, 16, [32, 16, 0, 8]), "ragged": (5, 27, 12, [27, 3, 0, 19, 10])}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    batch, seq, head_dim, lengths = SHAPES[shape]
    gen = torch.Generator().manual_seed(45)
    q, k = (torch.randn(batch, seq, head_dim, generator=gen).to(dtype or torch.float32) for _ in range(2))
    return q, k, torch.tensor(lengths, dtype=torch.int64)


def reference(q: torch.Tensor, k: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    scores = q.float() @ k.float().transpose(1, 2)
    valid = torch.arange(q.size(1))[None, None, :] < lengths[:, None, None]
    return torch.where(valid, scores, 0.0)


def main() -> None:
    from _common import run_example

    run_example("padded_attention_scores", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
