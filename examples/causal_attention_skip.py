"""Causal flash attention whose key loop skips the key blocks wholly above the diagonal with
an ``if`` on tile bounds; the taken branch updates the online-softmax state.

Exercises: ``_if`` on ``tile_n.begin < tile_m.end`` inside a ``_for_loop``, the branch
reassigning three loop-carried values (``m_i``, ``l_i``, ``acc``) and passing them through
unchanged when not taken, ``tile_index`` masks, ``torch.matmul`` on 2-D tiles, ``hl.specialize``.
"""

from __future__ import annotations

import math

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def causal_attention_skip(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    heads, seq, head_dim = q.shape
    head_dim = hl.specialize(head_dim)
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(head_dim)
    for h in hl.grid(heads):
        for tile_m in hl.tile(seq):
            m_i = hl.full([tile_m], float("-inf"), dtype=torch.float32)
            l_i = hl.zeros([tile_m], dtype=torch.float32)
            acc = hl.zeros([tile_m, head_dim], dtype=torch.float32)
            q_blk = q[h, tile_m, :]
            for tile_n in hl.tile(seq):
                if tile_n.begin < tile_m.end:
                    scores = torch.matmul(q_blk, k[h, tile_n, :].T) * scale
                    causal = tile_m.index[:, None] >= tile_n.index[None, :]
                    scores = torch.where(causal, scores, float("-inf"))
                    m_new = torch.maximum(m_i, scores.amax(dim=1))
                    p = torch.exp(scores - m_new[:, None])
                    alpha = torch.exp(m_i - m_new)
                    l_i = l_i * alpha + p.sum(dim=1)
                    acc = acc * alpha[:, None] + torch.matmul(p, v[h, tile_n, :])
                    m_i = m_new
            out[h, tile_m, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


KERNEL = causal_attention_skip
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (heads, sequence, head dim)
SHAPES = {"divisible": (2, 64, 32), "ragged": (3, 45, 16)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    heads, seq, head_dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(13)
    return tuple(torch.randn(heads, seq, head_dim, generator=gen).to(dtype or torch.float32) for _ in range(3))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def main() -> None:
    from _common import run_example

    run_example("causal_attention_skip", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
