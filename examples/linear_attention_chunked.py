"""Chunked causal linear attention with a decaying state, configured by module-level constants.

Per ``batch*head`` (``hl.grid``), the sequence is walked in chunks of ``CHUNK`` positions
(``hl.tile(seq, block_size=CHUNK)``): within a chunk the causal scores ``tril(q k^T)`` apply
directly, across chunks a ``[head_dim, head_dim]`` state carries ``k^T v``, decayed by
``GAMMA`` per chunk; queries are scaled by ``SCALE``. All three are module globals:
``CHUNK`` is the block size of the chunk loop (read when the kernel is emitted, so the
chunk tiles have a static shape), ``SCALE`` and ``GAMMA`` are constants of the module.
Exercises: a module-level int as a block size, module-level floats, a loop-carried
``[d, d]`` state, ``tile.index`` causal masks, three ``torch.matmul``s per chunk.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

CHUNK = 16
SCALE = 0.125
GAMMA = 0.95


@helion.kernel(config=helion.Config(block_sizes=[]))
def linear_attention_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    batch_heads, seq, head_dim = q.size()
    head_dim = hl.specialize(head_dim)
    out = torch.empty_like(q)
    for bh in hl.grid(batch_heads):
        state = hl.zeros([head_dim, head_dim], dtype=torch.float32)
        for tile_t in hl.tile(seq, block_size=CHUNK):
            q_c = q[bh, tile_t, :] * SCALE
            k_c = k[bh, tile_t, :]
            v_c = v[bh, tile_t, :]
            causal = tile_t.index[:, None] >= tile_t.index[None, :]
            scores = torch.where(causal, torch.matmul(q_c, k_c.T), 0.0)
            out[bh, tile_t, :] = torch.matmul(scores, v_c) + torch.matmul(q_c, state)
            state = GAMMA * state + torch.matmul(k_c.T, v_c)
    return out


KERNEL = linear_attention_chunked
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (4, 64, 16), "ragged": (3, 45, 16)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(50)
    return tuple((0.5 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.float32) for _ in range(3))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(q)
    state = torch.zeros(q.size(0), q.size(2), q.size(2))
    for start in range(0, q.size(1), CHUNK):
        chunk = slice(start, start + CHUNK)
        q_c, k_c, v_c = q[:, chunk] * SCALE, k[:, chunk], v[:, chunk]
        out[:, chunk] = torch.tril(q_c @ k_c.transpose(1, 2)) @ v_c + q_c @ state
        state = GAMMA * state + k_c.transpose(1, 2) @ v_c
    return out


def main() -> None:
    from _common import run_example

    run_example("linear_attention_chunked", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
