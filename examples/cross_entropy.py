"""Per-row cross entropy (``reduction="none"``): ``logsumexp(logits[i]) - logits[i, target[i]]``.

The target logit is gathered through a flattened view with a computed tensor index
(``logits_flat[tile.index * vocab + target[tile]]``), the usual way to pick one element per
row (several tensor indices would form a Cartesian product, not a zip).
Exercises: an int64 index tensor load, ``tile_index``, index arithmetic on int tensors,
a load with a tensor index, ``aten.amax``/``exp``/``sum``/``log``, a host-side ``view``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    rows, vocab = logits.size()
    losses = torch.empty([rows], dtype=torch.float32, device=logits.device)
    logits_flat = logits.view(-1)
    for tile_r in hl.tile(rows):
        row = logits[tile_r, :].to(torch.float32)
        row_max = torch.amax(row, dim=-1)
        lse = row_max + torch.log(torch.sum(torch.exp(row - row_max[:, None]), dim=-1))
        picked = logits_flat[tile_r.index * vocab + target[tile_r]].to(torch.float32)
        losses[tile_r] = lse - picked
    return losses


KERNEL = cross_entropy
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, vocab = SHAPES[shape]
    gen = torch.Generator().manual_seed(11)
    logits = (2 * torch.randn(rows, vocab, generator=gen)).to(dtype or torch.float32)
    target = torch.randint(0, vocab, (rows,), generator=gen, dtype=torch.int64)
    return logits, target


def reference(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.float(), target, reduction="none")


def main() -> None:
    from _common import run_example

    run_example("cross_entropy", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
