"""Split-K matmul with atomics, the number of splits an ``hl.register_tunable`` of the config.

``split_k = hl.register_tunable("split_k", PowerOfTwoFragment(1, 256))`` takes its value
from the config (``split_k=4``); ``k_block = next_power_of_2(cdiv(k, split_k))`` is then
computed by the host code and used as the K block size. Partial products of the K splits
meet in ``hl.atomic_add`` into a zero-initialised output.
Exercises: a tunable in the config, a runtime block size (``%k_block``) from the host code,
``hl.tile(outer_k.begin, outer_k.end)`` inner loops, ``torch.addmm``, ``hl.atomic_add``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch
from helion.autotuner import PowerOfTwoFragment


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 32], split_k=4))
def split_k_tunable(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.zeros([m, n], dtype=torch.float32, device=x.device)
    split_k = hl.register_tunable("split_k", PowerOfTwoFragment(1, 256))
    k_block = helion.next_power_of_2(helion.cdiv(k, split_k))
    for tile_m, tile_n, outer_k in hl.tile([m, n, k], block_size=[None, None, k_block]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for inner_k in hl.tile(outer_k.begin, outer_k.end):
            acc = torch.addmm(acc, x[tile_m, inner_k], y[inner_k, tile_n])
        hl.atomic_add(out, [tile_m, tile_n], acc)
    return out


KERNEL = split_k_tunable
TOLERANCE = dict(rtol=1e-4, atol=1e-3)
SHAPES = {"divisible": (64, 512, 64), "ragged": (37, 300, 29)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    m, k, n = SHAPES[shape]
    gen = torch.Generator().manual_seed(53)
    return torch.randn(m, k, generator=gen).to(dtype or torch.float32), torch.randn(k, n, generator=gen).to(dtype or torch.float32)


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.float() @ y.float()


def main() -> None:
    from _common import run_example

    run_example("split_k_tunable", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
