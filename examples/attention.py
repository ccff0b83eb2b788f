"""Flash-style attention ``softmax(q @ k^T * scale) @ v`` with an online softmax over key tiles.

Per ``[batch*head, query tile]`` program: loop over key tiles, keep a running row max ``m_i``,
running denominator ``l_i`` and unnormalised output ``acc``; each step rescales by
``exp2(m_old - m_new)`` (scores are pre-multiplied by ``scale * log2(e)``), then divides at the end.
Exercises: 3-D loads with a full head dimension (``q[tile_b, tile_m, :]``), batched
``torch.bmm`` with a transposed key tile (``aten.permute``), ``aten.exp2``, ``aten.amax``,
``aten.maximum``, three loop-carried values, a float scalar argument, ``subscript`` broadcasts.
"""

from __future__ import annotations

import math

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[1, 16, 16]))
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    heads, seq_q, head_dim = q.size()
    seq_k = k.size(1)
    out = torch.empty_like(q)
    qk_scale = scale * 1.44269504  # log2(e): use exp2 instead of exp
    for tile_b, tile_m in hl.tile([heads, seq_q]):
        m_i = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        l_i = hl.zeros([tile_b, tile_m], dtype=torch.float32)
        acc = hl.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q_blk = q[tile_b, tile_m, :]
        for tile_n in hl.tile(seq_k):
            k_blk = k[tile_b, tile_n, :]
            scores = torch.bmm(q_blk, k_blk.transpose(1, 2)) * qk_scale
            m_new = torch.maximum(m_i, torch.amax(scores, dim=-1))
            p = torch.exp2(scores - m_new[:, :, None])
            alpha = torch.exp2(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = acc * alpha[:, :, None] + torch.bmm(p, v[tile_b, tile_n, :])
            m_i = m_new
        out[tile_b, tile_m, :] = (acc / l_i[:, :, None]).to(out.dtype)
    return out


KERNEL = attention
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (4, 64, 64, 32), "ragged": (3, 37, 45, 32)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    heads, seq_q, seq_k, head_dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(18)
    dtype = dtype or torch.float32
    q = torch.randn(heads, seq_q, head_dim, generator=gen).to(dtype)
    k = torch.randn(heads, seq_k, head_dim, generator=gen).to(dtype)
    v = torch.randn(heads, seq_k, head_dim, generator=gen).to(dtype)
    return q, k, v, 1.0 / math.sqrt(head_dim)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    scores = torch.bmm(q.float(), k.float().transpose(1, 2)) * scale
    return torch.bmm(torch.softmax(scores, dim=-1), v.float()).to(q.dtype)


def main() -> None:
    from _common import run_example

    run_example("attention", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
