"""Kernels that walk long rows in column chunks inside a tile of rows, for
tests/test_row_major_chunks.py, written as users write them: an RMS norm whose second pass
stores the scaled chunks with a weight, a cross entropy with an online log-sum-exp and a
picked target logit, and a weighted squared error whose weighting is an option, each with
its torch reference."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def rms_norm_chunked(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        squares = hl.zeros([tile_r], dtype=torch.float32)
        for tile_c in hl.tile(cols):
            chunk = x[tile_r, tile_c].to(torch.float32)
            squares = squares + torch.sum(chunk * chunk, dim=-1)
        inverse = torch.rsqrt(squares / cols + eps)
        for tile_c in hl.tile(cols):
            chunk = x[tile_r, tile_c].to(torch.float32)
            out[tile_r, tile_c] = (chunk * inverse[:, None] * weight[tile_c][None, :]).to(out.dtype)
    return out


def rms_norm_chunked_reference(x, weight, eps):  # noqa: ANN001, ANN201
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps) * weight).to(x.dtype)


@helion.kernel(static_shapes=True)
def cross_entropy_chunked(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    rows, vocab = logits.size()
    losses = torch.empty([rows], dtype=torch.float32, device=logits.device)
    flat = logits.view(-1)
    for tile_r in hl.tile(rows):
        peak = hl.full([tile_r], float("-inf"), dtype=torch.float32)
        total = hl.zeros([tile_r], dtype=torch.float32)
        for tile_v in hl.tile(vocab):
            chunk = logits[tile_r, tile_v].to(torch.float32)
            new_peak = torch.maximum(peak, torch.amax(chunk, dim=-1))
            total = total * torch.exp(peak - new_peak) + torch.sum(torch.exp(chunk - new_peak[:, None]), dim=-1)
            peak = new_peak
        picked = flat[tile_r.index * vocab + target[tile_r]].to(torch.float32)
        losses[tile_r] = peak + torch.log(total) - picked
    return losses


def cross_entropy_chunked_reference(logits, target):  # noqa: ANN001, ANN201
    return torch.nn.functional.cross_entropy(logits.float(), target, reduction="none")


@helion.kernel(static_shapes=True)
def weighted_squared_error(pred: torch.Tensor, truth: torch.Tensor, weight: torch.Tensor, weighted: bool) -> torch.Tensor:
    rows, cols = pred.size()
    loss = torch.empty([rows], dtype=torch.float32, device=pred.device)
    for tile_r in hl.tile(rows):
        acc = hl.zeros([tile_r], dtype=torch.float32)
        for tile_c in hl.tile(cols):
            diff = pred[tile_r, tile_c] - truth[tile_r, tile_c]
            if weighted:
                err = diff * diff * weight[tile_c][None, :]
            else:
                err = diff * diff
            acc = acc + torch.sum(err, dim=-1)
        loss[tile_r] = acc / cols
    return loss


def weighted_squared_error_reference(pred, truth, weight, weighted):  # noqa: ANN001, ANN201
    err = (pred - truth) ** 2
    return (err * weight if weighted else err).mean(-1)
