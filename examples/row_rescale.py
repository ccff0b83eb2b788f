"""Scale each row by a power of two so that ``max |x| <= 1``; also return the exponents.

A row keeps halving while its peak magnitude exceeds 1, so the trip count depends on the data.
Exercises: ``_while_loop`` whose condition (``aten.gt.Scalar``) reads a 0-d tensor computed in
the loop, three carried values (peak, row block, int32 count), ``aten.abs``/``amax`` on a
full-row block, ``hl.grid`` rows with a scalar store ``exponent[row]``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[]))
def row_rescale(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = x.size()
    out = torch.empty_like(x)
    exponent = torch.empty([rows], dtype=torch.int32, device=x.device)
    for row in hl.grid(rows):
        vals = x[row, :]
        peak = torch.amax(torch.abs(vals))
        count = hl.zeros([], dtype=torch.int32)
        while peak > 1.0:
            vals = vals * 0.5
            peak = peak * 0.5
            count = count + 1
        out[row, :] = vals
        exponent[row] = count
    return out, exponent


KERNEL = row_rescale
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": (16, 64), "ragged": (13, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(27)
    row_scale = 2.0 ** torch.randint(-2, 12, (rows, 1), generator=gen)
    x = (torch.randn(rows, cols, generator=gen) * row_scale).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    exponents = []
    for peak in x.abs().amax(dim=1).tolist():
        count = 0
        while peak > 1.0:
            peak *= 0.5
            count += 1
        exponents.append(count)
    exponent = torch.tensor(exponents, dtype=torch.int32)
    return x * torch.exp2(-exponent.to(x.dtype))[:, None], exponent


def main() -> None:
    from _common import run_example

    run_example("row_rescale", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
