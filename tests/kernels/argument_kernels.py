"""Small kernels for tests/test_kernel_arguments.py: hl.specialize, a tuple of options with a
bool item, a module-level dict item read inside an inner device loop, and a host local
computed from an int argument."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

DECAY = {"gamma": 0.9}


@helion.kernel(config=helion.Config(block_sizes=[8]), static_shapes=False)
def repeat_rows(x: torch.Tensor, repeats: int) -> torch.Tensor:
    """``x * repeats``, summed ``repeats`` times with ``hl.static_range``: both the row width
    and ``repeats`` are ``hl.specialize``-d."""
    rows, cols = x.size()
    cols = hl.specialize(cols)
    repeats = hl.specialize(repeats)
    out = torch.empty_like(x)
    for tile in hl.tile(rows):
        acc = hl.zeros([tile, cols], dtype=torch.float32)
        for _ in hl.static_range(repeats):
            acc = acc + x[tile, :]
        out[tile, :] = acc
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def rms_norm_options(x: torch.Tensor, options: tuple[float, float, bool]) -> torch.Tensor:
    """RMS norm with ``(eps, scale, relu)`` in a tuple: two float items and a bool item that
    the device code branches on."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        row = x[tile, :]
        y = row * torch.rsqrt(torch.mean(row * row, -1, keepdim=True) + options[0]) * options[1]
        if options[2]:
            out[tile, :] = torch.relu(y)
        else:
            out[tile, :] = y
    return out


def rms_norm_options_reference(x: torch.Tensor, options: tuple[float, float, bool]) -> torch.Tensor:
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + options[0]) * options[1]
    return torch.relu(y) if options[2] else y


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def decayed_row_sum(x: torch.Tensor) -> torch.Tensor:
    """Reads ``DECAY["gamma"]`` inside the inner loop: Helion 1.5.1 records no origin for it."""
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for tile_r in hl.tile(x.size(0)):
        acc = hl.zeros([tile_r], dtype=torch.float32)
        for tile_c in hl.tile(x.size(1)):
            acc = DECAY["gamma"] * acc + torch.sum(x[tile_r, tile_c], -1)
        out[tile_r] = acc
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def low_bits(x: torch.Tensor, bits: int) -> torch.Tensor:
    """The low ``bits`` bits of each element, with the mask computed by the host code."""
    mask = (1 << bits) - 1
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] & mask
    return out
