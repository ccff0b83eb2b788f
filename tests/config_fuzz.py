"""Config fuzzing: example kernels compiled under the configs Helion's own autotuner draws,
run on CPU and compared with Helion's reference mode.

An autotuner visits exactly the configs nobody picked by hand, so every config Helion's
``ConfigGeneration(config_spec).random_config()`` can produce (block sizes,
``reduction_loops``, ``reduction_fusion``, loop orders, l2 groupings, ``pid_type``,
tunables such as ``split_k``, ...) must compute what reference mode computes, or be
refused with a ``HelionMLIRError``. A :class:`FuzzCase` fixes everything but the config
(example, shape kind, static or dynamic shapes, output type, pipeline, threads);
:func:`random_configs` draws configs reproducibly from a seed; :func:`run_config` compiles,
runs and compares one, returning an :class:`Outcome`.

Shared by ``tests/test_config_fuzz.py`` (a few configs per example in CI, hundreds with
``--fuzz-configs``) and ``scripts/fuzz_configs.py`` (long exploring runs with a report).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import time
import traceback
import zlib
from typing import Any

import helion
import torch
from examples_util import (
    KNOWN_NUMERIC_GAPS,
    KNOWN_RUN_GAPS,
    assert_matches,
    bound_args,
    clone_args,
    clone_kwargs,
    dynamic_shapes_kernel,
    example_call,
    load_example_by_name,
)
from helion.autotuner.config_generation import ConfigGeneration

from helion_mlir.errors import ExecutionError, HelionMLIRError, RuntimeCheckError
from helion_mlir.importer.node_importer import TorchMLIRLoweringError
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.reference import reference_kernel, register_cpu_matmul_dtype_overloads

MATCH, REFUSED, WRONG, CRASH, KNOWN_GAP = "match", "refused", "wrong", "crash", "known gap"
OUT_OF_BOUNDS = "out of bounds"  # checked mode caught an access outside a tensor


@dataclasses.dataclass(frozen=True)
class FuzzCase:
    """Everything about one compiled run but its config."""

    example: str
    shape: str = "ragged"  # "divisible" or "ragged" (sizes the block sizes do not divide)
    static_shapes: bool = True
    output_type: str = "linalg-on-tensors"
    pipeline: str = "fast"
    threads: int | None = None  # fast pipeline workers (None: torch.get_num_threads())
    checked: bool = False  # checked mode (plain pipeline): every memory access checked at run time

    def label(self) -> str:
        pipeline = f"fast/{self.threads or 'default'}" if self.pipeline == "fast" else self.pipeline
        parts = [self.example, self.shape, "static" if self.static_shapes else "dynamic", self.output_type,
                 f"{pipeline}/checked" if self.checked else pipeline]
        return " ".join(parts)


@dataclasses.dataclass
class Outcome:
    """What one config did: ``match``, ``refused`` (a HelionMLIRError), ``wrong`` (numbers
    differ from reference mode), ``out of bounds`` (checked mode caught an access outside
    a tensor), ``crash`` (any other exception) or ``known gap``."""

    case: FuzzCase
    config: helion.Config
    status: str
    detail: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status in (WRONG, CRASH, REFUSED, OUT_OF_BOUNDS)

    def reproduction(self) -> str:
        """Python that reproduces this outcome from the repository root."""
        config = json.dumps(dict(self.config.config), sort_keys=True)
        return (
            "import sys; sys.path.insert(0, 'tests')\n"
            "import helion\nfrom config_fuzz import FuzzCase, run_config\n"
            f"print(run_config({self.case!r}, helion.Config(**{config})).summary())"
        )

    def summary(self) -> str:
        config = json.dumps(dict(self.config.config), sort_keys=True)
        text = f"[{self.status}] {self.case.label()} {config} ({self.seconds:.1f} s)"
        return f"{text}\n{self.detail}" if self.detail else text


def case_seed(example: str, index: int, base_seed: int = 0) -> int:
    """A seed that depends only on the example, the config's index and ``base_seed``
    (stable across runs and processes, unlike ``hash``)."""
    return zlib.crc32(f"{base_seed}:{example}:{index}".encode())


def kernel_of(example: str, static_shapes: bool) -> helion.Kernel:
    """The example's kernel, or its twin with ``static_shapes=False`` (shared with the other
    example tests, so that Helion's bound kernels are reused across configs and tests)."""
    return load_example_by_name(example).KERNEL if static_shapes else dynamic_shapes_kernel(example)


