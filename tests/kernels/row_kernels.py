"""Row kernels for tests/test_row_statistics.py, written as users write them: a layer norm that
also returns its statistics for the backward pass, an RMS norm over a 3-D activation with
GELU and a scaled residual, a masked softmax with a temperature, and a norm of columns (read
through a transposed tile), each with its torch reference."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def layer_norm_with_stats(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    m, n = x.size()
    out = torch.empty_like(x)
    mean_out = torch.empty([m], dtype=torch.float32, device=x.device)
    rstd_out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        mean = row.mean(dim=-1, keepdim=True)
        centered = row - mean
        rstd = torch.rsqrt((centered * centered).mean(dim=-1, keepdim=True) + eps)
        out[tile_m, :] = (centered * rstd * weight[None, :] + bias[None, :]).to(x.dtype)
        mean_out[tile_m] = mean.squeeze(-1)
        rstd_out[tile_m] = rstd.squeeze(-1)
    return out, mean_out, rstd_out


def layer_norm_with_stats_reference(x, weight, bias, eps):  # noqa: ANN001, ANN201
    xf = x.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + eps)
    out = (xf - mean[:, None]) * rstd[:, None] * weight + bias
    return out.to(x.dtype), mean, rstd


@helion.kernel(static_shapes=True)
def rms_norm_gelu_3d(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, alpha: float) -> torch.Tensor:
    b, s, h = x.size()
    out = torch.empty_like(x)
    for tile_b, tile_s in hl.tile([b, s]):
        row = x[tile_b, tile_s, :].to(torch.float32) + alpha * residual[tile_b, tile_s, :].to(torch.float32)
        normed = row * torch.rsqrt(torch.mean(row * row, dim=-1, keepdim=True) + 1e-6) * weight[None, None, :]
        out[tile_b, tile_s, :] = torch.nn.functional.gelu(normed).to(out.dtype)
    return out


def rms_norm_gelu_3d_reference(x, residual, weight, alpha):  # noqa: ANN001, ANN201
    row = x.float() + alpha * residual.float()
    normed = row * torch.rsqrt(row.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
    return torch.nn.functional.gelu(normed).to(x.dtype)


@helion.kernel(static_shapes=True)
def masked_softmax(x: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        logits = torch.where(mask[tile_m, :], x[tile_m, :] / temperature, float("-inf"))
        peak = torch.amax(logits, dim=-1, keepdim=True)
        num = torch.exp(logits - peak)
        out[tile_m, :] = num / torch.sum(num, dim=-1, keepdim=True)
    return out


def masked_softmax_reference(x, mask, temperature):  # noqa: ANN001, ANN201
    return torch.softmax(torch.where(mask, x / temperature, float("-inf")), dim=-1)


@helion.kernel(static_shapes=True)
def column_norm(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([n, m], dtype=x.dtype, device=x.device)
    for tile_n in hl.tile(n):
        cols = x[:, tile_n].to(torch.float32).T
        out[tile_n, :] = (cols / torch.sqrt(torch.sum(cols * cols, dim=-1, keepdim=True))).to(out.dtype)
    return out


def column_norm_reference(x):  # noqa: ANN001, ANN201
    cols = x.float().T
    return (cols / cols.norm(dim=-1, keepdim=True)).to(x.dtype)


LABEL_SMOOTHING = 0.1


@helion.kernel(static_shapes=True)
def soft_target_loss(
    logits: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor, smooth: bool, temperature: float
) -> torch.Tensor:
    m, n = logits.size()
    loss = torch.empty([m], dtype=torch.float32, device=logits.device)
    for tile_m in hl.tile(m):
        scaled = logits[tile_m, :].to(torch.float32) / temperature
        peak = torch.amax(scaled, dim=-1, keepdim=True)
        log_probs = scaled - peak - torch.log(torch.sum(torch.exp(scaled - peak), dim=-1, keepdim=True))
        if smooth:
            target = (1.0 - LABEL_SMOOTHING) * targets[tile_m, :] + LABEL_SMOOTHING / n
        else:
            target = targets[tile_m, :]
        loss[tile_m] = -torch.sum(target * log_probs * class_weights[None, :], dim=-1)
    return loss


def soft_target_loss_reference(logits, targets, class_weights, smooth, temperature):  # noqa: ANN001, ANN201
    log_probs = torch.log_softmax(logits.float() / temperature, dim=-1)
    target = (1.0 - LABEL_SMOOTHING) * targets + LABEL_SMOOTHING / logits.size(1) if smooth else targets
    return -(target * log_probs * class_weights).sum(-1)
