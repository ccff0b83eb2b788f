"""Row softmax written as a one-pass kernel but configured with ``reduction_loops``.

The kernel body is the persistent form; ``reduction_loops=[32]`` asks Helion to roll the
reduction dimension into loops of 32 columns. At bind time the rolled loops exist as
``ReductionLoopGraphInfo`` graphs; they become reachable through
``device_ir.build_codegen_graphs(config)``, where the root calls
``_for_loop(graph, [0], [rdim], args)``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[4], reduction_loops=[32]))
def softmax_looped(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_r in hl.tile(x.size(0)):
        row = x[tile_r, :]
        shifted = row - torch.amax(row, dim=-1, keepdim=True)
        num = torch.exp(shifted)
        out[tile_r, :] = num / num.sum(dim=-1, keepdim=True)
    return out


KERNEL = softmax_looped
TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = {"divisible": (16, 256), "ragged": (19, 200)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(6)
    x = (3 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def main() -> None:
    from _common import run_example

    run_example("softmax_looped", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
