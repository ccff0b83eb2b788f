"""KL-divergence loss as ``torch.nn.functional.kl_div``: a ``log_target`` flag and a ``reduction`` string.

``log_target: bool`` is a runtime flag (Helion keys bools by type, so one kernel serves
both values): the device code branches on it per tile (``scf.if`` on the ``i1`` argument).
``reduction`` is a string Helion specializes on; ``eps`` is a float left at its default.
Exercises: a bool argument as a branch condition, a string option, a default float,
``torch.clamp_min`` and ``torch.log`` in one branch, ``torch.exp`` in the other.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 64]), ignore_warnings=[helion.exc.TensorOperationInWrapper])
def kl_div_loss(
    y_pred: torch.Tensor,
    y_true: torch.Tensor,
    log_target: bool = False,
    reduction: str = "batchmean",
    eps: float = 1e-10,
) -> torch.Tensor:
    rows, vocab = y_pred.size()
    loss = torch.zeros([rows], dtype=torch.float32, device=y_pred.device)
    for tile_r in hl.tile(rows):
        acc = hl.zeros([tile_r], dtype=torch.float32)
        for tile_v in hl.tile(vocab):
            pred = y_pred[tile_r, tile_v]
            true = y_true[tile_r, tile_v]
            if log_target:
                kl = torch.exp(true) * (true - pred)
            else:
                kl = true * (torch.log(torch.clamp_min(true, eps)) - pred)
            acc = acc + torch.sum(kl, -1)
        loss[tile_r] = acc
    if reduction == "batchmean":
        return loss.sum() / rows
    if reduction == "sum":
        return loss.sum()
    return loss


KERNEL = kl_div_loss
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (32, 512), "ragged": (19, 300)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, vocab = SHAPES[shape]
    gen = torch.Generator().manual_seed(45)
    y_pred = torch.log_softmax(torch.randn(rows, vocab, generator=gen), -1).to(dtype or torch.float32)
    y_true = torch.log_softmax(torch.randn(rows, vocab, generator=gen), -1).to(dtype or torch.float32)
    return y_pred, y_true, True


def make_kwargs(shape: str = "divisible") -> dict:
    return {"reduction": "sum"}


def reference(y_pred: torch.Tensor, y_true: torch.Tensor, log_target: bool = False,
              reduction: str = "batchmean", eps: float = 1e-10) -> torch.Tensor:
    per_row = torch.nn.functional.kl_div(y_pred, y_true, reduction="none", log_target=log_target).sum(-1)
    if reduction == "batchmean":
        return per_row.sum() / y_pred.size(0)
    return per_row.sum() if reduction == "sum" else per_row


def main() -> None:
    from _common import run_example

    run_example("kl_div_loss", KERNEL, make_args, reference, TOLERANCE, make_kwargs)


if __name__ == "__main__":
    main()
