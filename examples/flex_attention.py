"""Flex-attention-style forward: a ``score_mod`` callable argument rewrites the scaled scores.

As in Helion's flex attention, the kernel takes the score modification as a Python callable
and applies it to each ``[tile_m, tile_n]`` block of scores together with the query and key
positions; ``softcap`` (tanh soft-capping) is the example's, ``relative_bias`` a second one.
Helion specializes the kernel on the callable's code, so each ``score_mod`` is its own bound
kernel; the online softmax then runs as in ``attention``.
Exercises: a callable argument traced into the device code, ``tile.index`` positions passed
to it, a float scalar argument, an online softmax over key tiles with ``torch.matmul``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def flex_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod: Callable, scale: float
) -> torch.Tensor:
    heads, seq_q, head_dim = q.size()
    seq_k = k.size(1)
    head_dim = hl.specialize(head_dim)
    out = torch.empty_like(q)
    for tile_h, tile_m in hl.tile([heads, seq_q], block_size=[1, None]):
        m_i = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        l_i = hl.zeros([tile_m], dtype=torch.float32)
        acc = hl.zeros([tile_m, head_dim], dtype=torch.float32)
        q_i = q[tile_h.begin, tile_m, :]
        for tile_n in hl.tile(seq_k):
            qk = torch.matmul(q_i, k[tile_h.begin, tile_n, :].T) * scale
            qk = score_mod(qk, tile_m.index[:, None], tile_n.index[None, :])
            m_ij = torch.maximum(m_i, torch.amax(qk, -1))
            p = torch.exp(qk - m_ij[:, None])
            alpha = torch.exp(m_i - m_ij)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = acc * alpha[:, None] + torch.matmul(p, v[tile_h.begin, tile_n, :])
            m_i = m_ij
        out[tile_h.begin, tile_m, :] = acc / l_i[:, None]
    return out


def softcap(score: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """Gemma-style soft-capping of the scores at 20."""
    return 20.0 * torch.tanh(score / 20.0)


def relative_bias(score: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """A bias linear in the distance between query and key."""
    return score + 0.05 * (q_idx - kv_idx).to(torch.float32)


KERNEL = flex_attention
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (4, 64, 64, 32), "ragged": (3, 37, 45, 16)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    heads, seq_q, seq_k, head_dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(41)
    q, k, v = (torch.randn(heads, s, head_dim, generator=gen).to(dtype or torch.float32) for s in (seq_q, seq_k, seq_k))
    return q, k, v, softcap, 1.0 / math.sqrt(head_dim)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod: Callable, scale: float) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(1, 2)) * scale
    scores = score_mod(scores, torch.arange(q.size(1))[:, None], torch.arange(k.size(1))[None, :])
    return torch.matmul(torch.softmax(scores, -1), v)


def main() -> None:
    from _common import run_example

    run_example("flex_attention", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
