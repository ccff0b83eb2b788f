"""RMS norm whose epsilon is a module-level constant, ``EPS = 1e-6``.

``EPS`` is read by the kernel from its module: Helion gives it a symbol whose origin is
``_source_module.EPS``, helion_mlir writes its value as a constant when it emits the
kernel (``1.0e-06``), and a compiled kernel checks at each call that ``EPS`` still has it.
The row is kept whole (persistent reduction); the weight is applied in float32.
Exercises: a module-level float in device code, ``torch.mean`` of a square, ``rsqrt``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

EPS = 1e-6


@helion.kernel(config=helion.Config(block_sizes=[16]))
def rms_norm_module_eps(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :].to(torch.float32)
        inv_rms = torch.rsqrt(torch.mean(row * row, dim=-1, keepdim=True) + EPS)
        out[tile_r, :] = (row * inv_rms * weight[None, :].to(torch.float32)).to(out.dtype)
    return out


KERNEL = rms_norm_module_eps
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 256), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(56)
    dtype = dtype or torch.float32
    return torch.randn(rows, cols, generator=gen).to(dtype), torch.randn(cols, generator=gen).to(dtype)


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    row = x.float()
    return (row * torch.rsqrt(row.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("rms_norm_module_eps", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
