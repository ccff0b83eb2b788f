"""Functions passed to tests/kernels/fn_arg_kernels.py's kernel that read this file's
module-level values."""

from __future__ import annotations

import torch

OFFSET = 0.75
SCALE = 3


def add_offset(x: torch.Tensor, tile: object) -> torch.Tensor:
    return x + OFFSET


def scale_then_offset(x: torch.Tensor, tile: object) -> torch.Tensor:
    return x * SCALE + OFFSET
