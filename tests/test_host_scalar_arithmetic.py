"""``//`` and ``%`` of grid indices and host scalars follow Python's integers, whatever the
operands' signs: ``%`` takes the divisor's sign (``arith.remsi`` alone takes the dividend's,
and ``x[(i - shift) % n]`` read row ``-2``, outside the tensor, for ``i = 0``)."""

from __future__ import annotations

from pathlib import Path

import torch
from examples_util import load_example
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st

from helion_mlir import generate_mlir

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "scalar_kernels.py")
ROWS = torch.randn(7, 5)


@settings(max_examples=25, deadline=None)
@given(shift=st.integers(-30, 30))
def test_rolling_rows_by_any_shift_matches_torch_roll(shift: int) -> None:
    torch.testing.assert_close(KERNELS.roll_rows(ROWS, shift), torch.roll(ROWS, shift, dims=0), rtol=0, atol=0)


@settings(max_examples=25, deadline=None)
@given(offset=st.integers(-50, 50), width=st.integers(-9, 9).filter(bool))
def test_floor_division_and_remainder_of_scalars_are_pythons(offset: int, width: int) -> None:
    got = KERNELS.bucket_of_offset(ROWS, offset, width)
    positions = [i + offset for i in range(ROWS.size(0))]
    want = torch.tensor([[p // width, p % width] for p in positions])
    assert torch.equal(got, want), (offset, width, got.tolist())


def test_the_remainder_adds_the_divisor_where_the_signs_differ() -> None:
    text = generate_mlir(KERNELS.roll_rows.bind((ROWS, 2)))
    run_filecheck(text, """
    CHECK: %[[REM:.+]] = arith.remsi
    CHECK: %[[SHIFTED:.+]] = arith.addi %[[REM]]
    CHECK: arith.select %{{.+}}, %[[SHIFTED]], %[[REM]] : index
    """)
