"""Checked mode: every memory access of the compiled code is checked at run time, and one
out of bounds raises OutOfBoundsAccessError naming the kernel source line, with the process
alive and the function still callable; kernels that are right compute the same numbers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from examples_util import (
    EXAMPLES_DIR,
    assert_matches,
    bound_args,
    clone_args,
    clone_kwargs,
    example_call,
    load_example_by_name,
    register_cpu_matmul_dtype_overloads,
)
from filecheck_util import run_filecheck

from helion_mlir import OutOfBoundsAccessError, compile_module
from helion_mlir_cli import main as cli_main
from helion_mlir.runtime.kernel import compiled_kernel as compiled_kernel_module
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.cpu.engine import lower_module
from helion_mlir.runtime.cpu.pipelines import PipelineOptions, describe_pipeline

WINDOW_SOURCE = "def window(x, start):\n    # four elements from start\n    return x[start:start + 4]\n"


def _window_module(source_file: Path) -> str:
    return f"""
func.func @window(%x: tensor<?xf32>, %start: index) -> tensor<4xf32> {{
  %w = tensor.extract_slice %x[%start] [4] [1] : tensor<?xf32> to tensor<4xf32> loc("{source_file}":3:4)
  return %w : tensor<4xf32>
}}
"""


@pytest.fixture
def window(tmp_path: Path) -> Any:
    source = tmp_path / "window.py"
    source.write_text(WINDOW_SOURCE)
    return compile_module(_window_module(source), "window", pipeline="plain", checked=True), source


def test_an_out_of_bounds_slice_raises_naming_the_source_line_and_the_function_stays_callable(window: Any) -> None:
    function, source = window
    x = torch.arange(10, dtype=torch.float32)
    for start in (7, -1, 1 << 40):
        with pytest.raises(OutOfBoundsAccessError) as raised:
            function(x, start)
        assert raised.value.source_location == f"{source}:3"
        assert raised.value.source_line == "return x[start:start + 4]"
        assert "out-of-bounds" in raised.value.check
        assert f"@window: out-of-bounds access at {source}:3: return x[start:start + 4]" in str(raised.value)
    # In bounds, before and after failures: the numbers, and no failure left over.
    torch.testing.assert_close(function(x, 6)[0], x[6:10])
    torch.testing.assert_close(function(x, 0)[0], x[0:4])


def test_checked_code_calls_back_instead_of_aborting(tmp_path: Path) -> None:
    source = tmp_path / "window.py"
    llvm = lower_module(_window_module(source), "window", pipeline="plain", checked=True)
    run_filecheck(llvm, """
        // CHECK:     llvm.func @_mlir_ciface_helion_mlir_check_failed(i64)
        // CHECK:     llvm.func @window(
        // CHECK:     llvm.cond_br
        // CHECK:     llvm.call @helion_mlir_check_failed
        // CHECK:     llvm.return
        // CHECK-NOT: abort
    """)


def test_checked_mode_is_the_plain_pipeline_with_three_more_steps(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="checked mode runs the plain pipeline"):
        compile_module(_window_module(Path("w.py")), "window", pipeline="fast", checked=True)
    steps = describe_pipeline("plain", PipelineOptions(checked=True))
    assert re.search(r"generate-runtime-verification\{verbose-level=0\}\s+\[checked\]", steps)
    assert re.search(r"return-on-failed-checks\s+\[checked\]", steps)
    assert re.search(r"assert-nonzero-divisors\s+\[checked\]", steps)
    plain = describe_pipeline("plain")
    assert "generate-runtime-verification" not in plain
    assert len(steps.splitlines()) == len(plain.splitlines()) + 3
    assert cli_main(["pipeline", "--checked"]) == 0
    assert capsys.readouterr().out.strip() == steps


def _without_tile_clamps(text: str) -> str:
    """A lowering forced wrong: every tile is as large as its block, also the last one of
    a ragged dimension (the clamp of the tile size to the dimension's end is gone)."""
    return re.sub(r"arith\.minsi", "arith.maxsi", text)


def test_a_lowering_forced_out_of_bounds_raises_naming_the_kernel_line(monkeypatch: pytest.MonkeyPatch) -> None:
    add = load_example_by_name("add")
    args, kwargs = example_call(add, "ragged")
    kernel = helion.kernel(add.KERNEL.fn, config=helion.Config(block_sizes=[16, 32]))  # its own compile cache entry
    bound = kernel.bind(bound_args(kernel, args, kwargs))
    emitted = compiled_kernel_module.emit_module
    monkeypatch.setattr(compiled_kernel_module, "emit_module",
                        lambda *a, **k: _without_tile_clamps(emitted(*a, **k)))
    compiled = compile_kernel(bound, checked=True)
    assert "arith.maxsi" in compiled.mlir
    with pytest.raises(OutOfBoundsAccessError) as raised:
        compiled(*clone_args(args), **clone_kwargs(kwargs))
    load_line = next(i for i, line in enumerate((EXAMPLES_DIR / "add.py").read_text().splitlines(), 1)
                     if "hl.load" in line or "x[tile" in line)
    assert raised.value.source_location == f"{EXAMPLES_DIR / 'add.py'}:{load_line}"
    assert raised.value.func_name == compiled.name


def test_a_failed_check_in_a_child_process_is_an_exception_not_an_abort(tmp_path: Path) -> None:
    # The process survives the failure and keeps running; an abort would end it with -6.
    source = tmp_path / "window.py"
    source.write_text(WINDOW_SOURCE)
    script = f"""
import torch
from helion_mlir import OutOfBoundsAccessError, compile_module
f = compile_module({_window_module(source)!r}, "window", pipeline="plain", checked=True)
try:
    f(torch.zeros(3), 2)
except OutOfBoundsAccessError as err:
    print("raised", err.source_location)
print("alive", f(torch.arange(8.0), 4)[0].tolist())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [f"raised {source}:3", "alive [4.0, 5.0, 6.0, 7.0]"]


# A sample of examples (tiles, rolled reductions, matmuls, attention, scatters, jagged
# loops, scans, gathers), on ragged shapes and in checked mode: the same numbers.
CHECKED_EXAMPLES = ["add", "layer_norm_affine", "softmax_looped", "matmul", "attention_causal", "rope",
                    "jagged_mean", "moe_scatter_add", "cumsum", "embedding", "cross_entropy", "welford"]


@pytest.mark.parametrize("name", CHECKED_EXAMPLES)
def test_example_in_checked_mode_matches_reference(name: str) -> None:
    register_cpu_matmul_dtype_overloads()
    mod = load_example_by_name(name)
    args, kwargs = example_call(mod, "ragged")
    bound = mod.KERNEL.bind(bound_args(mod.KERNEL, args, kwargs))
    compiled = compile_kernel(bound, checked=True)
    assert compiled.function.check_failures is not None and compiled.function.check_failures.checks
    got = compiled(*clone_args(args), **clone_kwargs(kwargs))
    assert_matches(got, mod.reference(*clone_args(args), **clone_kwargs(kwargs)), mod.TOLERANCE, name)


def test_cli_run_checked_says_so_and_matches(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["run", str(EXAMPLES_DIR / "rope.py"), "--checked"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert ", checked" in out.splitlines()[0] and "match:" in out
