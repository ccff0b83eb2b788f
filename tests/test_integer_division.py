"""Integer division and remainder by zero (and ``INT_MIN // -1``) give docs/abi.md's defined
values instead of SIGFPE, in every output type and pipeline, in checked mode and through
IREE; so does a division in the padding lanes of a ragged tile (36 elements in tiles of 16),
which the plain pipeline trapped on even when no divisor was zero. Checked mode raises
``DivisionByZeroError`` naming the line for a zero divisor of a device scalar and of a lane
the kernel computes, never for a padding lane.

The kernels run in a child process (tests/division_util.py): a division that traps kills
it, and the tests then fail saying so, instead of pytest dying.
"""

from __future__ import annotations

import json
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from division_util import DTYPES, KERNELS, KERNELS_FILE, RUNS, SETTINGS, arguments
from filecheck_util import run_filecheck

from helion_mlir import generate_mlir
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.rewrites.tensor.integer_division import (
    guard_integer_divisions,
)
from helion_mlir.runtime.iree.engine import iree_available
from helion_mlir.verify import parse_module

pytestmark = pytest.mark.xdist_group("integer-division")
UTIL = Path(__file__).resolve().parent / "division_util.py"


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, str], dict[str, Any]]:
    settings = [s for s in SETTINGS if s != "iree" or iree_available()]
    done = subprocess.run([sys.executable, str(UTIL), ",".join(settings)], capture_output=True, text=True,
                          timeout=600)
    found = {}
    for line in done.stdout.splitlines():
        outcome = json.loads(line)
        found[(outcome.pop("setting"), outcome.pop("dtype"))] = outcome
    died = f"the child process ended with status {done.returncode}: {done.stderr.strip()[-2000:]}"
    return {key: {"error": ["crash", died]} if value.get("outcome") == "started" else value
            for key, value in found.items()}


def _outcome(outcomes: dict[tuple[str, str], dict[str, Any]], setting: str, dtype: str) -> dict[str, Any]:
    if setting == "iree" and not iree_available():
        pytest.skip("IREE is not installed")
    found = outcomes.get((setting, dtype))
    assert found is not None, f"{setting} {dtype} never ran: a run before it killed the process"
    return found


def _values(found: dict[str, Any], key: str, dtype: torch.dtype) -> torch.Tensor:
    """What the call ``key`` returned (it must not have raised)."""
    assert "error" not in found, found["error"]
    value = found[key]
    assert not isinstance(value, dict), f"{key}: {value['error']}"
    return torch.tensor(value, dtype=dtype)


def _raised(found: dict[str, Any], key: str, line_end: str) -> str:
    """The message of the DivisionByZeroError the call ``key`` raised, at the kernel line ending in ``line_end``."""
    value = found[key]
    assert isinstance(value, dict), f"{key} returned values instead of raising"
    kind, message = value["error"]
    assert kind == "DivisionByZeroError", message
    line = next(i for i, text in enumerate(KERNELS_FILE.read_text().splitlines(), 1) if text.endswith(line_end))
    assert f"{KERNELS_FILE}:{line}: " in message, message
    return message


@pytest.mark.parametrize(("setting", "dtype"), [r for r in RUNS if r[0] != "checked"])
def test_a_zero_divisor_gives_the_documented_value_and_the_others_torchs(outcomes, setting: str, dtype: str) -> None:
    found = _outcome(outcomes, setting, dtype)
    a, b = arguments(DTYPES[dtype])
    assert torch.equal(_values(found, "by_tensor", a.dtype), KERNELS.expected(a, b))
    nonzero = torch.where(b == 0, 5, b)
    assert torch.equal(_values(found, "nonzero", a.dtype), KERNELS.expected(a, nonzero))
    for k in (3, -1, 0):
        k_tensor = torch.full_like(a, k)
        assert torch.equal(_values(found, f"by_scalar_{k}", a.dtype), KERNELS.expected(a, k_tensor)[:2]), k


