"""A kernel for tests/test_rolled_reductions.py whose rolled row takes ``hl.split`` halves from
one loop to the next: a complex row's energy (a sum over the row) and the row conjugated and
weighted (or copied) with ``hl.join``, chosen by a bool argument, scaled by a module constant."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

SCALE = 0.5


@helion.kernel(static_shapes=True)
def complex_row_energy(z: torch.Tensor, weights: torch.Tensor, conjugate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    m, n, _ = z.size()
    energy = torch.empty([m], dtype=torch.float32, device=z.device)
    out = torch.empty_like(z)
    for tile_m in hl.tile(m):
        re, im = hl.split(z[tile_m, :, :].to(torch.float32))
        energy[tile_m] = SCALE * (re * re + im * im).sum(-1)
        if conjugate:
            out[tile_m, :, :] = hl.join(re * weights[None, :], -im * weights[None, :]).to(z.dtype)
        else:
            out[tile_m, :, :] = hl.join(re, im).to(z.dtype)
    return energy, out


def complex_row_energy_reference(z: torch.Tensor, weights: torch.Tensor, conjugate: bool) -> tuple[torch.Tensor, ...]:
    x = z.float()
    re, im = x[..., 0], x[..., 1]
    out = torch.stack([re * weights, -im * weights] if conjugate else [re, im], -1).to(z.dtype)
    return SCALE * (re * re + im * im).sum(-1), out
