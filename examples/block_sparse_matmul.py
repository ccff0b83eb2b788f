"""Matmul of a block-sparse activation that skips its all-zero blocks: ``if`` on a value
computed from the loaded tile (``a_blk.abs().amax(dim=1).amax(dim=0) > 0``) guards the
``torch.addmm`` that updates the loop-carried accumulator.

Exercises: ``_if`` on a 0-d tensor reduced from a (ragged, zero-padded) tile inside a
``_for_loop``, a branch reassigning the loop-carried accumulator, ``aten.addmm``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

BLOCK_M, BLOCK_K = 16, 16  # the sparsity pattern's block shape (make_args)


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 16]))
def block_sparse_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            a_blk = a[tile_m, tile_k]
            if a_blk.abs().amax(dim=1).amax(dim=0) > 0:
                acc = torch.addmm(acc, a_blk, b[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


KERNEL = block_sparse_matmul
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (m, n, k)
SHAPES = {"divisible": (64, 48, 96), "ragged": (50, 37, 70)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    m, n, k = SHAPES[shape]
    gen = torch.Generator().manual_seed(3)
    keep = torch.rand(-(-m // BLOCK_M), -(-k // BLOCK_K), generator=gen) < 0.5
    mask = keep.repeat_interleave(BLOCK_M, 0)[:m].repeat_interleave(BLOCK_K, 1)[:, :k]
    a = (torch.randn(m, k, generator=gen) * mask).to(dtype or torch.float32)
    return a, torch.randn(k, n, generator=gen).to(dtype or torch.float32)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def main() -> None:
    from _common import run_example

    run_example("block_sparse_matmul", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
