"""Variable-length attention over padded batches: sequence b attends to its first
``lengths[b]`` keys (a sequence of length 0 gives zeros).

One program per sequence (``hl.grid``); the key loop ``hl.tile(length)`` ends at the loaded,
data-dependent length, and ``torch.addmm`` accumulates the online-softmax output. The head dim
is not specialized, so with ``static_shapes=False`` the accumulator, the value tiles and the
result share one dynamic dim.
Exercises: a ``_for_loop`` whose end is a loaded 0-d tensor, ``aten.mm`` / ``aten.addmm``
with a dynamic dim shared by the accumulator and an operand, a runtime float scale.
"""

from __future__ import annotations

import math

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
                     sm_scale: float) -> torch.Tensor:
    batch, seq, head_dim = q.shape
    out = torch.zeros_like(q)
    for b in hl.grid(batch):
        length = lengths[b]
        for tile_m in hl.tile(seq):
            m_i = hl.full([tile_m], float("-inf"), dtype=torch.float32)
            l_i = hl.zeros([tile_m], dtype=torch.float32)
            acc = hl.zeros([tile_m, head_dim], dtype=torch.float32)
            q_blk = q[b, tile_m, :]
            for tile_n in hl.tile(length):
                scores = torch.mm(q_blk, k[b, tile_n, :].T) * sm_scale
                m_new = torch.maximum(m_i, scores.amax(dim=1))
                p = torch.exp(scores - m_new[:, None])
                alpha = torch.exp(m_i - m_new)
                l_i = l_i * alpha + p.sum(dim=1)
                acc = torch.addmm(acc * alpha[:, None], p, v[b, tile_n, :])
                m_i = m_new
            out[b, tile_m, :] = torch.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0).to(out.dtype)
    return out


KERNEL = varlen_attention
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (batch, padded sequence, head dim, lengths); Helion pads a non-power-of-two head dim of
# hl.zeros, so the head dim is a power of two.
SHAPES = {"divisible": (3, 32, 16, [32, 16, 0]), "ragged": (4, 27, 16, [27, 5, 0, 13])}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    batch, seq, head_dim, lengths = SHAPES[shape]
    gen = torch.Generator().manual_seed(51)
    q, k, v = (torch.randn(batch, seq, head_dim, generator=gen).to(dtype or torch.float32) for _ in range(3))
    return q, k, v, torch.tensor(lengths, dtype=torch.int64), 1.0 / math.sqrt(head_dim)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, sm_scale: float) -> torch.Tensor:
    out = torch.zeros_like(q)
    for i, n in enumerate(lengths.tolist()):
        if n:
            out[i] = torch.softmax(q[i] @ k[i, :n].T * sm_scale, dim=-1) @ v[i, :n]
    return out


def main() -> None:
    from _common import run_example

    run_example("varlen_attention", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
