"""MoE combine as a gather: each token sums its top-k expert outputs, gathered as whole rows
from the expert-sorted buffer (``expert_out[slot_of[tile_t, :], :]``) and weighted by its gates.

Exercises: a gather whose index is a 2-D tile of a loaded int64 tensor (``[tile, k]``) and
whose value keeps a whole hidden dim (both dynamic with ``static_shapes=False``), a reduction
over the top-k dim, a store of whole rows.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16]))
def moe_topk_combine(expert_out: torch.Tensor, slot_of: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    tokens, _top_k = slot_of.shape
    hidden = expert_out.size(1)
    out = torch.empty([tokens, hidden], dtype=expert_out.dtype, device=expert_out.device)
    for tile_t in hl.tile(tokens):
        rows = expert_out[slot_of[tile_t, :], :]
        out[tile_t, :] = (rows * weights[tile_t, :][:, :, None]).sum(dim=1)
    return out


KERNEL = moe_topk_combine
TOLERANCE = dict(rtol=1e-5, atol=1e-5)
# (tokens, top-k, hidden)
SHAPES = {"divisible": (32, 2, 64), "ragged": (27, 3, 50)}
EXPERTS = 8


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    tokens, top_k, hidden = SHAPES[shape]
    gen = torch.Generator().manual_seed(53)
    experts = torch.randint(0, EXPERTS, (tokens * top_k,), generator=gen)
    order = torch.argsort(experts, stable=True)  # slot -> (token, choice), expert-sorted
    slot_of = torch.empty(tokens * top_k, dtype=torch.int64)
    slot_of[order] = torch.arange(tokens * top_k)
    weights = torch.softmax(torch.randn(tokens, top_k, generator=gen), dim=-1)
    expert_out = torch.randn(tokens * top_k, hidden, generator=gen).to(dtype or torch.float32)
    return expert_out, slot_of.view(tokens, top_k), weights


def reference(expert_out: torch.Tensor, slot_of: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return (expert_out[slot_of] * weights[:, :, None]).sum(dim=1)


def main() -> None:
    from _common import run_example

    run_example("moe_topk_combine", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
