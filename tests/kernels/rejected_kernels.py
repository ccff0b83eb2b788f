"""Kernels that helion_mlir must refuse to lower, for tests/test_unsupported_nodes.py.

Each kernel binds on CPU (binding only traces the device code); lowering it must raise
``UnsupportedNodeError``. The tests find the offending line by its text, so every
offending expression below is spelled differently from the others.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

CONFIG = helion.Config(block_sizes=[16])


# --------------------------------------------------------------- targets rejected on purpose
@helion.kernel(config=CONFIG)
def uses_inline_asm(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.inline_asm_elementwise("mov.u32 $0, $1;", "=r,r", [x[tile]], dtype=torch.int32, is_pure=True, pack=1)
    return out


@helion.kernel(config=CONFIG)
def uses_inline_triton(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        vals = x[tile]
        out[tile] = hl.inline_triton("{0} * 2", [vals], vals)
    return out


@helion.kernel(config=CONFIG)
def uses_device_print(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        vals = x[tile]
        hl.device_print("vals=", vals)
        out[tile] = vals
    return out


# A side-effecting asm block / Triton snippet whose result is never used: dropping the
# call would silently lose its effect, so it must be rejected like a used one.
@helion.kernel(config=CONFIG)
def uses_impure_inline_asm_for_effect(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        vals = x[tile]
        hl.inline_asm_elementwise("membar.gl; mov.u32 $0, $1;", "=r,r", [vals], dtype=torch.int32, is_pure=False, pack=1)
        out[tile] = vals
    return out


@helion.kernel(config=CONFIG)
def uses_inline_triton_for_effect(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        vals = x[tile]
        hl.inline_triton("tl.debug_barrier()\n{0}", [vals], vals)
        out[tile] = vals
    return out


# Inline assembly in kernels written the way users write them: a fast-exp2 online softmax
# (the asm inside a loop that carries values, between ATen ops) and a bf16 packing store.
@helion.kernel(config=helion.Config(block_sizes=[8, 32, 32]))
def softmax_fast_exp2(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row_max = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        row_sum = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n):
            vals = x[tile_m, tile_n] * 1.4426950408889634
            new_max = torch.maximum(row_max, torch.amax(vals, dim=1))
            shifted = vals - new_max[:, None]
            powers = hl.inline_asm_elementwise("ex2.approx.f32 $0, $1;", "=f,f", [shifted], dtype=torch.float32, is_pure=True, pack=1)
            row_sum = row_sum * torch.exp2(row_max - new_max) + torch.sum(powers, dim=1)
            row_max = new_max
        for tile_n in hl.tile(n):
            vals = x[tile_m, tile_n] * 1.4426950408889634
            out[tile_m, tile_n] = torch.exp2(vals - row_max[:, None]) / row_sum[:, None]
    return out


@helion.kernel(config=helion.Config(block_sizes=[64]))
def pack_bf16x2(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=torch.bfloat16, device=x.device)
    for tile in hl.tile(x.size(0)):
        scaled = x[tile] * 0.5
        packed = hl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [scaled, scaled], dtype=torch.bfloat16, is_pure=True, pack=2)
        out[tile] = packed
    return out


# ------------------------------------------------------- ATen ops torch-mlir cannot lower
@helion.kernel(config=CONFIG)
def uses_erfinv(x: torch.Tensor) -> torch.Tensor:
    """torch-mlir imports aten.erfinv but lowers it to none of linalg, tosa, stablehlo."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.erfinv(x[tile])
    return out


@helion.kernel(config=CONFIG)
def uses_erfinv_then_device_print(x: torch.Tensor) -> torch.Tensor:
    """Two problems: the first in program order (erfinv) is the one to report."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        vals = x[tile].erfinv()
        hl.device_print("erfinv:", vals)
        out[tile] = vals
    return out


@helion.kernel(config=CONFIG)
def uses_sinh(x: torch.Tensor) -> torch.Tensor:
    """aten.sinh lowers to linalg and stablehlo but not to tosa."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.sinh(x[tile])
    return out


@helion.kernel(config=CONFIG)
def uses_atan2_of_itself(x: torch.Tensor) -> torch.Tensor:
    """aten.atan2 fails for tosa only; its repeated operand makes Helion strip one input,
    so the lowering imports a rebuilt twin of the node rather than the node itself."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        vals = x[tile]
        out[tile] = torch.atan2(vals, vals)
    return out


def float_args() -> tuple[torch.Tensor]:
    return (torch.rand(64, generator=torch.Generator().manual_seed(7)) * 0.5,)


def matrix_args() -> tuple[torch.Tensor]:
    return (torch.randn(37, 100, generator=torch.Generator().manual_seed(8)),)


def vector_args() -> tuple[torch.Tensor]:
    return (torch.randn(1000, generator=torch.Generator().manual_seed(9)),)


def int_args() -> tuple[torch.Tensor]:
    return (torch.arange(64, dtype=torch.int32),)
