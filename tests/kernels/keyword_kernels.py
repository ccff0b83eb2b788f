"""Kernels calling ATen ops with keyword-only arguments (``*`` in their schemas)."""

from __future__ import annotations

import helion
import helion.language as hl
import torch
import torch.nn.functional as F


@helion.kernel(config=helion.Config(block_sizes=[8]))
def gelu_both_forms(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        r = x[tile, :]
        out[tile, :] = F.gelu(r, approximate="tanh") - 0.5 * F.gelu(r, approximate="none")
    return out


def gelu_both_forms_reference(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh") - 0.5 * F.gelu(x, approximate="none")


@helion.kernel(config=helion.Config(block_sizes=[8]))
def keyword_only_arguments(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        r = x[tile, :]
        a = torch.add(r, r * r, alpha=0.5)
        b = torch.addcmul(a, r, r, value=0.25)
        c = torch.addcdiv(b, r, r.abs() + 1.0, value=2.0)
        d = torch.div(r, 0.3, rounding_mode="floor") + torch.div(r, 0.7, rounding_mode="trunc")
        e = torch.round(r, decimals=1)
        f = torch.var(c, dim=1, correction=0, keepdim=True) + torch.std(c, dim=1, correction=1, keepdim=True)
        g = torch.mean(r, dim=1, keepdim=True, dtype=torch.float32)
        out[tile, :] = c + d + e + f + g
    return out


def keyword_only_arguments_reference(x: torch.Tensor) -> torch.Tensor:
    c = torch.addcdiv(torch.addcmul(torch.add(x, x * x, alpha=0.5), x, x, value=0.25), x, x.abs() + 1.0, value=2.0)
    d = torch.div(x, 0.3, rounding_mode="floor") + torch.div(x, 0.7, rounding_mode="trunc")
    f = torch.var(c, dim=1, correction=0, keepdim=True) + torch.std(c, dim=1, correction=1, keepdim=True)
    return c + d + torch.round(x, decimals=1) + f + torch.mean(x, dim=1, keepdim=True, dtype=torch.float32)


@helion.kernel(config=helion.Config(block_sizes=[8]))
def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = F.gelu(x[tile, :], approximate="tanh")
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile, :] = F.gelu(x[tile, :])
    return out
