"""Values the host code reads from tensor data (``n = int(offsets[-1].item())``,
``x.sum().item()``) are run-time values of the emitted function: one compiled kernel serves
every value, in every output type, both CPU pipelines, the ``mlir`` backend, static and
dynamic shapes and the configs Helion's own generator draws; results are compared with
Helion's reference mode. What the trace cannot follow is refused, naming the source line.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from examples_util import assert_matches, load_example
from filecheck_util import run_filecheck
from helion.autotuner.config_generation import ConfigGeneration
from hypothesis import given, settings
from hypothesis import strategies as st

import helion_mlir.runtime.kernel.compiled_kernel as compiled_kernel_module
import helion_mlir.lowering.tensor_reads as tensor_reads_module
import helion_mlir.runtime.backend.helion_backend as helion_backend_module
from helion_mlir import ArgumentError, DataDependentValueError, generate_mlir
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.reference import reference_kernel

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "data_dependent_kernels.py")

# Small inputs, so tile loops run in parallel whenever legal: the code large inputs get.
pytestmark = pytest.mark.usefixtures("parallel_even_when_small")

_GEN = torch.Generator().manual_seed(7)
X = torch.randn(64, generator=_GEN)
M = torch.randn(40, 24, generator=_GEN)


def _offsets(*values: int) -> torch.Tensor:
    return torch.tensor([0, *values], dtype=torch.int64)


# kernel name -> (arguments for a value, values: the first is the one it is compiled for)
CASES: dict[str, tuple[Callable[[Any], tuple[Any, ...]], list[Any]]] = {
    "doubled_prefix": (lambda n: (X, _offsets(7, n)), [20, 0, 64, 37]),
    "doubled_prefix_padded": (lambda n: (X, _offsets(7, n)), [20, 0, 64, 37]),
    "masked_prefix": (lambda n: (X, _offsets(7, n)), [20, 0, 64, 37]),
    "normalized_by_sum": (lambda shift: (X.abs() + shift,), [0.5, 3.0, 0.01]),
    "incremented_segment": (lambda se: (X, _offsets(*se)), [(3, 40), (0, 64), (17, 17), (63, 64)]),
    "first_rows_doubled": (lambda n: (M, torch.tensor(n)), [17, 1, 40, 8]),  # ref mode fails on 0 rows
    "column_sums_of_first_rows": (lambda n: (M, torch.tensor(n)), [17, 0, 40, 8]),
    "centered_on_last": (lambda n: (X, _offsets(7, n)), [20, 0, 64, 1]),
    "upper_half": (lambda n: (X, _offsets(7, n)), [20, 0, 64, 37, 1]),
    "doubled_if_any_flag": (lambda flag: (X, torch.tensor([False, flag, False])), [True, False]),
}
# The three ways a value reaches the device code: output size, loop bound, device scalar.
CORE = ["doubled_prefix", "doubled_prefix_padded", "masked_prefix"]


@functools.cache
def kernel(name: str, static_shapes: bool = True, backend: str | None = None) -> helion.Kernel:
    """The test kernel, or its twin with other settings (one object per combination)."""
    base = getattr(KERNELS, name)
    if static_shapes and backend is None:
        return base
    extra = {"backend": backend} if backend is not None else {}
    return helion.kernel(base.fn, config=base.configs[0], static_shapes=static_shapes,
                         ignore_warnings=base.settings.ignore_warnings, **extra)


def expected(name: str, static_shapes: bool, args: tuple[Any, ...]) -> Any:
    return reference_kernel(kernel(name, static_shapes))(*args)


class Counter:
    """Counts the calls of a function it replaces in a module."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
        self.calls = 0
        original = getattr(module, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)


# Every kernel with the fast pipeline (the default), the three core cases with the plain one too.
RUNS = [
    pytest.param(name, static, pipeline, id=f"{name}-{'static' if static else 'dynamic'}-{pipeline}")
    for pipeline in ("fast", "plain") for name in (CASES if pipeline == "fast" else CORE) for static in (True, False)
]


