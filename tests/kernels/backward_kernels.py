"""Backward kernels as Helion's autodiff (``helion.experimental.backward``) writes them, for
tests/test_backward_kernels.py: a softmax's, a layer norm's and a logsumexp's, whose
``sum(-(a * b))`` becomes a reduction folding ``acc - a * b`` once fused and canonicalized;
and a gated state recurrence over chunks of a sequence (as in a gated delta net), whose
scalar reads of the gates come from a tensor with a last dimension of 2."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

ROWS = helion.Config(block_sizes=[8])


@helion.kernel(config=ROWS)
def softmax_backward(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    grad_x = torch.empty_like(x)
    n, _ = grad_x.shape
    for tile in hl.tile(n):
        g = grad_out[tile, :]
        row = x[tile, :]
        e = torch.exp(row - torch.amax(row, [1], True))
        total = torch.sum(e, [1], True)
        probs = e / total
        dot = torch.sum(torch.neg(g * probs), [1], True)
        grad_x[tile, :] = probs * (g + dot)
    return grad_x


def softmax_backward_reference(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    probs = torch.softmax(x, 1)
    return probs * (grad_out - (grad_out * probs).sum(1, keepdim=True))


@helion.kernel(config=ROWS)
def layer_norm_backward(grad_out: torch.Tensor, x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    grad_x = torch.empty_like(x)
    m, n = grad_x.shape
    for tile in hl.tile(m):
        g = grad_out[tile, :]
        centered = x[tile, :] - torch.sum(x[tile, :], [-1], True) / n
        rstd = torch.rsqrt(torch.sum(centered * centered, [-1], True) / n + eps)
        g_hat = g * rstd
        mean_g = torch.sum(torch.neg(g_hat), [1], True) / n
        mean_gc = torch.sum(torch.neg(g_hat * centered), [1], True) / n
        grad_x[tile, :] = g_hat + mean_g + centered * rstd * rstd * mean_gc
    return grad_x


def layer_norm_backward_reference(grad_out: torch.Tensor, x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x = x.clone().requires_grad_(True)
    torch.nn.functional.layer_norm(x, x.shape[-1:], eps=eps).backward(grad_out)
    return x.grad


@helion.kernel(config=ROWS)
def logsumexp_backward(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    grad_x = torch.empty_like(x)
    n, _ = grad_x.shape
    for tile in hl.tile(n):
        row = x[tile, :]
        e = torch.exp(row - torch.amax(row, [-1], True))
        share = grad_out[tile].reshape(-1, 1) / torch.sum(e, [-1], True)
        grad_x[tile, :] = share * e
    return grad_x


def logsumexp_backward_reference(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return grad_out[:, None] * torch.softmax(x, -1)


@helion.kernel(config=helion.Config(block_sizes=[16]))
def gated_state_recurrence(k: torch.Tensor, v: torch.Tensor, gate: torch.Tensor, chunk: int) -> torch.Tensor:
    """The ``[dk, dv]`` state before each chunk: ``state = exp(g_last) * state +
    k_c^T (v_c * exp(g_last - g_c))`` per chunk of ``chunk`` positions, per batch and head."""
    batch, seq, heads, dk = k.shape
    dk = hl.specialize(dk)
    chunk = hl.specialize(chunk)
    dv = v.shape[-1]
    states = torch.empty(batch, (seq + chunk - 1) // chunk, heads, dk, dv, dtype=torch.float32, device=k.device)
    block_v = hl.register_block_size(dv)
    for tile_b, tile_h, tile_v in hl.tile([batch, heads, dv], block_size=[1, 1, block_v]):
        b, h = tile_b.id, tile_h.id
        state = hl.zeros([dk, tile_v], dtype=torch.float32)
        for tile_t in hl.tile(seq, block_size=chunk):
            states[b, tile_t.id, h, :, tile_v] = state
            last = min(tile_t.begin + chunk, seq) - 1
            g_last = gate[b, last, h]
            decay = torch.where(tile_t.index < seq, torch.exp(g_last - gate[b, tile_t, h]), 0.0)
            values = v[b, tile_t, h, tile_v] * decay[:, None]
            state = state * torch.exp(g_last)
            state = hl.dot(k[b, tile_t, h, :].T, values, acc=state)
    return states


def gated_state_recurrence_reference(k: torch.Tensor, v: torch.Tensor, gate: torch.Tensor, chunk: int) -> torch.Tensor:
    batch, seq, heads, dk = k.shape
    states = []
    state = torch.zeros(batch, heads, dk, v.shape[-1])
    for start in range(0, seq, chunk):
        stop = min(start + chunk, seq)
        states.append(state.clone())
        g_last = gate[:, stop - 1, :]  # [batch, heads]
        decay = torch.exp(g_last[:, None, :] - gate[:, start:stop, :])  # [batch, t, heads]
        values = v[:, start:stop] * decay[..., None]
        state = state * torch.exp(g_last)[..., None, None] + torch.einsum("bthk,bthv->bhkv", k[:, start:stop], values)
    return torch.stack(states, 1)
