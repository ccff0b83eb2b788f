"""Integer division and remainder by zero (and ``INT_MIN // -1``) give docs/abi.md's defined
values instead of SIGFPE, in every output type and pipeline, in checked mode and through
IREE (checked mode raises ``DivisionByZeroError`` for a device scalar divisor); so does a division in the padding lanes of a ragged tile (36 elements in tiles of 16),
which the plain pipeline trapped on even when no divisor was zero.

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


@pytest.mark.parametrize(("setting", "dtype"), [r for r in RUNS if r[0] != "checked"])
def test_a_zero_divisor_gives_the_documented_value_and_the_others_torchs(outcomes, setting: str, dtype: str) -> None:
    found = _outcome(outcomes, setting, dtype)
    assert "error" not in found, found["error"]
    a, b = arguments(DTYPES[dtype])
    assert torch.equal(torch.tensor(found["by_tensor"], dtype=a.dtype), KERNELS.expected(a, b))
    nonzero = torch.where(b == 0, 5, b)
    assert torch.equal(torch.tensor(found["nonzero"], dtype=a.dtype), KERNELS.expected(a, nonzero))
    by_scalar = found["by_scalar"]
    for k in (3, -1, 0):
        k_tensor = torch.full_like(a, k)
        assert torch.equal(torch.tensor(by_scalar[str(k)], dtype=a.dtype), KERNELS.expected(a, k_tensor)[:2]), k


@pytest.mark.parametrize("setting", ["linalg-on-tensors-fast", "linalg-on-tensors-plain"])
def test_a_device_scalar_divided_by_zero_gives_minus_one(outcomes, setting: str) -> None:
    found = _outcome(outcomes, setting, "int32")
    a, _ = arguments(torch.int32)
    i = torch.arange(a.size(0), dtype=a.dtype)
    assert torch.equal(torch.tensor(found["grid_by_scalar"], dtype=a.dtype), a + i // 3)
    assert torch.equal(torch.tensor(found["grid_by_scalar_0"], dtype=a.dtype), a - 1)


def test_checked_mode_gives_the_same_values_for_tensor_divisors_and_raises_for_a_scalar_one(outcomes) -> None:
    dtype = "int32"
    found = _outcome(outcomes, "checked", dtype)
    kind, message = found["error"]
    assert kind == "DivisionByZeroError", message
    line = next(i for i, text in enumerate(KERNELS_FILE.read_text().splitlines(), 1)
                if text.endswith("# divides a device scalar"))
    assert f"{KERNELS_FILE}:{line}: out[i] = x[i] + i // k" in message
    a, b = arguments(DTYPES[dtype])
    assert torch.equal(torch.tensor(found["by_tensor"], dtype=a.dtype), KERNELS.expected(a, b))
    assert torch.equal(torch.tensor(found["grid_by_scalar"], dtype=a.dtype), a + torch.arange(a.size(0)) // 3)


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
