"""Attention backward (non-causal): one program per (head, key tile) computes dK and dV over
all query tiles and adds its share of dQ with ``hl.atomic_add``; inputs include the forward's
log-sum-exp and ``delta = rowsum(dO * O)``.

The batch axis is a tile of size 1, so every operand is a 3-D tile and the matmuls are
``torch.bmm`` / ``torch.baddbmm``.
Exercises: ``atomic_add`` of a 3-D tile with a whole dim, ``aten.bmm`` / ``aten.baddbmm`` with
transposed operands, loop-carried 3-D accumulators, ``hl.specialize`` of the head dim (its
whole-dim loads stay static with ``static_shapes=False``), three outputs.
"""

from __future__ import annotations

import math

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[1, 16, 16]))
def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
                       lse: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    heads, seq, head_dim = q.shape
    head_dim = hl.specialize(head_dim)
    dq = torch.zeros_like(q)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    scale = 1.0 / math.sqrt(head_dim)
    for tile_b, tile_n in hl.tile([heads, seq]):
        k_blk = k[tile_b, tile_n, :]
        v_blk = v[tile_b, tile_n, :]
        dk_acc = hl.zeros([tile_b, tile_n, head_dim], dtype=torch.float32)
        dv_acc = hl.zeros([tile_b, tile_n, head_dim], dtype=torch.float32)
        for tile_m in hl.tile(seq):
            q_blk = q[tile_b, tile_m, :]
            do_blk = do[tile_b, tile_m, :]
            scores = torch.bmm(q_blk, k_blk.transpose(1, 2)) * scale
            p = torch.exp(scores - lse[tile_b, tile_m][:, :, None])
            dv_acc = torch.baddbmm(dv_acc, p.transpose(1, 2), do_blk)
            dp = torch.bmm(do_blk, v_blk.transpose(1, 2))
            ds = p * (dp - delta[tile_b, tile_m][:, :, None]) * scale
            dk_acc = torch.baddbmm(dk_acc, ds.transpose(1, 2), q_blk)
            hl.atomic_add(dq, [tile_b, tile_m, slice(None)], torch.bmm(ds, k_blk))
        dk[tile_b, tile_n, :] = dk_acc
        dv[tile_b, tile_n, :] = dv_acc
    return dq, dk, dv


KERNEL = attention_backward
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (heads, sequence, head dim)
SHAPES = {"divisible": (2, 64, 16), "ragged": (3, 45, 16)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    heads, seq, head_dim = SHAPES[shape]
    gen = torch.Generator().manual_seed(31)
    q, k, v, do = (torch.randn(heads, seq, head_dim, generator=gen) for _ in range(4))
    scores = q @ k.transpose(1, 2) / math.sqrt(head_dim)
    lse = torch.logsumexp(scores, dim=-1)
    delta = (do * (torch.softmax(scores, dim=-1) @ v)).sum(dim=-1)
    return q, k, v, do, lse, delta


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
              lse: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    torch.nn.functional.scaled_dot_product_attention(q, k, v).backward(do)
    return q.grad, k.grad, v.grad


def main() -> None:
    from _common import run_example

    run_example("attention_backward", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
