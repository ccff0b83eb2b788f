"""Next-token loss of a language model: the logits of step ``t`` score the label of step ``t + 1``.

The host code shifts its parameters before the loops, as training code does:
``logits = logits[:, :-1, :]`` and ``labels = labels[:, 1:]``; the device code reads the
views, so the compiled function receives them with their own shapes. Per step:
``logsumexp(logits) - logits[label]``, the target picked by comparing the vocabulary
positions with the label (no gather).
Exercises: parameters rebound to slices in the host code, a 2-D grid over
``[batch, steps]`` with the whole vocabulary per tile, ``hl.arange`` compared with a
loaded int64 label, ``amax``/``exp``/``log``/``sum`` and ``where``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[1, 8]))
def next_token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    logits = logits[:, :-1, :]
    labels = labels[:, 1:]
    batch, steps, vocab = logits.size()
    vocab = hl.specialize(vocab)
    out = torch.empty([batch, steps], dtype=torch.float32, device=logits.device)
    for tile_b, tile_t in hl.tile([batch, steps]):
        x = logits[tile_b, tile_t, :].to(torch.float32)
        target = labels[tile_b, tile_t]
        m = torch.amax(x, dim=-1, keepdim=True)
        lse = torch.log(torch.sum(torch.exp(x - m), dim=-1)) + m.squeeze(-1)
        hit = hl.arange(vocab)[None, None, :] == target[:, :, None]
        picked = torch.sum(torch.where(hit, x, 0.0), dim=-1)
        out[tile_b, tile_t] = lse - picked
    return out


KERNEL = next_token_loss
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# (batch, sequence length, vocabulary)
SHAPES = {"divisible": (2, 17, 64), "ragged": (3, 14, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    batch, length, vocab = SHAPES[shape]
    gen = torch.Generator().manual_seed(73)
    logits = torch.randn(batch, length, vocab, generator=gen).to(dtype or torch.float32)
    labels = torch.randint(0, vocab, (batch, length), generator=gen, dtype=torch.int64)
    return logits, labels


def reference(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    shifted = logits[:, :-1, :].float()
    return torch.nn.functional.cross_entropy(shifted.transpose(1, 2), labels[:, 1:], reduction="none")


def main() -> None:
    from _common import run_example

    run_example("next_token_loss", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