@pytest.mark.parametrize("setting", ["linalg-on-tensors-fast", "linalg-on-tensors-plain"])
def test_a_device_scalar_divided_by_zero_gives_minus_one(outcomes, setting: str) -> None:
    found = _outcome(outcomes, setting, "int32")
    a, _ = arguments(torch.int32)
    i = torch.arange(a.size(0), dtype=a.dtype)
    assert torch.equal(_values(found, "grid_by_scalar", a.dtype), a + i // 3)
    assert torch.equal(_values(found, "grid_by_scalar_0", a.dtype), a - 1)


def test_checked_mode_raises_for_a_zero_divisor_in_a_lane_the_kernel_computes_and_not_in_padding(outcomes) -> None:
    found = _outcome(outcomes, "checked", "int32")
    a, b = arguments(torch.int32)
    nonzero = torch.where(b == 0, 5, b)
    # The last tile's 12 padding lanes divide by the zeros they are padded with: not the kernel's division.
    assert torch.equal(_values(found, "nonzero", a.dtype), KERNELS.expected(a, nonzero))
    assert "out[0, t] = x // d" in _raised(found, "by_tensor", "# divides the lanes of a tile")
    _raised(found, "last_lane_zero", "# divides the lanes of a tile")  # the partial tile's last real lane
    assert torch.equal(_values(found, "by_scalar_3", a.dtype), KERNELS.expected(a, torch.full_like(a, 3))[:2])
    _raised(found, "by_scalar_0", "# divides the lanes of a tile by a scalar")
    rows, columns = a[:35].reshape(5, 7), nonzero[:7]
    assert torch.equal(_values(found, "rows_by_columns", a.dtype), rows % columns)
    _raised(found, "rows_by_columns_zero", "# divides the lanes of two ragged tiles")
    assert torch.equal(_values(found, "grid_by_scalar", a.dtype), a + torch.arange(a.size(0)) // 3)
    assert "out[i] = x[i] + i // k" in _raised(found, "grid_by_scalar_0", "# divides a device scalar")


def test_checked_mode_emits_the_check_of_a_lane_divisor_over_the_real_lanes_only() -> None:
    a, b = arguments(torch.int32)
    bound = KERNELS.by_tensor.bind((a, b))
    assert "cf.assert" not in generate_mlir(bound)
    run_filecheck(generate_mlir(bound, checked=True), string.Template("""
        // CHECK-LABEL: func.func @by_tensor(
        // CHECK:       %[[EXTENT:$V]] = arith.minsi
        // CHECK:       %[[SLICE:$V]] = tensor.extract_slice %b[
        // CHECK:       %[[DIVISOR:$V]] = tensor.insert_slice %[[SLICE]] into %{{$V}}[0] [%[[EXTENT]]] [1] : tensor<?xi32> into tensor<16xi32>
        // CHECK:       %[[LANES:$V]] = linalg.generic {{.*}} ins(%[[DIVISOR]], %{{$V}} : tensor<16xi32>, tensor<16xi32>) outs(%{{$V}} : tensor<16xi1>)
        // CHECK-NEXT:  ^{{$V}}(%[[D:$V]]: i32,
        // CHECK-NEXT:  %[[ZERO:$V]] = arith.cmpi eq, %[[D]], %{{$V}} : i32
        // CHECK-NEXT:  %[[LANE:$V]] = linalg.index 0 : index
        // CHECK-NEXT:  %[[REAL:$V]] = arith.cmpi slt, %[[LANE]], %[[EXTENT]] : index
        // CHECK-NEXT:  %[[BOTH:$V]] = arith.andi %[[ZERO]], %[[REAL]] : i1
        // CHECK-NEXT:  linalg.yield %[[BOTH]] : i1
        // CHECK:       linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[LANES]] : tensor<16xi1>)
        // CHECK:       %[[NONE:$V]] = arith.xori
        // CHECK-NEXT:  cf.assert %[[NONE]], "integer division by zero"
        // CHECK:       linalg.generic {{.*}} ins(%{{$V}}, %[[DIVISOR]] : tensor<16xi32>, tensor<16xi32>)
        // CHECK-NEXT:  ^{{$V}}(%[[X:$V]]: i32, %[[Y:$V]]: i32,
        // CHECK-NEXT:  arith.divsi %[[X]], %[[Y]] : i32
    """).substitute(V="[A-Za-z0-9_#-]+"))


def test_divisions_whose_divisor_may_be_zero_are_guarded_and_by_constants_are_not() -> None:
    text = """
    func.func @f(%x: i32, %d: i32, %v: vector<8xi64>, %w: vector<8xi64>, %i: index) -> (i32, i32, vector<8xi64>, index, i32) {
      %c4 = arith.constant 4 : i32
      %cm1 = arith.constant -1 : i32
      %c7 = arith.constant 7 : index
      %q = arith.floordivsi %x, %d : i32
      %r = arith.remsi %x, %c4 : i32
      %vq = arith.divui %v, %w : vector<8xi64>
      %iq = arith.ceildivsi %i, %c7 : index
      %m = arith.divsi %x, %cm1 : i32
      return %q, %r, %vq, %iq, %m : i32, i32, vector<8xi64>, index, i32
    }
    """
    with mlir_session():
        module = parse_module(text)
        assert guard_integer_divisions(module) == 3
        module.operation.verify()
        guarded = str(module)
    run_filecheck(guarded, string.Template("""
        // CHECK-LABEL: func.func @f(
        // CHECK:       %[[ZERO:$V]] = arith.cmpi eq, %arg1, %{{$V}} : i32
        // CHECK:       %[[MINUS_ONE:$V]] = arith.cmpi eq, %arg1, %{{$V}} : i32
        // CHECK:       %[[BAD:$V]] = arith.ori %[[ZERO]], %[[MINUS_ONE]] : i1
        // CHECK:       %[[SAFE:$V]] = arith.select %[[BAD]], %{{$V}}, %arg1 : i32
        // CHECK:       arith.floordivsi %arg0, %[[SAFE]] : i32
        // CHECK:       arith.remsi %arg0, %{{$V}} : i32
        // CHECK:       %[[VZERO:$V]] = arith.cmpi eq, %arg3, %{{$V}} : vector<8xi64>
        // CHECK:       %[[VSAFE:$V]] = arith.select %[[VZERO]], %{{$V}}, %arg3 : vector<8xi1>, vector<8xi64>
        // CHECK:       %[[VQ:$V]] = arith.divui %arg2, %[[VSAFE]] : vector<8xi64>
        // CHECK:       arith.select %[[VZERO]], %{{$V}}, %[[VQ]] : vector<8xi1>, vector<8xi64>
        // CHECK-NOT:   arith.select
        // CHECK:       arith.ceildivsi %arg4, %{{$V}} : index
        // CHECK:       arith.cmpi eq, %{{$V}}, %{{$V}} : i32
        // CHECK:       arith.divsi %arg0, %{{$V}} : i32
    """).substitute(V="[A-Za-z0-9_#-]+"))
