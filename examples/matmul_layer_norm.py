"""A linear layer with a layer-norm epilogue: ``layer_norm(x @ w) * gamma + beta``, eps ``1e-5``.

Each row tile accumulates the full output row in float32 over K tiles, then normalises it
before the single store, as fused "linear + LayerNorm" kernels do. The output width is
fixed at bind time (``hl.specialize``): the whole row lives in one tile.
Exercises: ``aten.addmm`` accumulation in a ``_for_loop``, ``aten.mean.dim`` twice, the float
literal ``1e-5`` (``1.0e-05`` in the IR), per-column affine parameters.
"""

from __future__ import annotations

import torch

import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def matmul_layer_norm(
    x: torch.Tensor, w: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor
) -> torch.Tensor:
    m, k = x.size()
    n = hl.specialize(w.size(1))
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        mean = torch.mean(acc, dim=-1, keepdim=True)
        centered = acc - mean
        variance = torch.mean(centered * centered, dim=-1, keepdim=True)
        normed = centered * torch.rsqrt(variance + 1e-5)
        out[tile_m, :] = (normed * gamma[:] + beta[:]).to(out.dtype)
    return out


KERNEL = matmul_layer_norm
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (m, k, n)
SHAPES = {"divisible": (64, 128, 96), "ragged": (45, 70, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    m, k, n = SHAPES[shape]
    gen = torch.Generator().manual_seed(52)
    dtype = dtype or torch.float32
    x = torch.randn(m, k, generator=gen).to(dtype)
    w = (torch.randn(k, n, generator=gen) / k**0.5).to(dtype)
    gamma = (1 + 0.1 * torch.randn(n, generator=gen)).to(dtype)
    beta = (0.1 * torch.randn(n, generator=gen)).to(dtype)
    return x, w, gamma, beta


def reference(x: torch.Tensor, w: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    y = x.float() @ w.float()
    return torch.nn.functional.layer_norm(y, (y.shape[-1],), gamma.float(), beta.float(), eps=1e-5).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("matmul_layer_norm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
