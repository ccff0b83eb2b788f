"""Indices out of range: memory-safe in every pipeline, caught by checked mode.

Each kernel of tests/kernels/out_of_range_kernels.py indexes one way a kernel computes a
position (a scalar argument, data from an index tensor, arithmetic on a grid index or on
``tile.index``, a tile's end, a loop over a longer range than a tensor). Called with
in-range arguments it matches Helion's reference mode (fast pipeline and checked mode);
with out-of-range ones it reads 0
and writes nothing out of range (docs/abi.md, "Indices out of range"), leaving every other
element of every tensor and the guard regions around them as they were, in the fast and
plain pipelines and IREE; checked mode raises ``OutOfBoundsAccessError`` naming the line.
The calls run in one child process (tests/out_of_range_util.py), so that an
access that corrupts memory fails its test instead of killing pytest.
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
from filecheck_util import run_filecheck
from out_of_range_util import BY_NAME, CASES, IN_RANGE_SETTINGS, KERNELS, KERNELS_FILE, N, SETTINGS

from helion_mlir import OutOfBoundsAccessError, compile_kernel, generate_mlir
from helion_mlir.runtime.iree.engine import iree_available
from helion_mlir_cli import main as cli_main

# One worker runs them all, so that the child process runs once.
pytestmark = pytest.mark.xdist_group("out-of-range")
UTIL = Path(__file__).resolve().parent / "out_of_range_util.py"
IREE = pytest.param("iree", marks=[pytest.mark.iree, pytest.mark.skipif(not iree_available(),
                                                                        reason="IREE is not installed")])
OUT_OF_RANGE = [c.name for c in CASES if c.out_of_range is not None]
IN_RANGE = [c.name for c in CASES if c.in_range is not None]


Outcomes = dict[tuple[str, str, str], dict[str, Any]]


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> Outcomes:
    """Every case's outcome (by setting, case and variant) in each setting a selected test
    asks for, from one child process (its imports alone cost seconds); a case the process
    died in is reported as a crash, and those after it as never run."""
    asked = {item.callspec.params.get("setting", "checked") for item in request.session.items
             if item.module is request.module and "outcomes" in getattr(item, "fixturenames", ())}
    settings = [s for s in SETTINGS if s in asked and (s != "iree" or iree_available())]
    done = subprocess.run([sys.executable, str(UTIL), ",".join(settings)], capture_output=True, text=True,
                          timeout=1200)
    found: Outcomes = {}
    for line in done.stdout.splitlines():
        outcome = json.loads(line)
        found[(outcome["setting"], outcome["case"], outcome["variant"])] = outcome
    died = f"the child process ended with status {done.returncode}: {done.stderr.strip()[-2000:]}"
    for key, outcome in found.items():
        if outcome["outcome"] == "started":
            found[key] = {**outcome, "outcome": "crash", "error": died}
    return found


def outcome_of(outcomes: Outcomes, setting: str, case: str, variant: str) -> dict[str, Any]:
    found = outcomes.get((setting, case, variant))
    assert found is not None, f"{case} ({variant}) never ran in {setting}: a case before it killed the process"
    return found


def _line_of(case: str) -> int:
    """The line of ``case``'s kernel that holds its out-of-range access."""
    lines = KERNELS_FILE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {case}("))
    return next(i for i in range(start, len(lines)) if "# out of range" in lines[i]) + 1


@pytest.mark.parametrize("setting", ["fast", "plain", IREE])
@pytest.mark.parametrize("case", OUT_OF_RANGE)
def test_an_index_out_of_range_reads_zero_and_writes_nothing_outside_the_tensor(outcomes: Outcomes, setting: str,
                                                                              case: str) -> None:
    outcome = outcome_of(outcomes, setting, case, "out of range")
    assert outcome["outcome"] == "match", f"{BY_NAME[case].access} in {setting}: {outcome}"


@pytest.mark.parametrize("setting", IN_RANGE_SETTINGS)
@pytest.mark.parametrize("case", IN_RANGE)
def test_the_same_kernel_in_range_matches_reference_mode(outcomes: Outcomes, setting: str, case: str) -> None:
    outcome = outcome_of(outcomes, setting, case, "in range")
    assert outcome["outcome"] == "match", f"{BY_NAME[case].access} in {setting}: {outcome}"


@pytest.mark.parametrize("case", OUT_OF_RANGE)
def test_checked_mode_raises_naming_the_line_of_the_access(outcomes: Outcomes, case: str) -> None:
    outcome = outcome_of(outcomes, "checked", case, "out of range")
    assert outcome["outcome"] == "raised", f"{BY_NAME[case].access}: {outcome}"
    assert outcome["source_location"] == f"{KERNELS_FILE}:{_line_of(case)}"
    assert outcome["source_line"].endswith("# out of range")
    assert "check: out-of-bounds index into dimension" in outcome["error"]


# -- what the lowering emits ---------------------------------------------------------------


def filecheck(text: str, patterns: str) -> None:
    """FileCheck with ``$V`` standing for an SSA name."""
    run_filecheck(text, string.Template(patterns).substitute(V="[A-Za-z0-9_#]+"))


def test_a_gather_compares_each_position_with_the_dimension_and_reads_zero_outside() -> None:
    x, index = torch.randn(N), torch.randint(0, N, (29,))
    filecheck(generate_mlir(KERNELS.gather.bind((x, index))), """
        // CHECK-LABEL: func.func @gather(
        // CHECK:       linalg.generic
        // CHECK:         %[[POS:$V]] = arith.index_cast %{{$V}} : i64 to index
        // CHECK:         %[[INSIDE:$V]] = arith.cmpi ult, %[[POS]], %{{$V}} : index
        // CHECK-NEXT:    %[[SAFE:$V]] = arith.select %[[INSIDE]], %[[POS]], %{{$V}} : index
        // CHECK-NEXT:    %[[READ:$V]] = tensor.extract %x[%[[SAFE]]] : tensor<37xf32>
        // CHECK-NEXT:    %[[KEEP:$V]] = arith.andi %{{$V}}, %[[INSIDE]] : i1
        // CHECK:         arith.select %[[KEEP]], %[[READ]], %{{$V}} : f32
        // CHECK-NOT:     cf.assert
    """)


def test_checked_emission_asserts_each_position_before_the_access() -> None:
    x, index = torch.randn(N), torch.randint(0, N, (29,))
    filecheck(generate_mlir(KERNELS.gather.bind((x, index)), checked=True), """
        // CHECK-LABEL: func.func @gather(
        // CHECK:         %[[INSIDE:$V]] = arith.cmpi ult, %{{$V}}, %{{$V}} : index
        // CHECK-NEXT:    %[[OK:$V]] = arith.ori %{{$V}}, %[[INSIDE]] : i1
        // CHECK-NEXT:    cf.assert %[[OK]], "out-of-bounds index into dimension 0 of 'x' (size 37)"
        // CHECK:         tensor.extract %x[
    """)


def test_a_load_and_a_store_at_a_scalar_argument_run_only_inside_the_tensor() -> None:
    """The portable module (``generate_mlir``) guards ``x[k, tile]``: outside, the load
    gives zeros and the store leaves ``x`` as it was."""
    filecheck(generate_mlir(KERNELS.double_row.bind((torch.randn(5, N), 2))), """
        // CHECK-LABEL: func.func @double_row(
        // CHECK:       %[[ROW:$V]] = arith.index_cast %k : i64 to index
        // CHECK:       %[[INSIDE:$V]] = arith.cmpi ult, %[[ROW]], %{{$V}} : index
        // CHECK-NEXT:  %{{$V}} = scf.if %[[INSIDE]] -> (tensor<16xf32>) {
        // CHECK-NEXT:    tensor.extract_slice %{{$V}}[%[[ROW]], %{{$V}}]
        // CHECK:       } else {
        // CHECK:         %[[ZEROS:$V]] = linalg.fill
        // CHECK-NEXT:    scf.yield %[[ZEROS]] : tensor<16xf32>
        // CHECK:       %[[ROW2:$V]] = arith.index_cast %k : i64 to index
        // CHECK:       %[[INSIDE2:$V]] = arith.cmpi ult, %[[ROW2]], %{{$V}} : index
        // CHECK-NEXT:  scf.if %[[INSIDE2]] -> (tensor<5x37xf32>) {
        // CHECK:         tensor.insert_slice %{{$V}} into %[[OLD:$V]][%[[ROW2]], %{{$V}}]
        // CHECK:       } else {
        // CHECK-NEXT:    scf.yield %[[OLD]] : tensor<5x37xf32>
    """)


def test_a_tile_past_a_tensor_end_is_clipped_in_the_portable_module_and_checked_at_launch() -> None:
    """``hl.tile(n)`` over tensors of 37: the module ``generate_mlir`` returns clips the
    slice to the tensor; a compiled kernel's main code relies on ``n <= 37``, checked at
    each launch, and runs the clipped form, compiled when first needed, when it is false."""
    x, out = torch.randn(N), torch.zeros(N)
    filecheck(generate_mlir(KERNELS.copy_first.bind((x, out, 20))), """
        // CHECK-LABEL: func.func @copy_first(
        // CHECK:       scf.for %[[IV:$V]] = %{{$V}} to %{{$V}} step
        // CHECK:         %[[EXTENT:$V]] = arith.minsi
        // CHECK:         %[[START:$V]] = arith.minsi %[[IV]], %[[SIZE:$V]] : index
        // CHECK-NEXT:    %[[ROOM:$V]] = arith.subi %[[SIZE]], %[[START]] : index
        // CHECK-NEXT:    %[[INSIDE:$V]] = arith.minsi %[[EXTENT]], %[[ROOM]] : index
        // CHECK-NEXT:    tensor.extract_slice %x[%[[START]]] [%[[INSIDE]]] [1] : tensor<37xf32> to tensor<?xf32>
    """)
    kernel = compile_kernel(KERNELS.copy_first.bind((x, out, 20)))
    filecheck(kernel.mlir, """
        // CHECK-LABEL: func.func @copy_first(
        // CHECK:       scf.for %[[IV:$V]] = %{{$V}} to %{{$V}} step
        // CHECK:         %[[EXTENT:$V]] = arith.minsi
        // CHECK-NEXT:    tensor.extract_slice %x[%[[IV]]] [%[[EXTENT]]] [1] : tensor<37xf32> to tensor<?xf32>
    """)
    assert [c.what for c in kernel.model.launch_checks] == ["dimension 0 of 'x'", "dimension 0 of 'out'"]
    kernel(x, out.clone(), 20)
    assert kernel._guarded is None  # every launch so far kept to the tensors
    torch.testing.assert_close(kernel(x, torch.zeros(N), 45), x)
    assert kernel._guarded is not None


def test_a_dynamic_shape_kernel_relies_on_launch_checks_for_tiles_of_another_tensor() -> None:
    """Tiles over ``x``'s sizes read ``y``, whose dynamic sizes may be smaller: the compiled
    code slices ``y`` as it slices ``x`` (no clipping in the tile loop) and each launch
    compares the sizes."""
    x, y = torch.randn(N, 20), torch.randn(N, 20)
    kernel = compile_kernel(KERNELS.add_pair.bind((x, y)))
    assert {(c.what, str(c.condition)) for c in kernel.model.launch_checks} == {
        ("dimension 0 of 'y'", f"{_size('x', 0, kernel)} <= {_size('y', 0, kernel)}"),
        ("dimension 1 of 'y'", f"{_size('x', 1, kernel)} <= {_size('y', 1, kernel)}")}
    filecheck(kernel.mlir, """
        // CHECK-LABEL: func.func @add_pair(
        // CHECK:       scf.for %[[ROW:$V]] =
        // CHECK:         scf.for %[[COL:$V]] =
        // CHECK:           tensor.extract_slice %x[%[[ROW]], %[[COL]]]
        // CHECK-NOT:       arith.minsi
        // CHECK:           tensor.extract_slice %y[%[[ROW]], %[[COL]]]
    """)


def _size(name: str, axis: int, kernel: Any) -> str:
    """The symbol of a tensor argument's dynamic size."""
    return str(next(a.fake for a in kernel.model.args if a.name == name).shape[axis])


@pytest.mark.parametrize("shape", [(64, 64), (40, 24)], ids=["divisible", "ragged"])
def test_tile_begins_and_ids_are_known_inside_and_run_unguarded(shape: tuple[int, int]) -> None:
    """``out[tile_m.begin, tile_n.begin]`` and ``out[tile_m.id, tile_n.id]`` (as in Helion's
    own tests of tile properties) stay inside ``out``: no guard, and every tile marks its own."""
    x = torch.randn(*shape)
    bound = KERNELS.mark_tile_starts.bind((x,))
    text = generate_mlir(bound)
    assert "scf.if" not in text and "arith.cmpi ult" not in text
    expected = torch.zeros(shape, dtype=torch.int32)
    expected[::16, ::8] = 1
    expected[:-(-shape[0] // 16), :-(-shape[1] // 8)] = 2
    torch.testing.assert_close(compile_kernel(bound)(x), expected)


def test_the_command_line_names_the_index_a_checked_run_found_outside(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["run", f"{KERNELS_FILE}:add_element", "--args", "f32[37], 1000000000", "--checked"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"out-of-bounds access at {KERNELS_FILE}:{_line_of('add_element')}" in err
    assert "check: out-of-bounds index into dimension 0 of 'x' (size 37)" in err
    assert "next: check the index at that line for these --args" in err


def test_a_broadcast_together_scatter_skips_lanes_outside_and_checked_mode_names_them() -> None:
    """``out[tile.index[:, None], columns[tile, :]] = x[tile, :]`` with columns past the
    width (and negative): those lanes write nothing, the others their element; checked
    mode raises naming the line."""
    x, columns = torch.randn(6, 3), torch.tensor([[0, 5, 1], [7, 2, 3], [4, -1, 0], [1, 2, 3], [9, 4, 2], [0, 1, 2]])
    expected = torch.zeros(6, 5)
    for row, cols in enumerate(columns.tolist()):
        for lane, col in enumerate(cols):
            if 0 <= col < 5:
                expected[row, col] = x[row, lane]
    kernel = KERNELS.scatter_by_row_columns
    out = torch.zeros(6, 5)
    torch.testing.assert_close(compile_kernel(kernel.bind((x, columns, out)))(x, columns, out), expected)
    with pytest.raises(OutOfBoundsAccessError, match="dimension 1 of 'out'") as raised:
        compile_kernel(kernel.bind((x, columns, out)), checked=True)(x, columns, torch.zeros(6, 5))
    assert raised.value.source_line.endswith("# out of range")
