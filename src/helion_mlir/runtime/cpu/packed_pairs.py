"""Packed float4 tensors at the function boundary: one value per byte inside, two outside.

A float4_e2m1fn_x2 tensor is ``tensor<...x2xf4E2M1FN>`` at the function boundary
(docs/abi.md); LLVM stores an ``i4`` in a byte of its own, so :func:`unpack_pairs` gives
each value its byte on the way in and :func:`pack_pairs` puts two back in one on the way
out.
"""

from __future__ import annotations

import torch

__all__ = ["pack_pairs", "unpack_pairs"]


def unpack_pairs(tensor: torch.Tensor) -> torch.Tensor:
    """Packed bytes [..., N] -> [..., N, 2] bytes holding one 4-bit value each, low nibble first."""
    data = tensor.view(torch.uint8)
    return torch.stack((data & 0xF, data >> 4), dim=-1)


def pack_pairs(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[..., N, 2] bytes holding one 4-bit value each -> [..., N] of packed ``dtype``."""
    data = values.view(torch.uint8)
    return ((data[..., 0] & 0xF) | (data[..., 1] << 4)).view(dtype)
