"""Per-row fp8 quantization: ``scale = amax(|x|) / 448``, ``q = clamp(x / scale)`` as float8_e4m3fn.

The quantized values are compared bit for bit with torch's ``.to(torch.float8_e4m3fn)``
(round to nearest even, subnormals included), the scales exactly.
Exercises: a float8 output tensor, ``convert_element_type`` to float8_e4m3fn (lowered by the
package, not torch-mlir: torch's saturation is explicit in the module), bf16 input,
``amax`` over a whole row, a tuple result.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8]))
def fp8_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = x.size()
    quantized = torch.empty([rows, cols], dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty([rows], dtype=torch.float32, device=x.device)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :].to(torch.float32)
        amax = torch.amax(torch.abs(row), dim=-1).clamp(min=1e-12)
        scale = amax / 448.0
        quantized[tile_r, :] = torch.clamp(row / scale[:, None], -448.0, 448.0).to(torch.float8_e4m3fn)
        scales[tile_r] = scale
    return quantized, scales


KERNEL = fp8_quantize
TOLERANCE = dict(rtol=0, atol=0)
SHAPES = {"divisible": (64, 256), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, cols = SHAPES[shape]
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(rows, cols, generator=gen) * torch.logspace(-3, 3, rows)[:, None]
    return (x.to(dtype or torch.bfloat16),)


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    row = x.float()
    scale = row.abs().amax(-1).clamp(min=1e-12) / 448.0
    return torch.clamp(row / scale[:, None], -448.0, 448.0).to(torch.float8_e4m3fn), scale


def main() -> None:
    from _common import run_example

    run_example("fp8_quantize", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
