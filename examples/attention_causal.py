"""Causal attention on float16 inputs with ``hl.dot`` and a tile-index mask.

Query tile ``tile_m`` only visits key tiles in ``[0, tile_m.end)`` (a loop bound that depends on
the outer tile), and masks ``key > query`` inside the diagonal tiles with
``tile_m.index[:, None] >= tile_n.index[None, :]``. Scores come from
``hl.dot(q, k^T, out_dtype=torch.float32)``; the value product accumulates in float32 with
``hl.dot(p, v, acc=acc)``. Online softmax uses natural ``exp``.
Exercises: ``dot`` with ``out_dtype`` and with ``acc`` on 3-D float16 tiles, ``tile_index``,
``tile_end`` as a ``_for_loop`` end, ``aten.ge``/``aten.where`` masking, ``aten.exp``.
"""

from __future__ import annotations

import math

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[1, 16, 16]))
def attention_causal(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> torch.Tensor:
    heads, seq_len, head_dim = q.size()
    out = torch.empty_like(q)
    for tile_b, tile_m in hl.tile([heads, seq_len]):
        m_i = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        l_i = hl.zeros([tile_b, tile_m], dtype=torch.float32)
        acc = hl.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q_blk = q[tile_b, tile_m, :]
        for tile_n in hl.tile(0, tile_m.end):
            k_t = k[tile_b, tile_n, :].transpose(1, 2)
            scores = hl.dot(q_blk, k_t, out_dtype=torch.float32) * scale
            visible = tile_m.index[:, None] >= tile_n.index[None, :]
            scores = torch.where(visible[None, :, :], scores, float("-inf"))
            m_new = torch.maximum(m_i, torch.amax(scores, dim=-1))
            p = torch.exp(scores - m_new[:, :, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, dim=-1)
            acc = hl.dot(p.to(v.dtype), v[tile_b, tile_n, :], acc=acc * alpha[:, :, None])
            m_i = m_new
        out[tile_b, tile_m, :] = (acc / l_i[:, :, None]).to(out.dtype)
    return out


KERNEL = attention_causal
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (2, 64, 32), "ragged": (3, 45, 32)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    heads, seq_len, head_dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(19)
    dtype = dtype or torch.float16
    q, k, v = (torch.randn(heads, seq_len, head_dim, generator=gen).to(dtype) for _ in range(3))
    return q, k, v, 1.0 / math.sqrt(head_dim)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=True, scale=scale
    )
    return out.to(q.dtype)


def main() -> None:
    from _common import run_example

    run_example("attention_causal", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
