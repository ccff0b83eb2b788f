"""Every example kernel, lowered to every output type, emits a verified module and
computes the reference's numbers on CPU (divisible and ragged shapes, static and dynamic)."""

from __future__ import annotations

from typing import Any

import helion
import pytest
import torch
from examples_util import (
    HELION_NEEDS_STATIC_SHAPES,
    KNOWN_NUMERIC_GAPS,
    KNOWN_RUN_GAPS,
    assert_matches,
    bound_args,
    clone_kwargs,
    dynamic_shapes_kernel,
    example_call,
    example_names,
    f64_computations,
    load_example_by_name,
    register_cpu_matmul_dtype_overloads,
    uses_float64,
)

from helion_mlir import BatchReport, KernelCase, OutputType, check_kernels, generate_mlir
from helion_mlir.errors import ExecutionError
from helion_mlir.importer.node_importer import clear_import_cache, import_stats
from helion_mlir.generate import kernel_model
from helion_mlir.inliner.lexer import strip_locations
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.verify import parse_module, undefined_reads

OUTPUT_TYPES = [t.value for t in OutputType]



def _clone(args: tuple[Any, ...]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _assert_writes_before_reading(text: str, where: str) -> None:
    """No op of the module reads an element of a ``tensor.empty`` before it is written
    (undefined in MLIR: another compiler's allocator need not hand out zeros as the JIT's may)."""
    reads = undefined_reads(text)
    assert not reads, f"{where}: " + "\n".join(map(str, reads))


# Small inputs, so tile loops run in parallel whenever legal: the code large inputs get.
pytestmark = pytest.mark.usefixtures("parallel_even_when_small")


@pytest.fixture(scope="module", autouse=True)
def _matmul_overloads() -> None:
    register_cpu_matmul_dtype_overloads()


# Every output type on ragged shapes (the harder case); linalg and tosa on divisible ones too.
RUNS = [(t, "ragged") for t in OUTPUT_TYPES] + [("linalg-on-tensors", "divisible"), ("tosa", "divisible")]


@pytest.mark.parametrize(("output_type", "shape"), RUNS)
@pytest.mark.parametrize("name", example_names())
def test_example_runs_on_cpu_and_matches_reference(name: str, output_type: str, shape: str) -> None:
    mod = load_example_by_name(name)
    args, kwargs = example_call(mod, shape)
    bound = mod.KERNEL.bind(bound_args(mod.KERNEL, args, kwargs))
    key = (name, output_type)
    if key in KNOWN_RUN_GAPS:
        with pytest.raises(ExecutionError):
            compile_kernel(bound, output_type=output_type)
        return
    compiled = compile_kernel(bound, output_type=output_type)
    _assert_writes_before_reading(compiled.mlir, f"{name} [{output_type}, {shape}]")
    if not uses_float64(bound, args):  # statistics, integer division: in the kernel's own precision
        assert f64_computations(compiled.mlir) == [], f"{name} [{output_type}] computes in f64"
    got = compiled(*_clone(args), **clone_kwargs(kwargs))  # called like the kernel, keywords included
    expected = mod.reference(*_clone(args), **clone_kwargs(kwargs))
    if key in KNOWN_NUMERIC_GAPS:
        with pytest.raises(AssertionError):
            assert_matches(got, expected, mod.TOLERANCE, name)
        return
    assert_matches(got, expected, mod.TOLERANCE, f"{name} [{output_type}, {shape}]")


@pytest.mark.parametrize("name", sorted(set(example_names()) - HELION_NEEDS_STATIC_SHAPES))
def test_example_with_dynamic_shapes_runs_and_matches_reference(name: str) -> None:
    mod = load_example_by_name(name)
    kernel = dynamic_shapes_kernel(name)
    args, kwargs = example_call(mod, "ragged")
    compiled = compile_kernel(kernel.bind(bound_args(kernel, args, kwargs)))
    assert "?x" in compiled.mlir or "x?" in compiled.mlir, "symbolic host sizes must give dynamic dims"
    _assert_writes_before_reading(compiled.mlir, f"{name} [dynamic]")
    got = compiled(*_clone(args), **clone_kwargs(kwargs))
    assert_matches(got, mod.reference(*_clone(args), **clone_kwargs(kwargs)), mod.TOLERANCE, f"{name} [dynamic]")


def test_helion_refuses_dynamic_shapes_for_the_kernels_listed_as_static_only() -> None:
    for name in HELION_NEEDS_STATIC_SHAPES:
        mod = load_example_by_name(name)
        kernel = helion.kernel(mod.KERNEL.fn, config=mod.KERNEL.configs[0], static_shapes=False)
        with pytest.raises(Exception, match="specializ"):
            kernel.bind(mod.make_args("ragged"))


@pytest.fixture(scope="module")
def ragged_report() -> BatchReport:
    """Every example on ragged shapes, lowered to linalg-on-tensors, texts kept (with locations)."""
    cases = [KernelCase(n, m.KERNEL, bound_args(m.KERNEL, *example_call(m, "ragged")))
             for n, m in ((n, load_example_by_name(n)) for n in example_names())]
    return check_kernels(cases, ["linalg-on-tensors"], keep_text=True)


@pytest.mark.xdist_group("ragged-report")  # one worker lowers every example for both
def test_batch_report_counts_every_example_as_verified(ragged_report: BatchReport) -> None:
    report, cases = ragged_report, example_names()
    assert report.verified == len(cases) == report.emitted, report.table()
    assert all(r.nodes > 0 for r in report.results)
    assert f"{len(cases)} lowered: {len(cases)} emitted, {len(cases)} verified, 0 failed" in report.table()


@pytest.mark.xdist_group("ragged-report")  # one worker lowers every example for both
def test_every_example_without_locations_is_what_mlir_prints_without_debug_info(ragged_report: BatchReport) -> None:
    with mlir_session():
        for result in ragged_report.results:
            stripped = strip_locations(result.text)
            assert "loc(" not in stripped, result.label
            assert (parse_module(stripped).operation.get_asm()
                    == parse_module(result.text).operation.get_asm(enable_debug_info=False)), result.label


def test_generate_mlir_prints_locations_only_with_debug_info() -> None:
    mod = load_example_by_name("add")
    bound = mod.KERNEL.bind(mod.make_args("ragged"))
    located, plain = generate_mlir(bound, debug_info=True), generate_mlir(bound)
    assert f'loc("{mod.KERNEL.fn.__code__.co_filename}":' in located
    assert "loc(" not in plain and plain == strip_locations(located)


@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "stablehlo"])
def test_emission_lowers_all_aten_nodes_of_a_kernel_in_one_pipeline_run(output_type: str) -> None:
    mod = load_example_by_name("attention")
    bound = mod.KERNEL.bind(mod.make_args("ragged"))
    clear_import_cache()
    text = generate_mlir(bound, output_type=output_type)
    stats = import_stats()
    assert stats.lowering_runs == 1
    assert stats.misses >= 10 and stats.entries == stats.misses
    generate_mlir(bound, output_type=output_type)
    assert import_stats().lowering_runs == 1  # a second emission is served by the cache
    assert generate_mlir(bound, output_type=output_type) == text


def test_emissions_of_one_kernel_and_config_share_helions_codegen_graphs() -> None:
    mod = load_example_by_name("softmax_one_pass")
    bound = mod.KERNEL.bind(mod.make_args("ragged"))
    first, second = kernel_model(bound), kernel_model(bound)
    assert first.graphs is second.graphs  # built once, only read by the lowering
    rolled = kernel_model(bound, config=helion.Config(block_sizes=[8], reduction_loops=[32]))
    assert rolled.graphs is not first.graphs and rolled.rolled_blocks and not first.rolled_blocks
    assert generate_mlir(bound) == generate_mlir(bound)
