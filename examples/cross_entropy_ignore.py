"""Per-row cross entropy with ``ignore_index``: a row whose label is ignored stores 0, the
others run an online log-sum-exp over vocabulary tiles and subtract the target logit.

One program per row (``hl.grid``). Helion 1.5.1 refuses ``continue``, so "store 0 and skip
the row" is written as ``if``/``else``.
Exercises: ``_if`` on a loaded label compared with a runtime int, a ``store`` in each branch,
an inner ``_for_loop`` inside the else branch carrying the running max and sum, a load at a
data-dependent scalar index (``logits[row, label]``).
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[64]))
def cross_entropy_ignore(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    n, v = logits.shape
    losses = torch.empty([n], dtype=torch.float32, device=logits.device)
    for row in hl.grid(n):
        label = labels[row]
        if label == ignore_index:
            losses[row] = 0.0
        else:
            m_i = hl.full([1], float("-inf"), dtype=torch.float32)
            s_i = hl.zeros([1], dtype=torch.float32)
            for tile_v in hl.tile(v):
                chunk = logits[row, tile_v].to(torch.float32)
                m_new = torch.maximum(m_i, chunk.amax(dim=0, keepdim=True))
                s_i = s_i * torch.exp(m_i - m_new) + torch.exp(chunk - m_new).sum(dim=0, keepdim=True)
                m_i = m_new
            target = logits[row, label].to(torch.float32)
            losses[row] = (m_i + torch.log(s_i) - target).sum()
    return losses


KERNEL = cross_entropy_ignore
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (rows, vocabulary)
SHAPES = {"divisible": (16, 512), "ragged": (13, 1000)}
IGNORE_INDEX = -100


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    n, v = SHAPES[shape]
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(n, v, generator=gen).to(dtype or torch.float32)
    labels = torch.randint(0, v, (n,), generator=gen)
    labels[::3] = IGNORE_INDEX
    return logits, labels, IGNORE_INDEX


def reference(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(
        logits.float(), labels, ignore_index=ignore_index, reduction="none"
    )


def main() -> None:
    from _common import run_example

    run_example("cross_entropy_ignore", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
