"""NVFP4 W4A16 GEMV with Helion's 16-lane group loads from byte storage.

Same product as ``nvfp4_gemv``, written the way Helion's coalesced decode kernels are: the
weights are uint8 bytes [N, K / 2], ``hl.load_float4_e2m1fn_x16_to_float16`` reads the
8-byte group ``row * (K / 16) + g`` and returns its 16 values as f16 tiles,
``hl.load_bfloat16_x16_to_float16`` reads 16 activations per group; masked lanes read 0.
Exercises: uint8 arguments, both quantized group loads with ``extra_mask``, offsets built
from ``tile.index``, ``hl.static_range`` over the 16 lanes.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[4, 16]))
def nvfp4_gemv_grouped(weight_bytes: torch.Tensor, x: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    rows, row_bytes = weight_bytes.shape
    groups = row_bytes // 8
    out = torch.empty([rows], dtype=torch.bfloat16, device=x.device)
    for tile_n in hl.tile(rows):
        acc = hl.zeros([tile_n], dtype=torch.float32)
        for tile_g in hl.tile(groups):
            offsets = tile_n.index[:, None] * groups + tile_g.index[None, :]
            mask = (tile_n.index[:, None] < rows) & (tile_g.index[None, :] < groups)
            w = hl.load_float4_e2m1fn_x16_to_float16(weight_bytes, offsets, extra_mask=mask)
            xs = hl.load_bfloat16_x16_to_float16(x, tile_g.index, extra_mask=tile_g.index < groups)
            contrib = hl.zeros([tile_n, tile_g], dtype=torch.float32)
            for lane in hl.static_range(16):
                contrib = contrib + w[lane].to(torch.float32) * xs[lane].to(torch.float32)[None, :]
            scale = weight_scale[tile_n, tile_g].to(torch.float32)
            acc = acc + (contrib * scale).sum(-1)
        out[tile_n] = acc.to(torch.bfloat16)
    return out


KERNEL = nvfp4_gemv_grouped
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 64), "ragged": (29, 37)}  # (rows, K / 16)
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # the values of the codes 0..7; 8..15 negate


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, groups = SHAPES[shape]
    gen = torch.Generator().manual_seed(7)
    weight = torch.randint(0, 256, (rows, groups * 8), generator=gen, dtype=torch.uint8)
    x = torch.randn(groups * 16, generator=gen).to(dtype or torch.bfloat16)
    scale = (torch.rand(rows, groups, generator=gen) * 2 + 0.1).to(torch.float8_e4m3fn)
    return weight, x, scale


def reference(weight: torch.Tensor, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    codes = weight.long()
    table = torch.tensor(E2M1 + tuple(-v for v in E2M1))
    values = torch.stack([table[codes & 15], table[codes >> 4]], dim=-1).reshape(weight.shape[0], -1, 16)
    activations = x.to(torch.float16).float().reshape(-1, 16)  # the kernel reads them as f16
    return ((values * activations[None]).sum(-1) * scale.float()).sum(-1).to(torch.bfloat16)


def main() -> None:
    from _common import run_example

    run_example("nvfp4_gemv_grouped", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
