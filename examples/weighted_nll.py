"""Negative log-likelihood over log-probabilities with an optional class-weight tensor and
``ignore_index``: nested ``if weight is not None:`` / ``if label == ignore_index:``.

One program per row (``hl.grid``). The outer condition is known when the kernel is bound
(``weight`` is a tensor here), the inner one is a loaded label compared with a runtime int.
Exercises: a statically known ``if`` around a runtime ``_if``, a value reassigned in both
branches and stored after them, a load at a data-dependent scalar index (``weight[safe]``),
``aten.where`` on 0-d tensors.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[]))
def weighted_nll(logp: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor | None, ignore_index: int) -> torch.Tensor:
    n, _classes = logp.shape
    losses = torch.zeros([n], dtype=torch.float32, device=logp.device)
    for row in hl.grid(n):
        label = labels[row]
        safe = torch.where(label == ignore_index, 0, label)
        loss = -logp[row, safe].to(torch.float32)
        if weight is not None:
            if label == ignore_index:
                loss = loss * 0.0
            else:
                loss = loss * weight[safe]
        losses[row] = loss
    return losses


KERNEL = weighted_nll
TOLERANCE = dict(rtol=1e-5, atol=1e-6)
# (rows, classes)
SHAPES = {"divisible": (32, 10), "ragged": (29, 7)}
IGNORE_INDEX = -1


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    n, classes = SHAPES[shape]
    gen = torch.Generator().manual_seed(9)
    logp = torch.log_softmax(torch.randn(n, classes, generator=gen), dim=1).to(dtype or torch.float32)
    labels = torch.randint(0, classes, (n,), generator=gen)
    labels[1::4] = IGNORE_INDEX
    weight = torch.rand(classes, generator=gen) + 0.5
    return logp, labels, weight, IGNORE_INDEX


def reference(logp: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor, ignore_index: int) -> torch.Tensor:
    return torch.nn.functional.nll_loss(
        logp.float(), labels, weight=weight, ignore_index=ignore_index, reduction="none"
    )


def main() -> None:
    from _common import run_example

    run_example("weighted_nll", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
