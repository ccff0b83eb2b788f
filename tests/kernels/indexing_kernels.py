"""Kernels with tensor indices for tests/test_tensor_indexing.py: gathers and scatters of whole
rows with dynamic shapes, a scatter whose mask broadcasts over the value, and reads at
``tile.index + 3`` (a slice moved by a constant, which may run past the tensor's end)."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

CONFIG = helion.Config(block_sizes=[16])


@helion.kernel(config=CONFIG, static_shapes=False)
def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    out = torch.empty([index.size(0), x.size(1)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(index.size(0)):
        out[tile, :] = x[index[tile], :]
    return out


@helion.kernel(config=CONFIG, static_shapes=False)
def add_rows_at(acc: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(index.size(0)):
        hl.atomic_add(acc, [index[tile], slice(None)], x[tile, :])
    return acc


@helion.kernel(config=CONFIG)
def masked_flat_scatter(x: torch.Tensor, rows: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    n, d = x.shape
    out = torch.zeros_like(x)
    out_flat = out.view(-1)
    for tile in hl.tile(n):
        flat = rows[tile][:, None] * d + hl.arange(d)[None, :]
        hl.store(out_flat, [flat], x[tile, :], extra_mask=keep[tile][:, None])
    return out


@helion.kernel(config=CONFIG, static_shapes=False)
def add_shifted(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[i] = x[i] + x[i + 3]``: the shifted read runs past ``x``'s end when ``out`` is as long as ``x``."""
    for tile in hl.tile(out.size(0)):
        out[tile] = x[tile] + x[tile.index + 3]
    return out


@helion.kernel(config=CONFIG)
def add_shifted_static(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """:func:`add_shifted` with the sizes fixed at compile time."""
    for tile in hl.tile(out.size(0)):
        out[tile] = x[tile] + x[tile.index + 3]
    return out
