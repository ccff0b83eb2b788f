"""Layer norm with the signature of ``torch.nn.functional.layer_norm``: ``normalized_shape: list[int]``,
optional ``weight`` and ``bias``, ``eps`` at its default.

The example passes a weight and leaves ``bias=None``; Helion specializes on which of the
two are ``None`` (the ``if ... is not None`` tests are decided at bind time) and keeps the
list's ints and ``eps`` symbolic.
Exercises: a list-of-ints argument checked on the host, ``None`` for an optional tensor,
a default float argument, ``torch.mean`` twice over a persistent row, ``rsqrt``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def layer_norm_affine(
    x: torch.Tensor,
    normalized_shape: list[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    rows, cols = x.size()
    assert len(normalized_shape) == 1 and normalized_shape[0] == cols
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :].to(torch.float32)
        centered = row - torch.mean(row, dim=-1, keepdim=True)
        y = centered * torch.rsqrt(torch.mean(centered * centered, dim=-1, keepdim=True) + eps)
        if weight is not None:
            y = y * weight[None, :].to(torch.float32)
        if bias is not None:
            y = y + bias[None, :].to(torch.float32)
        out[tile_r, :] = y.to(out.dtype)
    return out


KERNEL = layer_norm_affine
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 256), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(46)
    x = torch.randn(rows, cols, generator=gen).to(dtype or torch.float32)
    return x, [cols], torch.randn(cols, generator=gen).to(dtype or torch.float32)


def reference(x: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None = None,
              bias: torch.Tensor | None = None, eps: float = 1e-5) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x.float(), normalized_shape, weight, bias, eps).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("layer_norm_affine", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
