"""Operands of lower rank broadcast as Helion lines them up: by tile, not by position.

In ``for tile_m, tile_n in hl.tile(x.size()): x[tile_m, tile_n] + bias[tile_m]`` Helion reads
``bias[tile_m]`` as a column (``bias[tile_m][:, None]``); torch's trailing alignment read it
as a row (wrong numbers when the two block sizes are equal, a refused node when not). The
unit dims are inserted before torch-mlir broadcasts (``lowering/broadcasting.py``), in
pointwise ops and ``expand``. Compared with torch's formula (Helion's reference mode aligns
by position too, so it is not the oracle here) under configs from Helion's generator, static
and dynamic shapes, ragged and divisible sizes.
"""

from __future__ import annotations

import functools
import logging
import string
from pathlib import Path
from typing import Any, Callable

import helion
import pytest
import torch
from config_fuzz import random_configs
from examples_util import load_example
from filecheck_util import run_filecheck

from helion_mlir import compile_kernel, generate_mlir
from helion_mlir.errors import HelionMLIRError

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "broadcast_kernels.py")
SSA = "[A-Za-z0-9_#]+"


def _inputs(name: str, shape: tuple[int, ...], seed: int) -> tuple[tuple[Any, ...], Callable[..., torch.Tensor]]:
    """Arguments of a kernel for an ``x`` of ``shape``, and torch's formula for its result."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen)
    rows, cols = shape[0], shape[-1]
    return {
        "add_row_bias": ((x, torch.randn(rows, generator=gen)), lambda x, b: x + b[:, None]),
        "scale_and_shift": ((x, torch.randn(rows, generator=gen), torch.randn(cols, generator=gen)),
                            lambda x, r, c: x * c + r[:, None]),
        "add_channel_bias": ((x, torch.randn(shape[1], generator=gen)), lambda x, b: x + b[None, :, None]),
        "scale_rows": ((x, torch.randn(rows, generator=gen)), lambda x, s: x * s[:, None]),
        "floor_rows": ((x, torch.randn(rows, generator=gen)), lambda x, low: torch.maximum(x, low[:, None])),
    }[name]


SHAPES_2D = {"ragged": (37, 45), "divisible": (32, 64), "square": (48, 48)}
SHAPES_3D = {"ragged": (3, 13, 21), "divisible": (4, 16, 32), "square": (4, 16, 16)}
NAMES = ["add_row_bias", "scale_and_shift", "add_channel_bias", "scale_rows", "floor_rows"]


@functools.cache
def kernel(name: str, static: bool) -> helion.Kernel:
    found = getattr(KERNELS, name)
    return found if static else helion.kernel(found.fn, configs=list(found.configs), static_shapes=False)


def _shape(name: str, kind: str) -> tuple[int, ...]:
    return (SHAPES_3D if name == "add_channel_bias" else SHAPES_2D)[kind]


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", NAMES)
def test_lower_rank_operands_line_up_by_tile_under_generated_configs(name: str, static: bool) -> None:
    """The kernel's own config (equal block sizes in the 2-D ones), then Helion's generated configs;
    with dynamic shapes one compiled kernel runs every shape."""
    args, formula = _inputs(name, _shape(name, "square"), 0)
    configs = [None] + random_configs(kernel(name, static).bind(args), seed=len(name) + static, count=2)
    for config in configs:
        for kind in ["square", "ragged", "divisible"] if not static else ["square", "ragged"]:
            args, formula = _inputs(name, _shape(name, kind), 1)
            got = compile_kernel(kernel(name, static).bind(args), config=config, threads=2)(*args)
            torch.testing.assert_close(got, formula(*args), msg=lambda m, c=config, k=kind: f"{k} {c}: {m}")


def test_a_row_operand_gets_a_unit_column_before_the_add() -> None:
    args, _ = _inputs("add_row_bias", (48, 48), 0)
    run_filecheck(generate_mlir(KERNELS.add_row_bias.bind(args)), string.Template("""
        // CHECK-LABEL: func.func @add_row_bias(
        // CHECK:       %[[BIAS:$V]] = tensor.extract_slice %bias[%{{$V}}] [16] [1] : tensor<48xf32> to tensor<16xf32>
        // CHECK:       %[[COLUMN:$V]] = tensor.expand_shape %[[BIAS]] {{\\[\\[}}0, 1]] output_shape [16, 1] : tensor<16xf32> into tensor<16x1xf32>
        // CHECK:       linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, {{.*}}ins(%{{$V}}, %[[COLUMN]] : tensor<16x16xf32>, tensor<16x1xf32>)
        // CHECK:         arith.addf
    """).substitute(V=SSA))


def test_a_dim_several_result_dims_could_take_lines_up_as_torch_does(caplog: pytest.LogCaptureFixture) -> None:
    """``x[tile, :, :] + w`` with two trailing dims of ``w``'s size: torch and reference mode
    take the last, Helion's code generators the first; the lowering takes torch's and says so."""
    x, w = torch.randn(6, 5, 5), torch.randn(5)
    with caplog.at_level(logging.WARNING, logger="helion_mlir.lowering.broadcasting"):
        got = compile_kernel(KERNELS.add_to_last_dim.bind((x, w)))(x, w)
    torch.testing.assert_close(got, x + w)
    assert "could line up with result dims [1, 2]" in caplog.text and "broadcast_kernels.py" in caplog.text


def test_an_operand_whose_tiles_are_out_of_the_results_order_is_refused() -> None:
    a, b = torch.randn(8, 16, 16), torch.randn(16, 8)
    with pytest.raises(HelionMLIRError, match=r"node 'add' \(aten.add.Tensor\) at .*broadcast_kernels.py:\d+: "
                                              r".*puts the tile of size u2 on the result's dim 0"):
        generate_mlir(KERNELS.add_transposed.bind((a, b)))


def test_an_operand_keeps_the_order_of_its_dims() -> None:
    """``b[None, tile_w]``: Helion matches the tile first and sends the unit dim to the last free
    dim, then places the operand's dims in their own order (as torch does here)."""
    a, b = torch.randn(8, 16, 16), torch.randn(16)
    got = compile_kernel(KERNELS.add_row_under_new_axis.bind((a, b)))(a, b)
    torch.testing.assert_close(got, a + b[None, None, :])
