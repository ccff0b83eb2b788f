"""Deterministic split-K matmul: a host-computed K block, one partial product per split, ``hl.barrier()``, a reduction.

``block_k = helion.next_power_of_2(helion.cdiv(k, split_k))`` is computed by the host code
and given to ``hl.tile([m, n, k], block_size=[None, None, block_k])``: Helion keeps
``split_k`` (an int argument) symbolic, so the block size is only known per call and is
lowered as a runtime tile size (the loop steps by an ``index`` argument, ``%block_k``).
Phase one writes each split's partial ``[tile_m, tile_n]`` product into its own slice
``tmp[..., tile_k.id]``; after the barrier, phase two sums the splits.
Exercises: a runtime block size from a host expression, ``tile.begin``/``tile.end``/``tile.id``
of that tile, a host tensor with a dimension of an int argument, ``hl.barrier()``,
``torch.addmm`` accumulation, a persistent reduction over a dynamic dimension.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 32, 16, 16]))
def split_k_barrier(a: torch.Tensor, b: torch.Tensor, split_k: int = 4) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    block_k = helion.next_power_of_2(helion.cdiv(k, split_k))
    tmp = torch.zeros((m, n, split_k), device=a.device, dtype=torch.float32)
    out = torch.empty((m, n), device=a.device, dtype=a.dtype)
    for tile_m, tile_n, tile_k_outer in hl.tile([m, n, k], block_size=[None, None, block_k]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k_inner in hl.tile(tile_k_outer.begin, tile_k_outer.end):
            acc = torch.addmm(acc, a[tile_m, tile_k_inner], b[tile_k_inner, tile_n])
        tmp[tile_m, tile_n, tile_k_outer.id] = acc
    hl.barrier()
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = torch.sum(tmp[tile_m, tile_n, :], dim=-1).to(out.dtype)
    return out


KERNEL = split_k_barrier
TOLERANCE = dict(rtol=1e-4, atol=1e-3)
SHAPES = {"divisible": (64, 512, 64), "ragged": (37, 300, 29)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    m, k, n = SHAPES[shape]
    gen = torch.Generator().manual_seed(52)
    return torch.randn(m, k, generator=gen).to(dtype or torch.float32), torch.randn(k, n, generator=gen).to(dtype or torch.float32)


def make_kwargs(shape: str = "divisible") -> dict:
    return {"split_k": 8 if shape == "divisible" else 3}


def reference(a: torch.Tensor, b: torch.Tensor, split_k: int = 4) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


def main() -> None:
    from _common import run_example

    run_example("split_k_barrier", KERNEL, make_args, reference, TOLERANCE, make_kwargs)


if __name__ == "__main__":
    main()