def bound_kernel(case: FuzzCase) -> Any:
    module = load_example_by_name(case.example)
    kernel = kernel_of(case.example, case.static_shapes)
    return kernel.bind(bound_args(kernel, *example_call(module, case.shape)))


def random_configs(bound: Any, seed: int, count: int) -> list[helion.Config]:
    """``count`` configs from Helion's own generator for ``bound``, reproducible from ``seed``
    (Helion draws from Python's global ``random``; its state is restored afterwards)."""
    generator = ConfigGeneration(bound.config_spec)
    state = random.getstate()
    random.seed(seed)
    try:
        return [generator.random_config() for _ in range(count)]
    finally:
        random.setstate(state)


@functools.cache
def _reference_run(example: str, shape: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Reference mode's result and its arguments after the call (in-place updates)."""
    register_cpu_matmul_dtype_overloads()
    module = load_example_by_name(example)
    args, kwargs = example_call(module, shape)
    args, kwargs = clone_args(args), clone_kwargs(kwargs)
    result = reference_kernel(module.KERNEL)(*args, **kwargs)
    return result, args, kwargs


def _known_refusal(case: FuzzCase, err: HelionMLIRError) -> str | None:
    """Why ``err`` is a documented gap of an output type rather than a bug, else None."""
    gap = KNOWN_RUN_GAPS.get((case.example, case.output_type))
    if gap is not None and isinstance(err, ExecutionError):
        return f"{gap}: "
    if case.output_type == "tosa" and not case.static_shapes and isinstance(err, TorchMLIRLoweringError):
        return "tosa has no dynamic-shape form of several ops (docs/torch-mlir-interface.md): "
    return None


def _tensors_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    return [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]


def run_config(case: FuzzCase, config: helion.Config) -> Outcome:
    """Compile ``case`` under ``config``, run it on fresh inputs and compare the result and
    every tensor argument afterwards with reference mode."""
    start = time.perf_counter()

    def outcome(status: str, detail: str = "") -> Outcome:
        return Outcome(case, config, status, detail, time.perf_counter() - start)

    module = load_example_by_name(case.example)
    try:
        compiled = compile_kernel(bound_kernel(case), config=config, output_type=case.output_type,
                                  pipeline=case.pipeline, threads=case.threads, checked=case.checked)
        args, kwargs = example_call(module, case.shape)
        args, kwargs = clone_args(args), clone_kwargs(kwargs)
        got = compiled(*args, **kwargs)
    except RuntimeCheckError as err:
        return outcome(OUT_OF_BOUNDS, f"{type(err).__name__}: {err}")
    except HelionMLIRError as err:
        known = _known_refusal(case, err)
        return outcome(KNOWN_GAP if known else REFUSED, f"{known or ''}{type(err).__name__}: {err}")
    except Exception:  # noqa: BLE001  (any other exception is a bug to report, not to raise)
        return outcome(CRASH, traceback.format_exc(limit=8))
    expected, expected_args, expected_kwargs = _reference_run(case.example, case.shape)
    try:
        assert_matches(got, expected, module.TOLERANCE)
        for i, (g, e) in enumerate(zip(_tensors_of(args, kwargs), _tensors_of(expected_args, expected_kwargs))):
            exact = e.dtype.is_floating_point and e.dtype.itemsize == 1  # torch compares these bitwise only
            assert_matches(g, e, dict(rtol=0, atol=0) if exact else module.TOLERANCE, f"tensor argument {i} after the call")
    except AssertionError as err:
        gap = KNOWN_NUMERIC_GAPS.get((case.example, case.output_type))
        return outcome(KNOWN_GAP, f"{gap}: {err}") if gap else outcome(WRONG, str(err))
    return outcome(MATCH)
