"""An ``hl.constexpr(v)`` is the value ``v``: passed by the caller for a scalar parameter,
or computed by the host code (a flag of a block size that selects a branch per config)."""

from __future__ import annotations

from pathlib import Path

import helion
import helion.language as hl
import pytest
import torch
from examples_util import load_example

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "constexpr_kernels.py")


def test_a_constexpr_argument_is_its_value() -> None:
    x = torch.randn(33, 20)
    for shift in (5.0, -0.5):
        torch.testing.assert_close(KERNELS.shifted_sigmoid(x, hl.constexpr(shift)), torch.sigmoid(x + shift))


@pytest.mark.parametrize("block", [32, 128])
def test_a_host_constexpr_of_the_block_size_selects_the_branch_of_each_config(block: int) -> None:
    x = torch.randn(200)
    bound = KERNELS.small_blocks_add_one.bind((x,))
    out = bound.compile_config(helion.Config(block_sizes=[block]))(x)
    torch.testing.assert_close(out, x + (1 if block < 64 else 2), rtol=0, atol=0)
