"""A specialized row length that is not a power of two, used as a width of
``helion.next_power_of_2(n)`` lanes (``lowering/padding.py``): ``x[tile, :]`` is a value of the
padded width whose lanes past the row read 0 and are never stored; a reduction or softmax over
it sees the row alone (rows of negative numbers, where a padding 0 would win a maximum); lanes
of factories are real (a dot over all of them), ``hl.zeros([n])`` as many as Helion pads it to; device ``torch.empty`` is Inductor's zero fill.
Compared with torch under Helion's generated configs, ragged and divisible row counts; a
padded row stored into an output writes that output alone (guard regions around it).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path

import helion
import pytest
import torch
from config_fuzz import random_configs
from examples_util import load_example
from filecheck_util import run_filecheck
from out_of_range_util import GUARD, SENTINEL, guarded

from helion_mlir import compile_kernel, generate_mlir

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "padded_kernels.py")
SSA = "[A-Za-z0-9_#]+"

FORMULAS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "shifted_rows": lambda x: x * 2.0 + 1,
    "row_max_and_softmax": lambda x: (x.amax(-1), torch.softmax(x, dim=-1)),
    "mean_of_ones_added": lambda x: x + 1,  # 64 lanes of 1/64 times ones: every factory lane counts
    "column_sums": lambda x: x.sum(0),
}


def _rows(count: int, width: int, seed: int) -> torch.Tensor:
    """Rows of negative numbers: a padding lane read as 0 would be every row's maximum."""
    gen = torch.Generator().manual_seed(seed)
    return -torch.rand(count, width, generator=gen) - 0.5


@pytest.mark.parametrize("name", list(FORMULAS))
def test_padded_rows_match_torch_under_generated_configs(name: str) -> None:
    kernel = getattr(KERNELS, name)
    bound = kernel.bind((_rows(37, 50, 0),))
    configs = [bound.config_spec.default_config(), *random_configs(bound, seed=len(name), count=2)]
    for config, rows in zip(configs, (37, 64, 37)):
        x = _rows(rows, 50, rows)
        got = compile_kernel(kernel.bind((x,)), config=config, threads=2)(x)
        torch.testing.assert_close(got, FORMULAS[name](x), rtol=1e-4, atol=1e-4,
                                   msg=lambda m, c=config, r=rows: f"{r} rows, {c}: {m}")


def test_a_device_empty_is_a_zero_fill() -> None:
    """``torch.empty(n) * 0.0`` added to a row leaves the row: no undefined lane (NaN) reaches it."""
    x = _rows(37, 50, 1)
    config = helion.Config(block_sizes=[8])
    run_filecheck(generate_mlir(KERNELS.scaled_scratch.bind((x,)), config=config), string.Template("""
CHECK: %[[ZERO:$ssa]] = arith.constant 0.0 : f32
CHECK: %[[SCRATCH:$ssa]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{$ssa}} : tensor<64xf32>) -> tensor<64xf32>
CHECK: linalg.generic {{.*}} ins(%[[SCRATCH]], %{{$ssa}} : tensor<64xf32>, tensor<f32>)
""").substitute(ssa=SSA))
    got = compile_kernel(KERNELS.scaled_scratch.bind((x,)), config=config, threads=2)(x)
    torch.testing.assert_close(got, x, rtol=0, atol=0)


def test_a_padded_row_is_read_into_a_zero_tile_and_masked_before_its_maximum() -> None:
    text = generate_mlir(KERNELS.row_max_and_softmax.bind((_rows(37, 50, 0),)), config=helion.Config(block_sizes=[8]))
    run_filecheck(text, string.Template("""
CHECK: %[[SLICE:$ssa]] = tensor.extract_slice %x[{{.*}}] [%{{$ssa}}, 50] [1, 1] : tensor<37x50xf32> to tensor<?x50xf32>
CHECK: %[[ZEROS:$ssa]] = linalg.fill {{.*}} -> tensor<8x64xf32>
CHECK: tensor.insert_slice %[[SLICE]] into %[[ZEROS]][0, 0] [%{{$ssa}}, 50] [1, 1] : tensor<?x50xf32> into tensor<8x64xf32>
CHECK: %[[LIMIT:$ssa]] = arith.constant 50 : index
CHECK: arith.cmpi slt, %{{$ssa}}, %[[LIMIT]] : index
CHECK: %[[LOWEST:$ssa]] = arith.constant 0xFF800000 : f32
CHECK: arith.select %{{$ssa}}, %{{$ssa}}, %[[LOWEST]] : f32
CHECK: arith.maximumf
""").substitute(ssa=SSA))


def _zeros(x: torch.Tensor, n: int) -> torch.Tensor:
    return torch.zeros(n, dtype=torch.float32, device=x.device)


@pytest.mark.parametrize("pipeline", ["fast", "plain"])
def test_padded_rows_stored_per_block_write_their_output_alone(pipeline: str) -> None:
    """64-lane sums of 56-column rows, one per block of rows, into an output the host code
    sizes by the block size: the compiled function, called on tensors between guard regions
    (the host code allocates the output, so the test calls the function itself), writes the
    56 columns of each block's row and nothing around them, call after call."""
    x = _rows(100, 56, 7)
    bound = KERNELS.block_column_sums.bind((x, _zeros))
    configs = [bound.config_spec.default_config(), *random_configs(bound, seed=56, count=2)]
    for config in configs:
        compiled = compile_kernel(bound, config=config, pipeline=pipeline, threads=2)
        block = config.block_sizes[0]
        expected = torch.stack([x[row:row + block].sum(0) for row in range(0, len(x), block)])
        torch.testing.assert_close(compiled(x, _zeros), expected, msg=lambda m, c=config: f"{c}: {m}")
        (rows, rows_buffer), (out, out_buffer) = guarded(x), guarded(torch.full_like(expected, float("nan")))
        for _ in range(3):
            (result,) = compiled.function(rows, out)
            torch.testing.assert_close(result, expected, msg=lambda m, c=config: f"{c}: {m}")
        for buffer in (rows_buffer, out_buffer):
            assert torch.all(buffer[:GUARD] == SENTINEL) and torch.all(buffer[-GUARD:] == SENTINEL), config