@pytest.mark.parametrize(("name", "static_shapes", "pipeline"), RUNS)
def test_one_compiled_kernel_serves_every_value_read_from_tensor_data(
    name: str, static_shapes: bool, pipeline: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_args, values = CASES[name]
    compiles = Counter(monkeypatch, compiled_kernel_module, "compile_module")
    compiled = compile_kernel(kernel(name, static_shapes).bind(make_args(values[0])), pipeline=pipeline)
    for value in values:
        args = make_args(value)
        assert_matches(compiled(*args), expected(name, static_shapes, args), dict(rtol=1e-5, atol=1e-5),
                       f"{name} at {value!r}")
    assert compiles.calls == 1


@pytest.mark.parametrize("output_type", ["tosa", "stablehlo", "raw"])
@pytest.mark.parametrize("static_shapes", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", CORE + ["normalized_by_sum", "first_rows_doubled"])
def test_values_read_from_tensor_data_run_in_every_output_type(name: str, static_shapes: bool,
                                                               output_type: str) -> None:
    make_args, values = CASES[name]
    compiled = compile_kernel(kernel(name, static_shapes).bind(make_args(values[0])), output_type=output_type)
    for value in values:
        args = make_args(value)
        assert_matches(compiled(*args), expected(name, static_shapes, args), dict(rtol=1e-5, atol=1e-5),
                       f"{name} [{output_type}] at {value!r}")


@pytest.mark.parametrize("static_shapes", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", CORE)
def test_mlir_backend_compiles_once_for_every_value(name: str, static_shapes: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    make_args, values = CASES[name]
    compiles = Counter(monkeypatch, helion_backend_module, "compile_kernel")
    through_mlir = kernel(name, static_shapes, backend="mlir")
    for value in values:
        args = make_args(value)
        assert_matches(through_mlir(*args), expected(name, static_shapes, args), dict(rtol=0, atol=0),
                       f"{name} [mlir backend] at {value!r}")
    assert compiles.calls == 1
    assert len(through_mlir._bound_kernels) == 1


def _random_configs(bound: Any, seed: int, count: int) -> list[helion.Config]:
    """Configs from Helion's own generator, reproducible (it draws from Python's ``random``)."""
    state = random.getstate()
    random.seed(seed)
    try:
        generator = ConfigGeneration(bound.config_spec)
        return [generator.random_config() for _ in range(count)]
    finally:
        random.setstate(state)


@pytest.mark.parametrize("name", CORE + ["incremented_segment", "column_sums_of_first_rows"])
def test_values_read_from_tensor_data_under_random_configs(name: str) -> None:
    make_args, values = CASES[name]
    bound = kernel(name).bind(make_args(values[0]))
    for config in _random_configs(bound, seed=len(name), count=3):
        compiled = compile_kernel(bound, config=config)
        for value in values:
            args = make_args(value)
            assert_matches(compiled(*args), expected(name, True, args), dict(rtol=1e-5, atol=1e-5),
                           f"{name} under {config} at {value!r}")


def test_the_value_is_an_argument_and_sizes_are_dynamic_never_the_placeholder() -> None:
    """``int(offsets[-1].item())`` is no number in the module (Helion's placeholder is 8192):
    the output is ``tensor<?xf32>``, its size read at entry, and it bounds the tile loop; the
    device code's comparison takes the value as an argument."""
    sized = generate_mlir(KERNELS.doubled_prefix.bind(CASES["doubled_prefix"][0](20)))
    run_filecheck(sized, """
        // CHECK: func.func @doubled_prefix(%x: tensor<64xf32>, %offsets: tensor<3xi64>, %out: tensor<?xf32>)
        // CHECK-SAME: -> (tensor<?xf32>)
        // CHECK: %[[N:.+]] = tensor.dim %out, %{{.+}} : tensor<?xf32>
        // CHECK: scf.for %{{.+}} = %{{.+}} to %[[N]] step
    """)
    masked = generate_mlir(KERNELS.masked_prefix.bind(CASES["masked_prefix"][0](20)))
    run_filecheck(masked, """
        // CHECK: func.func @masked_prefix(%x: tensor<64xf32>, %offsets: tensor<3xi64>, %n: i64,
        // CHECK: arith.trunci %n : i64 to i32
        // CHECK: arith.cmpi slt
    """)
    for text in (sized, masked):
        assert "8192" not in text


def test_a_value_the_trace_replaced_by_the_placeholder_is_refused_naming_the_lines() -> None:
    bound = KERNELS.lengths_as_tensor.bind(CASES["doubled_prefix"][0](20))
    message = (r"value read from tensor data at \S+data_dependent_kernels.py:\d+ \(`n = int\(offsets\[-1\].item\(\)\)`\) "
               r"was replaced at \S+:\d+ \(`scale = torch.tensor\(\[n, n\].*`\) by the number 8192")
    with pytest.raises(DataDependentValueError, match=message):
        generate_mlir(bound)
    with pytest.raises(DataDependentValueError, match=message):
        kernel("lengths_as_tensor", backend="mlir")(*CASES["doubled_prefix"][0](20))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_top_level_loop_bounded_by_a_tensor_reads_its_value_at_each_call(threads: int) -> None:
    """One compiled kernel for every bound: inside the tensors, none, negative (no tile runs,
    and nothing is written before ``out``, which lies between two guard regions) and past them
    (the tiles outside read 0 and write nothing)."""
    compiled = compile_kernel(KERNELS.incremented_up_to_tensor.bind((X, torch.zeros(64), torch.tensor(20))),
                              threads=threads)
    for n in (20, 64, 0, -40, 90):
        buffer = torch.full((64 + 2 * 48,), 7.0)
        out = buffer[48:-48]
        out.zero_()
        compiled(X, out, torch.tensor(n))
        expected = torch.zeros(64)
        expected[:max(0, min(n, 64))] = X[:max(0, min(n, 64))] + 1
        torch.testing.assert_close(out, expected, rtol=0, atol=0, msg=lambda m, n=n: f"n={n}: {m}")
        assert torch.all(buffer[:48] == 7.0) and torch.all(buffer[-48:] == 7.0), f"n={n}: a guard was written"


def test_a_host_slice_by_a_value_read_from_tensor_data_is_refused() -> None:
    bound = KERNELS.sliced_prefix.bind(CASES["doubled_prefix"][0](20))
    with pytest.raises(DataDependentValueError, match=r"host tensor 'prefix' is sliced by a value read from tensor "
                                                      r"data at \S+:\d+ \(`prefix = x\[:n\]`\).*fixed shape \(64,\)"):
        generate_mlir(bound)


def test_a_decision_made_with_the_placeholder_is_checked_at_each_call() -> None:
    """``sorted`` compares the two values once, when Helion binds the kernel; the compiled
    kernel is right for every call where that comparison comes out the same, and refuses
    the others."""
    compiled = compile_kernel(KERNELS.ordered_segment.bind((X, _offsets(3, 0))))
    for first, second in ((0, 3), (5, 40), (9, 9)):
        args = (X, torch.tensor([first, second, 0]))
        assert_matches(compiled(*args), expected("ordered_segment", True, args), dict(rtol=0, atol=0))
    with pytest.raises(ArgumentError, match=r"ordered_segment: Helion traced the kernel assuming `second >= first` about "
                                            r"the value read from tensor data at \S+:\d+ \(`first = int\(offsets\[0\]"
                                            r".item\(\)\)`\), which is false for this call \(first = 40, second = 5\)"):
        compiled(X, torch.tensor([40, 5, 0]))


def test_a_kernel_reading_tensor_data_bound_before_the_import_is_refused() -> None:
    """Without the record the import's hooks make while Helion binds, a pinned read cannot be
    told from a number of the kernel: such a kernel is refused rather than emitted."""
    fresh = helion.kernel(KERNELS.doubled_prefix.fn, config=KERNELS.doubled_prefix.configs[0])  # a bind of its own
    bound = fresh.bind(CASES["doubled_prefix"][0](20))
    tensor_reads_module._RECORDS.pop(bound.env)  # as if bound before `import helion_mlir`
    with pytest.raises(DataDependentValueError, match="bound before helion_mlir was imported"):
        generate_mlir(bound)


@functools.cache
def dynamic_example(name: str) -> tuple[Any, Any]:
    """An example's module and its kernel with static_shapes=False, compiled once."""
    module = load_example(Path(__file__).resolve().parent.parent / "examples" / f"{name}.py")
    twin = helion.kernel(module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False,
                         ignore_warnings=module.KERNEL.settings.ignore_warnings)
    return module, compile_kernel(twin.bind(module.make_args("ragged")))


@settings(max_examples=20)
@given(lengths=st.lists(st.integers(0, 13), min_size=1, max_size=6))
def test_jagged_to_padded_and_back_for_any_segment_lengths(lengths: list[int]) -> None:
    """Two examples whose sizes come from the offsets, each compiled once: padding then
    packing gives the values back, and each step matches torch."""
    to_padded_module, to_padded = dynamic_example("jagged_to_padded")
    to_jagged_module, to_jagged = dynamic_example("padded_to_jagged")
    values, offsets = to_padded_module.make_args("ragged", lengths=lengths)
    padded = to_padded(values, offsets)
    torch.testing.assert_close(padded, to_padded_module.reference(values, offsets), rtol=0, atol=0)
    packed = to_jagged(padded, offsets.to(torch.int32))
    torch.testing.assert_close(packed, to_jagged_module.reference(padded, offsets.to(torch.int32)), rtol=0, atol=0)
    torch.testing.assert_close(packed, values, rtol=0, atol=0)
