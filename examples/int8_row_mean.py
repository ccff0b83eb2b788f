"""Per-row mean of int8-quantized activations, dequantized: ``mean(q, dtype=float32) * scale``.

``torch.mean(..., dtype=torch.float32)`` on an integer tile means "cast, then average"; the
lowering casts first, so every output type computes it (torch-mlir alone fails for linalg
and stablehlo, and divides by a wrong count for tosa when a dimension is dynamic).
Exercises: ``aten.mean.dim`` with ``dtype=``, int8 loads, a per-row scale vector.
"""

from __future__ import annotations

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16]))
def int8_row_mean(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    m, _ = q.size()
    out = torch.empty([m], dtype=torch.float32, device=q.device)
    for tile_m in hl.tile(m):
        out[tile_m] = torch.mean(q[tile_m, :], dim=-1, dtype=torch.float32) * scale[tile_m]
    return out


KERNEL = int8_row_mean
TOLERANCE = dict(rtol=1e-5, atol=1e-5)
SHAPES = {"divisible": (64, 512), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(57)
    q = torch.randint(-128, 128, (rows, cols), generator=gen, dtype=dtype or torch.int8)
    scale = torch.rand(rows, generator=gen) / 64
    return q, scale


def reference(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float().mean(dim=-1) * scale


def main() -> None:
    from _common import run_example

    run_example("int8_row_mean", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
