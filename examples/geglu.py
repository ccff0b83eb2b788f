"""GEGLU gate on a fused projection: ``gelu(x[:, :H], approximate="tanh") * x[:, H:]``.

Exercises: two loads from the same host tensor, the second at a shifted column index
(``tile.index + hidden``, a tensor index the lowering reads as a moved slice), the
tanh-approximate GELU spelled out with ``aten.pow``/``aten.tanh``
(``F.gelu(approximate="tanh")`` would instead trace to Helion's ``_gelu_tanh_approx`` op),
and a 2-D grid with ragged edges.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def geglu(x: torch.Tensor) -> torch.Tensor:
    tokens, width = x.size()
    hidden = width // 2
    out = torch.empty([tokens, hidden], dtype=x.dtype, device=x.device)
    for tile_t, tile_h in hl.tile([tokens, hidden]):
        a = x[tile_t, tile_h]
        b = x[tile_t, tile_h.index + hidden]
        inner = 0.7978845608028654 * (a + 0.044715 * torch.pow(a, 3))  # sqrt(2 / pi)
        out[tile_t, tile_h] = 0.5 * a * (1.0 + torch.tanh(inner)) * b
    return out


KERNEL = geglu
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 2 * 64), "ragged": (37, 2 * 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(*SHAPES[shape], generator=gen).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.nn.functional.gelu(a, approximate="tanh") * b


def main() -> None:
    from _common import run_example

    run_example("geglu", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
