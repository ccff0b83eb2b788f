"""Gradient clipping by global norm, as ``torch.nn.utils.clip_grad_norm_`` computes it: the
norm is reduced on the host and read with ``.item()``, the clip coefficient
``min(1, max_norm / (norm + 1e-6))`` is plain Python, and the device code scales by it.

Exercises: a float read from tensor data on the host, Python's ``min`` of it (kept symbolic),
used as a scalar in device code: one compiled kernel serves every norm and ``max_norm``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[64]), ignore_warnings=[helion.exc.TensorOperationInWrapper])
def clip_grad_norm(grads: torch.Tensor, max_norm: float) -> torch.Tensor:
    total_norm = torch.linalg.vector_norm(grads).item()
    scale = min(1.0, max_norm / (total_norm + 1e-6))
    out = torch.empty_like(grads)
    for tile in hl.tile(grads.size(0)):
        out[tile] = grads[tile] * scale
    return out


KERNEL = clip_grad_norm
TOLERANCE = dict(rtol=1e-5, atol=1e-6)
SHAPES = {"divisible": 4096, "ragged": 1000}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    grads = torch.randn(SHAPES[shape], generator=torch.Generator().manual_seed(52))
    return grads.to(dtype or torch.float32), 1.0


def reference(grads: torch.Tensor, max_norm: float) -> torch.Tensor:
    param = torch.nn.Parameter(torch.zeros_like(grads))
    param.grad = grads.clone()
    torch.nn.utils.clip_grad_norm_([param], max_norm)
    return param.grad


def main() -> None:
    from _common import run_example

    run_example("clip_grad_norm", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
