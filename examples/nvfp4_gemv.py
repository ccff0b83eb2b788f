"""NVFP4 W4A16 GEMV: packed e2m1 weights (two per byte), one e4m3 scale per 16 weights.

``out[n] = sum_k dequant(weight)[n, k] * x[k]`` with ``weight`` a float4_e2m1fn_x2 tensor of
shape [N, K / 16, 8] (8 bytes = 16 values per scale group), ``x`` bf16 [K / 16, 16] and
float8_e4m3fn block scales [N, K / 16]; as Helion's NVFP4 decode kernels write it.
Exercises: a float4_e2m1fn_x2 argument (``tensor<...x8x2xf4E2M1FN>``), a scalar byte index
into it, ``hl.float4_e2m1fn_x2_to_float32``, ``hl.static_range``, float8 scales converted to
f32, a row sum.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[4, 16]))
def nvfp4_gemv(weight: torch.Tensor, x: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    rows, groups, _ = weight.shape
    out = torch.empty([rows], dtype=torch.bfloat16, device=x.device)
    for tile_n in hl.tile(rows):
        acc = hl.zeros([tile_n], dtype=torch.float32)
        for tile_g in hl.tile(groups):
            contrib = hl.zeros([tile_n, tile_g], dtype=torch.float32)
            for byte in hl.static_range(8):
                w_lo, w_hi = hl.float4_e2m1fn_x2_to_float32(weight[tile_n, tile_g, byte])
                contrib = contrib + w_lo * x[tile_g, 2 * byte].to(torch.float32)[None, :]
                contrib = contrib + w_hi * x[tile_g, 2 * byte + 1].to(torch.float32)[None, :]
            scale = weight_scale[tile_n, tile_g].to(torch.float32)
            acc = acc + (contrib * scale).sum(-1)
        out[tile_n] = acc.to(torch.bfloat16)
    return out


KERNEL = nvfp4_gemv
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SHAPES = {"divisible": (32, 64), "ragged": (29, 37)}  # (rows, K / 16)
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # the values of the codes 0..7; 8..15 negate


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    rows, groups = SHAPES[shape]
    gen = torch.Generator().manual_seed(7)
    weight = torch.randint(0, 256, (rows, groups, 8), generator=gen, dtype=torch.uint8)
    x = torch.randn(groups, 16, generator=gen).to(dtype or torch.bfloat16)
    scale = (torch.rand(rows, groups, generator=gen) * 2 + 0.1).to(torch.float8_e4m3fn)
    return weight.view(torch.float4_e2m1fn_x2), x, scale


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """[..., B] packed bytes -> [..., 2B] float32 values, the low nibble first."""
    codes = packed.view(torch.uint8).long()
    table = torch.tensor(E2M1 + tuple(-v for v in E2M1))
    return torch.stack([table[codes & 15], table[codes >> 4]], dim=-1).flatten(-2)


def reference(weight: torch.Tensor, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    per_group = (unpack_e2m1(weight) * x.float()[None]).sum(-1)  # [rows, groups]
    return (per_group * scale.float()).sum(-1).to(torch.bfloat16)


def main() -> None:
    from _common import run_example

    run_example("nvfp4_gemv", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
