"""Kernels built from the math functions the fast CPU pipeline turns into vector code."""

from __future__ import annotations

import helion
import helion.language as hl
import torch
import torch.nn.functional as F


def activations(x: torch.Tensor) -> torch.Tensor:
    """The MLP activations: exact and tanh GELU, SiLU, sigmoid, softplus, Mish."""
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        r = x[tile_m, tile_n].to(torch.float32)
        mixed = F.gelu(r) + 0.5 * F.gelu(r, approximate="tanh") + 0.25 * F.silu(r) - torch.sigmoid(r)
        out[tile_m, tile_n] = (mixed + 0.125 * F.softplus(r) + 0.0625 * F.mish(r)).to(out.dtype)
    return out


def activations_reference(x: torch.Tensor) -> torch.Tensor:
    r = x.float()
    mixed = F.gelu(r) + 0.5 * F.gelu(r, approximate="tanh") + 0.25 * F.silu(r) - torch.sigmoid(r)
    return (mixed + 0.125 * F.softplus(r) + 0.0625 * F.mish(r)).to(x.dtype)


def transcendentals(x: torch.Tensor) -> torch.Tensor:
    """Logarithms, trigonometry, erf, tanh and powers of one input, summed."""
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        r = x[tile_m, tile_n].to(torch.float32)
        a = r.abs()
        logs = torch.log1p(a) + torch.log2(a + 1.0) - torch.log(a + 0.5) + torch.expm1(-a)
        trig = torch.sin(r) * torch.cos(0.5 * r) + torch.atan(r) + 0.1 * torch.atan2(r, 1.0 - r)
        rest = torch.erf(r) + torch.tanh(r) + torch.pow(a, 0.75) + torch.rsqrt(a + 1.0)
        out[tile_m, tile_n] = (logs + trig + rest).to(out.dtype)
    return out


KERNELS = {"activations": activations, "transcendentals": transcendentals}
