"""MoE combine as a scatter: each expert-sorted output row, weighted by its gate, is added to
its token's row with ``hl.atomic_add`` at a loaded index tile; with top-k routing every token
receives k rows (duplicate indices).

Exercises: ``atomic_add`` with an int64 tensor index and a tile of columns (element by
element, duplicates accumulate), a float32 accumulator output from ``torch.zeros``; the
result is compared with ``index_add`` (the order of the additions is not defined).
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def moe_scatter_add(expert_out: torch.Tensor, token_of_slot: torch.Tensor, gates: torch.Tensor, tokens: int) -> torch.Tensor:
    slots, hidden = expert_out.shape
    out = torch.zeros([tokens, hidden], dtype=torch.float32, device=expert_out.device)
    for tile_s, tile_h in hl.tile([slots, hidden]):
        contrib = expert_out[tile_s, tile_h].to(torch.float32) * gates[tile_s][:, None]
        hl.atomic_add(out, [token_of_slot[tile_s], tile_h], contrib)
    return out


KERNEL = moe_scatter_add
TOLERANCE = dict(rtol=1e-5, atol=1e-5)
# (tokens, top-k, hidden)
SHAPES = {"divisible": (32, 2, 64), "ragged": (23, 3, 50)}
EXPERTS = 8


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    tokens, top_k, hidden = SHAPES[shape]
    gen = torch.Generator().manual_seed(23)
    experts = torch.randint(0, EXPERTS, (tokens * top_k,), generator=gen)
    token_of_slot = torch.argsort(experts, stable=True) // top_k
    expert_out = torch.randn(tokens * top_k, hidden, generator=gen).to(dtype or torch.float32)
    gates = torch.rand(tokens * top_k, generator=gen)
    return expert_out, token_of_slot, gates, tokens


def reference(expert_out: torch.Tensor, token_of_slot: torch.Tensor, gates: torch.Tensor, tokens: int) -> torch.Tensor:
    out = torch.zeros(tokens, expert_out.size(1))
    return out.index_add_(0, token_of_slot, expert_out.float() * gates[:, None])


def main() -> None:
    from _common import run_example

    run_example("moe_scatter_add", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
