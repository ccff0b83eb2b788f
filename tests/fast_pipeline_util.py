"""Emitted modules of examples, and the fast pipeline's IR after one of its steps, for IR tests."""

from __future__ import annotations

from pathlib import Path

import helion
import pytest
from examples_util import load_example_by_name

from helion_mlir import generate_mlir
from helion_mlir.runtime.cpu.engine import lower_module
from helion_mlir.runtime.cpu.pipelines.runner import DUMP_ENVIRONMENT_VARIABLE


def example_module(name: str, args: tuple[object, ...] | str = "ragged", **config: object) -> str:
    """The emitted module of an example on its ``make_args(args)`` (or on ``args``), in the
    form ``compile_kernel`` compiles (relying on its launch checks, docs/abi.md)."""
    module = load_example_by_name(name)
    kernel = helion.kernel(module.KERNEL.fn, config=helion.Config(**config)) if config else module.KERNEL
    return generate_mlir(kernel.bind(module.make_args(args) if isinstance(args, str) else args), launch_checks=True)


def after_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, func_name: str, step: str) -> str:
    """The module as the fast pipeline (2 threads) leaves it after ``step``, then
    ``// LOWERED`` and the module lowered to LLVM."""
    monkeypatch.setenv(DUMP_ENVIRONMENT_VARIABLE, str(tmp_path))
    lowered = lower_module(text, func_name, threads=2, in_place=True)
    [dump] = tmp_path.glob(f"{func_name}.fast/*-{step}.mlir")
    return dump.read_text() + "\n// LOWERED\n" + lowered
