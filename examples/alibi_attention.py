"""Attention with an ALiBi ``score_mod`` made by a factory: the callable closes over a tensor and a float.

``make_alibi(slopes, max_bias)`` returns a score modification that reads the head's slope
from the captured ``slopes`` tensor (``hl.load``) and clamps the bias at the captured
``max_bias``. Helion keys a callable argument by its code and the types of its closure
cells, so one compiled kernel serves every ``slopes`` of the same shape and every
``max_bias``: both are read at each call (the tensor is a host tensor of the emitted
function, the float a scalar argument). ``scale`` defaults to ``None`` (``1/sqrt(d)``).
Exercises: closure cells of a callable argument (a tensor and a float), an optional float
argument left at its default, ``hl.load`` of a closure tensor at ``tile.index``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import helion
import helion.language as hl
import torch


def make_alibi(slopes: torch.Tensor, max_bias: float) -> Callable:
    """The ALiBi bias ``slope[head] * (key - query)``, clamped below at ``-max_bias``."""

    def alibi(score: torch.Tensor, head: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        bias = hl.load(slopes, [head]) * (kv_idx - q_idx).to(torch.float32)
        return score + torch.clamp(bias, min=-max_bias)

    alibi.slopes, alibi.max_bias = slopes, max_bias  # for the torch reference
    return alibi


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def alibi_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod: Callable, scale: float | None = None
) -> torch.Tensor:
    heads, seq_q, head_dim = q.size()
    seq_k = k.size(1)
    head_dim = hl.specialize(head_dim)
    sm_scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.empty_like(q)
    for tile_h, tile_m in hl.tile([heads, seq_q], block_size=[1, None]):
        m_i = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        l_i = hl.zeros([tile_m], dtype=torch.float32)
        acc = hl.zeros([tile_m, head_dim], dtype=torch.float32)
        q_i = q[tile_h.begin, tile_m, :]
        for tile_n in hl.tile(seq_k):
            qk = torch.matmul(q_i, k[tile_h.begin, tile_n, :].T) * sm_scale
            qk = score_mod(qk, tile_h.index, tile_m.index[:, None], tile_n.index[None, :])
            m_ij = torch.maximum(m_i, torch.amax(qk, -1))
            p = torch.exp(qk - m_ij[:, None])
            alpha = torch.exp(m_i - m_ij)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = acc * alpha[:, None] + torch.matmul(p, v[tile_h.begin, tile_n, :])
            m_i = m_ij
        out[tile_h.begin, tile_m, :] = acc / l_i[:, None]
    return out


KERNEL = alibi_attention
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (4, 64, 64, 32), "ragged": (3, 37, 45, 16)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    heads, seq_q, seq_k, head_dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(42)
    q, k, v = (torch.randn(heads, s, head_dim, generator=gen).to(dtype or torch.float32) for s in (seq_q, seq_k, seq_k))
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)])
    return q, k, v, make_alibi(slopes, 4.0)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod: Callable,
              scale: float | None = None) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    distance = (torch.arange(k.size(1))[None, :] - torch.arange(q.size(1))[:, None]).float()
    bias = torch.clamp(score_mod.slopes[:, None, None] * distance, min=-score_mod.max_bias)
    return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(1, 2)) * scale + bias, -1), v)


def main() -> None:
    from _common import run_example

    run_example("alibi_attention", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
