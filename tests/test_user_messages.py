"""What a user reads besides results: each Helion warning once per kernel with the lines it
concerns, configs shown with the fields that matter on CPU, a hint (once per kernel) when a
kernel runs Helion's default config implicitly, and the demo's modules without locations,
their functions returning what they compute."""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
from pathlib import Path

import helion
import pytest
import torch
from examples_util import load_example

from helion_mlir import compile_kernel
from helion_mlir.runtime.reference import reference_kernel

ROOT = Path(__file__).resolve().parents[1]
KERNELS = load_example(ROOT / "tests" / "kernels" / "message_kernels.py")
HINT = "runs Helion's default config"


def test_a_helion_warning_is_printed_once_per_kernel_listing_every_line(capsys) -> None:
    """Helion printed TensorOperationInWrapper once per operation (four blocks here), and again
    at every bind: new shapes, reference mode's twin."""
    offsets = torch.tensor([0, 3, 7])
    KERNELS.host_statistics.bind((torch.randn(40), offsets))
    first = capsys.readouterr().err
    assert first.count("WARNING[TensorOperationInWrapper]") == 1, first
    assert "If this is not a tensor operation, please report this as a bug." in first  # Helion's own text
    listed = re.findall(r"^  line (\d+): (.*)$", first, re.MULTILINE)
    assert [code for _, code in listed] == [
        "lengths = offsets[1:] - offsets[:-1]", "_mean_length = lengths.float().mean()", "_shift = x.mean()"]
    assert f"In kernel 'host_statistics' ({KERNELS.__file__}), at:" in first
    KERNELS.host_statistics.bind((torch.randn(33), offsets))  # another shape: a new bind
    reference_kernel(KERNELS.host_statistics)(torch.randn(33), offsets)
    assert "WARNING[" not in capsys.readouterr().err
    KERNELS.quiet_host_statistics.bind((torch.randn(40), offsets))  # ignore_warnings is honoured
    assert "WARNING[" not in capsys.readouterr().err


def test_the_implicit_config_shows_the_cpu_fields_and_a_hint_to_tune_once(capsys, caplog) -> None:
    kernel = helion.kernel(KERNELS.scale_rows, backend="mlir", autotune_effort="none")
    x = torch.randn(40, 24)
    with caplog.at_level(logging.WARNING, logger="helion_mlir"):
        torch.testing.assert_close(kernel(x), x * 3.0)
        kernel(torch.randn(50, 24))  # another bind: no second hint
    err = capsys.readouterr().err
    assert "Using implicit config: @helion.kernel(config=helion.Config(block_sizes=[32]), static_shapes=True)" in err
    assert "num_warps" not in err and "indexing" not in err
    hints = [r.getMessage() for r in caplog.records if HINT in r.getMessage()]
    assert hints == [
        "kernel 'scale_rows' runs Helion's default config (block_sizes=[32]), chosen for GPUs; tuning it for this "
        f"CPU can make it faster: helion-mlir tune {KERNELS.__file__}:scale_rows --args '...' (or "
        "scale_rows.autotune(args) with backend='mlir'), cached and used from then on; give the kernel a config "
        "to run that one instead"]


def test_compile_kernel_hints_only_where_the_default_config_was_not_chosen_and_tuning_can_change_it(
        caplog) -> None:
    x = torch.randn(20, 8)
    untuned = helion.kernel(KERNELS.shift_rows)
    configured = helion.kernel(KERNELS.shift_rows, config=helion.Config(block_sizes=[8]))
    nothing_to_tune = helion.kernel(KERNELS.double_each)
    with caplog.at_level(logging.WARNING, logger="helion_mlir"):
        compile_kernel(configured, (x,))
        compile_kernel(nothing_to_tune, (x[:, 0].contiguous(),))
        assert not [r for r in caplog.records if HINT in r.getMessage()]
        torch.testing.assert_close(compile_kernel(untuned, (x,))(x), x + 1.0)
        compile_kernel(untuned, (torch.randn(30, 8),))
    hints = [r.getMessage() for r in caplog.records if HINT in r.getMessage()]
    assert len(hints) == 1 and hints[0].startswith("kernel 'shift_rows' runs Helion's default config (block_sizes=[32])")


def _demo() -> object:
    spec = importlib.util.spec_from_file_location("helion_mlir_demo", ROOT / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("debug_info", [False, True])
def test_the_demo_prints_locations_only_when_asked_and_functions_return_their_results(capsys, debug_info) -> None:
    _demo().show_one_node("layer_norm", debug_info)
    out = capsys.readouterr().out
    assert ("loc(" in out) == debug_info
    functions = re.findall(r"func\.func @(\w+)\(.*\) -> \((.+)\) \{", out)
    returns = re.findall(r"^\s+return (%\S+) : (.+)$", out, re.MULTILINE)
    assert len(functions) == 4 and len(returns) == 4, out
    assert [types for _, types in functions] == [types.split(" loc(")[0] for _, types in returns]


def test_run_suggests_the_tune_command_for_the_same_kernel_and_arguments(tmp_path: Path, caplog) -> None:
    from helion_mlir_cli import main

    path = tmp_path / "mine.py"
    path.write_text((ROOT / "tests" / "kernels" / "message_kernels.py").read_text().replace(
        "def scale_rows(", "@helion.kernel()\ndef scale_my_rows("))
    with caplog.at_level(logging.WARNING, logger="helion_mlir"):
        assert main(["run", f"{path}:scale_my_rows", "--args", "f32[16,8]"]) == 0
    hints = [r.getMessage() for r in caplog.records if HINT in r.getMessage()]
    assert len(hints) == 1 and f"faster: helion-mlir tune {path}:scale_my_rows --args 'f32[16,8]' (or" in hints[0]
