"""Row softmax in two passes over column tiles (online normaliser, then normalise).

Pass 1 keeps a running max ``m`` and running denominator ``l`` per row, rescaling ``l`` by
``exp(m_old - m_new)`` whenever the max grows; pass 2 writes ``exp(x - m) / l``.
Exercises: two sequential inner ``hl.tile`` loops in one root graph (two ``_for_loop``
nodes), several loop-carried values, ``aten.maximum``, ``aten.amax``, ``aten.exp``,
``hl.full`` with ``-inf``, ``x[:, None]``-style ``subscript`` broadcasts.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 32, 32]))
def softmax_two_pass(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        m_i = hl.full([tile_r], float("-inf"), dtype=torch.float32)
        l_i = hl.zeros([tile_r], dtype=torch.float32)
        for tile_c in hl.tile(cols):
            vals = x[tile_r, tile_c]
            m_new = torch.maximum(m_i, torch.amax(vals, dim=1))
            l_i = l_i * torch.exp(m_i - m_new) + torch.exp(vals - m_new[:, None]).sum(dim=1)
            m_i = m_new
        for tile_c in hl.tile(cols):
            vals = x[tile_r, tile_c]
            out[tile_r, tile_c] = torch.exp(vals - m_i[:, None]) / l_i[:, None]
    return out


KERNEL = softmax_two_pass
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(7)
    x = (3 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def main() -> None:
    from _common import run_example

    run_example("softmax_two_pass", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
