"""SwiGLU gate: ``silu(gate) * up`` on bfloat16 activations, computed in float32.

Exercises: dtype conversions (``prims.convert_element_type``), ``aten.sigmoid``, ``aten.mul``,
a 2-D grid over ``[tokens, hidden]`` with ragged edges.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 64]))
def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(gate)
    for tile_t, tile_h in hl.tile(gate.size()):
        g = gate[tile_t, tile_h].to(torch.float32)
        u = up[tile_t, tile_h].to(torch.float32)
        out[tile_t, tile_h] = (g * torch.sigmoid(g) * u).to(out.dtype)
    return out


KERNEL = swiglu
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(2)
    dtype = dtype or torch.bfloat16
    gate = torch.randn(*SHAPES[shape], generator=gen).to(dtype)
    up = torch.randn(*SHAPES[shape], generator=gen).to(dtype)
    return gate, up


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def main() -> None:
    from _common import run_example

    run_example("swiglu", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
