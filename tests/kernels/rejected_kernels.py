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


def int_args() -> tuple[torch.Tensor]:
    return (torch.arange(64, dtype=torch.int32),)
