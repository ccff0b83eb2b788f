"""Row log-softmax in base 2: ``(x * log2(e) - max - log2(sum(exp2(x * log2(e) - max)))) * ln(2)``.

Exercises: ``aten.exp2``/``aten.log2``, ``Tensor.unsqueeze`` (``aten.unsqueeze``, instead of
``[:, None]``), ``aten.neg`` via unary minus, ``torch.full_like`` on a device tensor
(``aten.full``), ``aten.minimum`` to keep the max of rows of all ``-inf`` finite.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def log_softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r in hl.tile(x.size(0)):
        scaled = x[tile_r, :].to(torch.float32) * 1.4426950408889634  # log2(e)
        row_max = torch.amax(scaled, dim=1)
        # A row of -inf would give max = -inf and nan below; cap it at a large finite value.
        row_max = -torch.minimum(-row_max, torch.full_like(row_max, 1e30))
        shifted = scaled - row_max.unsqueeze(1)
        log2_sum = torch.log2(torch.sum(torch.exp2(shifted), dim=1))
        out[tile_r, :] = ((shifted - log2_sum.unsqueeze(1)) * 0.6931471805599453).to(out.dtype)
    return out


KERNEL = log_softmax
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(42)
    x = (4 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x.float(), dim=1).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("log_softmax", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
