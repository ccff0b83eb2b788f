"""Philox-2x32-10 counter-based RNG: two 32-bit words per counter, computed on int64 lanes.

Counter ``(i, 0)`` for element ``i`` and key ``seed`` go through ten rounds of
``(hi(M * c0) ^ c1 ^ k, lo(M * c0))`` with a Weyl key bump. Values are kept in ``[0, 2**32)``
inside int64 lanes: the 64-bit product wraps, and ``lo``/``hi`` are ``& 0xFFFFFFFF`` of the
product and of the product shifted right by 32, which is exact even after the wrap.
Exercises: rounds unrolled by ``hl.static_range`` (no loop node), int64
``mul``/``__rshift__``/``bitwise_and``/``bitwise_xor``/``add`` chains, ``tile_index``, an int
scalar argument.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

PHILOX_ROUNDS = 10
PHILOX_M = 0xD256D193
PHILOX_W = 0x9E3779B9
MASK32 = 0xFFFFFFFF


@helion.kernel(config=helion.Config(block_sizes=[64]))
def philox(counters: torch.Tensor, seed: int) -> torch.Tensor:
    total = counters.size(0)
    words = torch.empty([total, 2], dtype=torch.int64, device=counters.device)
    for tile in hl.tile(total):
        c0 = counters[tile] & 0xFFFFFFFF
        c1 = hl.zeros([tile], dtype=torch.int64)
        key = hl.full([tile], seed, dtype=torch.int64) & 0xFFFFFFFF
        # Literals, not the module constants: a global number would arrive as a symbol (u*).
        for _ in hl.static_range(10):  # PHILOX_ROUNDS
            prod = c0 * 0xD256D193
            c0 = ((prod >> 32) & 0xFFFFFFFF) ^ c1 ^ key
            c1 = prod & 0xFFFFFFFF
            key = (key + 0x9E3779B9) & 0xFFFFFFFF
        words[tile, 0] = c0
        words[tile, 1] = c1
    return words


KERNEL = philox
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": 512, "ragged": 500}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    counters = torch.arange(SHAPES[shape], dtype=dtype or torch.int64) * 7 + 3
    return counters, 20240601


def reference(counters: torch.Tensor, seed: int) -> torch.Tensor:
    c0 = counters & MASK32
    c1 = torch.zeros_like(c0)
    key = torch.full_like(c0, seed & MASK32)
    for _ in range(PHILOX_ROUNDS):
        prod = c0 * PHILOX_M
        c0 = ((prod >> 32) & MASK32) ^ c1 ^ key
        c1 = prod & MASK32
        key = (key + PHILOX_W) & MASK32
    return torch.stack([c0, c1], dim=1)


def _reference_python(counter: int, seed: int) -> tuple[int, int]:
    """Exact arbitrary-precision Philox, used by ``main`` to check the int64 emulation."""
    c0, c1, key = counter & MASK32, 0, seed & MASK32
    for _ in range(PHILOX_ROUNDS):
        prod = c0 * PHILOX_M
        c0, c1 = ((prod >> 32) & MASK32) ^ c1 ^ key, prod & MASK32
        key = (key + PHILOX_W) & MASK32
    return c0, c1


def main() -> None:
    from _common import run_example

    counters, seed = make_args()
    expected = [_reference_python(c, seed) for c in counters[:4].tolist()]
    assert reference(counters, seed)[:4].tolist() == [list(w) for w in expected]
    run_example("philox", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
