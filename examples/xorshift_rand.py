"""Counter-based xorshift32 random numbers on int32 lanes, plus uniform floats in ``[0, 1)``.

Each element seeds its state from its position (``tile.index``) and a seed argument, then runs
``rounds`` xorshift32 steps (``x ^= x << 13; x ^= x >>> 17; x ^= x << 5``). int32 arithmetic
wraps; the logical right shift is an arithmetic shift masked with ``0x7FFF``.
Exercises: int32 ``aten.__lshift__``/``__rshift__``/``bitwise_xor``/``bitwise_and``/``mul``,
``hl.static_range`` (unrolled, no loop node), ``tile_index`` (already int32, the index dtype, so
``.to(torch.int32)`` adds no node), ``operator.or_`` on the int scalar argument, a tuple of an
int32 and a float32 output.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

XORSHIFT_ROUNDS = 4


@helion.kernel(config=helion.Config(block_sizes=[128]))
def xorshift_rand(out_bits: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    uniform = torch.empty(out_bits.size(), dtype=torch.float32, device=out_bits.device)
    for tile in hl.tile(out_bits.size(0)):
        state = tile.index.to(torch.int32) * 1664525 + (seed | 1)
        for _ in hl.static_range(4):  # XORSHIFT_ROUNDS; static_range needs a literal
            state = state ^ (state << 13)
            state = state ^ ((state >> 17) & 0x7FFF)
            state = state ^ (state << 5)
        out_bits[tile] = state
        uniform[tile] = ((state >> 8) & 0xFFFFFF).to(torch.float32) * (1.0 / 16777216.0)
    return out_bits, uniform


KERNEL = xorshift_rand
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": 1024, "ragged": 1000}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    # The kernel writes the bits into its first argument and returns it.
    out_bits = torch.zeros(SHAPES[shape], dtype=dtype or torch.int32)
    return out_bits, 12345


def reference(out_bits: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    index = torch.arange(out_bits.size(0), dtype=torch.int32)
    state = index * 1664525 + (seed | 1)
    for _ in range(XORSHIFT_ROUNDS):
        state = state ^ (state << 13)
        state = state ^ ((state >> 17) & 0x7FFF)
        state = state ^ (state << 5)
    uniform = ((state >> 8) & 0xFFFFFF).to(torch.float32) * (1.0 / 16777216.0)
    return state, uniform


def main() -> None:
    from _common import run_example

    run_example("xorshift_rand", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
