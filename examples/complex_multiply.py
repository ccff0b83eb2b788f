"""Complex multiplication of tensors stored as real pairs (``torch.view_as_real`` layout).

``a`` and ``b`` are ``[m, n, 2]`` float32: element ``[i, j]`` is the complex number
``a[i, j, 0] + 1j * a[i, j, 1]``. The kernel tiles both axes of the complex matrix (so edge tiles
cut the pairs axis short), splits each operand into real and imaginary parts, multiplies and joins
the parts of the product, scaled by a real ``alpha``.
Exercises: ``split`` of two operands and ``join`` on 2-D tiles whose pairs axis is ragged.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 64]))
def complex_multiply(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    m, n, _ = a.size()
    out = torch.empty_like(a)
    for tile_m, tile_n in hl.tile([m, n]):
        a_re, a_im = hl.split(a[tile_m, tile_n, :])
        b_re, b_im = hl.split(b[tile_m, tile_n, :])
        out[tile_m, tile_n, :] = hl.join(alpha * (a_re * b_re - a_im * b_im), alpha * (a_re * b_im + a_im * b_re))
    return out


KERNEL = complex_multiply
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (16, 128), "ragged": (13, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(43)
    m, n = SHAPES[shape]
    a, b = (torch.randn(m, n, 2, generator=gen).to(dtype or torch.float32) for _ in range(2))
    return a, b, 0.5


def reference(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    product = torch.view_as_complex(a.float().contiguous()) * torch.view_as_complex(b.float().contiguous())
    return (alpha * torch.view_as_real(product)).to(a.dtype)


def main() -> None:
    from _common import run_example

    run_example("complex_multiply", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
