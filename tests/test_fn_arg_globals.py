"""A function passed to a kernel may read module-level values of its own file: Helion's host
code imports that module under an alias (``_global_source0``), through which the compiled
kernel reads the values too, and refuses to run once one has changed (they are constants of
its code)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from examples_util import load_example

from helion_mlir import ArgumentError

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
HELPERS = load_example(KERNELS_DIR / "fn_arg_helpers.py")
KERNELS = load_example(KERNELS_DIR / "fn_arg_kernels.py")


def test_a_passed_function_reads_the_globals_of_its_own_file() -> None:
    x = torch.randn(37)
    torch.testing.assert_close(KERNELS.sine_then(x, HELPERS.add_offset), torch.sin(x) + 0.75)
    torch.testing.assert_close(KERNELS.sine_then(x, HELPERS.scale_then_offset), torch.sin(x) * 3 + 0.75)


def test_a_changed_global_of_the_passed_functions_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(20)
    KERNELS.sine_then(x, HELPERS.add_offset)
    monkeypatch.setattr(HELPERS, "OFFSET", 2.0)
    with pytest.raises(ArgumentError, match=r"OFFSET = 0\.75, which is now 2\.0"):
        KERNELS.sine_then(x, HELPERS.add_offset)
