"""Compiled kernels take every argument the kernel takes, and refuse, naming the parameter,
the values they were not compiled for.

What Helion specializes at bind time (strings, ``None`` for optional tensors, callables,
``hl.specialize``-d sizes and ints, module-level values) must equal the compiled values;
what it keeps symbolic (floats, ints, bools, items of tuples, closure cells of callables,
host-computed block sizes) may change from call to call without a new compilation.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from examples_util import bound_args, clone_args, example_call, load_example, load_example_by_name

from helion_mlir import ArgumentError, UnsupportedNodeError, generate_mlir
from helion_mlir.runtime.kernel.compiled_kernel import CompiledKernel, compile_kernel
from helion_mlir.runtime.kernel.host_code import HostCode

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "argument_kernels.py")
TUNING_KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "tuning_kernels.py")


def compiled_example(name: str, shape: str = "ragged") -> tuple[Any, CompiledKernel, tuple[Any, ...], dict[str, Any]]:
    module = load_example_by_name(name)
    args, kwargs = example_call(module, shape)
    return module, compile_kernel(module.KERNEL.bind(bound_args(module.KERNEL, args, kwargs))), args, kwargs


def test_compiled_kernel_is_called_like_the_kernel_with_keywords_and_defaults() -> None:
    module, compiled, (x, y), kwargs = compiled_example("smooth_l1_loss")
    expected = module.reference(x, y, **kwargs)
    torch.testing.assert_close(compiled(x, y, **kwargs), expected, **module.TOLERANCE)
    torch.testing.assert_close(compiled(x, y, kwargs["weight"], 1.0, "sum"), expected, **module.TOLERANCE)
    torch.testing.assert_close(compiled(input=x, target=y, reduction="sum", weight=kwargs["weight"]), expected,
                               **module.TOLERANCE)


def test_trailing_defaults_are_applied_to_a_positional_call() -> None:
    """layer_norm_affine(x, [cols], weight) leaves bias=None and eps=1e-5 to their defaults,
    exactly as passing them does; another eps is read at the call."""
    module, compiled, (x, shape, weight), _ = compiled_example("layer_norm_affine")
    short = compiled(x, shape, weight)
    torch.testing.assert_close(short, module.reference(x, shape, weight), **module.TOLERANCE)
    assert torch.equal(short, compiled(x, shape, weight, None, 1e-5))
    torch.testing.assert_close(compiled(x, shape, weight, None, 0.5), module.reference(x, shape, weight, None, 0.5),
                               **module.TOLERANCE)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c, x, y, w: c(x, y, weight=w, reduction="mean"),
         r"argument 'reduction' of smooth_l1_loss was 'sum' when the kernel was compiled, got 'mean'"),
        (lambda c, x, y, w: c(x, y, reduction="sum"), r"argument 'weight' of smooth_l1_loss must be a tensor, got None"),
        (lambda c, x, y, w: c(x, y, w, 1.0, "sum", 3), r"smooth_l1_loss takes 5 arguments .*too many positional"),
        (lambda c, x, y, w: c(x), r"smooth_l1_loss takes 5 arguments .*missing a required argument: 'target'"),
        (lambda c, x, y, w: c(x, y, w, "1.0", "sum"), r"argument 'beta' of smooth_l1_loss must be a float, got str '1.0'"),
    ],
)
def test_arguments_the_kernel_was_not_compiled_for_are_refused_naming_the_parameter(call: Any, message: str) -> None:
    _, compiled, (x, y), kwargs = compiled_example("smooth_l1_loss")
    with pytest.raises(ArgumentError, match=message):
        call(compiled, x, y, kwargs["weight"])


def test_values_that_passed_once_are_remembered_by_type_and_value() -> None:
    """Later calls with values that passed skip Helion's specialization key; 1 == 1.0 in
    Python, yet an int where the kernel took a float, or another string, is still refused."""
    module, compiled, (x, y), kwargs = compiled_example("smooth_l1_loss")
    weight = kwargs["weight"]
    for _ in range(2):
        torch.testing.assert_close(compiled(x, y, weight, 1.0, "sum"), module.reference(x, y, weight, 1.0, "sum"),
                                   **module.TOLERANCE)
    assert compiled._checks.accepted_values
    with pytest.raises(ArgumentError, match="argument 'beta' of smooth_l1_loss must be a float, got int 1"):
        compiled(x, y, weight, 1, "sum")
    with pytest.raises(ArgumentError, match="was 'sum' when the kernel was compiled, got 'mean'"):
        compiled(x, y, weight, 1.0, "mean")
    torch.testing.assert_close(compiled(x, y, weight, 0.5, "sum"), module.reference(x, y, weight, 0.5, "sum"),
                               **module.TOLERANCE)


def test_another_callable_than_the_compiled_one_is_refused_naming_the_parameter() -> None:
    module, compiled, args, _ = compiled_example("flex_attention")
    q, k, v, _score_mod, scale = args
    with pytest.raises(ArgumentError, match="argument 'score_mod' of flex_attention was function softcap when the "
                                            "kernel was compiled, got function relative_bias"):
        compiled(q, k, v, module.relative_bias, scale)


def test_hl_specialize_values_are_checked_against_the_bound_ones() -> None:
    x = torch.randn(37, 24)
    compiled = compile_kernel(KERNELS.repeat_rows.bind((x, 3)))
    fewer_rows = x[:21].clone()
    torch.testing.assert_close(compiled(fewer_rows, 3), fewer_rows * 3)  # the rows stay dynamic
    with pytest.raises(ArgumentError, match=r"argument 'x' of repeat_rows: x.size\(1\) was 24 .* got 32"):
        compiled(torch.randn(37, 32), 3)
    with pytest.raises(ArgumentError, match=r"argument 'repeats' of repeat_rows: repeats was 3 .* got 4"):
        compiled(x, 4)


def test_a_changed_module_level_value_is_refused_until_the_kernel_is_compiled_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, compiled, args, _ = compiled_example("linear_attention_chunked")
    monkeypatch.setattr(module, "SCALE", 0.25)
    with pytest.raises(ArgumentError, match=r"linear_attention_chunked was compiled with \S*SCALE = 0.125, "
                                            r"which is now 0.25"):
        compiled(*args)
    monkeypatch.undo()
    torch.testing.assert_close(compiled(*args), module.reference(*args), **module.TOLERANCE)


def test_runtime_block_size_follows_the_int_argument_it_is_computed_from() -> None:
    module, compiled, (a, b), _ = compiled_example("split_k_barrier")
    for split_k in (1, 3, 4, 8, 13):  # one compiled kernel: block_k = next_power_of_2(cdiv(k, split_k)) per call
        torch.testing.assert_close(compiled(a, b, split_k=split_k), module.reference(a, b), **module.TOLERANCE)


@functools.cache
def dynamic_twin(name: str) -> CompiledKernel:
    """The example with static_shapes=False, compiled once: one module serves every shape."""
    module = load_example_by_name(name)
    kernel = helion.kernel(module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False)
    args, kwargs = example_call(module, "ragged")
    return compile_kernel(kernel.bind(bound_args(kernel, args, kwargs)))


@settings(max_examples=25)
@given(m=st.integers(1, 40), k=st.integers(1, 300), n=st.integers(1, 40), split_k=st.integers(1, 70))
def test_split_k_with_a_runtime_k_block_matches_torch_for_any_shape_and_split(m: int, k: int, n: int,
                                                                              split_k: int) -> None:
    gen = torch.Generator().manual_seed(m * 1000 + k)
    a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
    torch.testing.assert_close(dynamic_twin("split_k_barrier")(a, b, split_k=split_k), a @ b, rtol=1e-4, atol=1e-3)


@settings(max_examples=25)
@given(rows=st.integers(1, 40), cols=st.integers(1, 200), num_chunks=st.integers(1, 9))
def test_runtime_column_tiles_hold_exactly_their_lanes_for_any_shape(rows: int, cols: int, num_chunks: int) -> None:
    module = load_example_by_name("chunk_means")
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows * 1000 + cols))
    got = dynamic_twin("chunk_means")(x, num_chunks=num_chunks)
    torch.testing.assert_close(got, module.reference(x, num_chunks), **module.TOLERANCE)


def test_closure_cells_of_a_callable_argument_are_read_at_each_call() -> None:
    module, compiled, args, _ = compiled_example("alibi_attention")
    q, k, v, score_mod = args
    for slopes, max_bias in ((score_mod.slopes * 3.0, 0.5), (-score_mod.slopes, 8.0)):
        other = module.make_alibi(slopes, max_bias)  # same code, new cell values: the same bound kernel
        assert module.KERNEL.bind((q, k, v, other, None)) is compiled.bound
        torch.testing.assert_close(compiled(q, k, v, other), module.reference(q, k, v, other), **module.TOLERANCE)


def test_tuple_items_and_floats_are_read_at_each_call() -> None:
    module, compiled, (x,), kwargs = compiled_example("bias_activation")
    for clamp in ((-1.0, 1.0), (0.5, 0.75)):
        got = compiled(x, bias=kwargs["bias"], activation="silu", clamp=clamp)
        torch.testing.assert_close(got, module.reference(x, kwargs["bias"], "silu", clamp=clamp), **module.TOLERANCE)


def test_bool_item_of_a_tuple_argument_is_an_i1_argument_the_device_code_branches_on() -> None:
    x = torch.randn(37, 48)
    bound = KERNELS.rms_norm_options.bind((x, (1e-5, 2.0, True)))
    assert "%options_item_2: i1" in generate_mlir(bound)
    compiled = compile_kernel(bound)
    for options in ((1e-5, 2.0, True), (1e-3, 0.5, False)):
        torch.testing.assert_close(compiled(x, options), KERNELS.rms_norm_options_reference(x, options),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["split_k_tunable", "alibi_attention", "bias_activation", "linear_attention_chunked"])
def test_host_code_from_the_kernel_source_supplies_the_same_values(name: str) -> None:
    module, compiled, args, kwargs = compiled_example(name)
    expected = compiled(*clone_args(args), **kwargs)
    compiled.host = HostCode.from_kernel_source(compiled.bound, compiled.config)  # Helion's codegen not used
    torch.testing.assert_close(compiled(*clone_args(args), **kwargs), expected, rtol=0, atol=0)


def test_a_symbol_without_origin_is_refused_with_what_to_do() -> None:
    bound = KERNELS.decayed_row_sum.bind((torch.randn(16, 32),))
    with pytest.raises(UnsupportedNodeError, match="Helion recorded no origin .* Compute the value into a host "
                                                   "variable before the tile loops"):
        generate_mlir(bound)


def test_errors_of_the_compiled_function_name_the_host_value_not_its_position() -> None:
    """A value the host code computes reaches the compiled function unchecked by the kernel's
    own argument checks; when it does not fit, the error names it as the host code does."""
    x = torch.arange(-20, 20, dtype=torch.int64) * 977
    compiled = compile_kernel(KERNELS.low_bits.bind((x, 8)))
    for bits in (8, 3, 63):
        torch.testing.assert_close(compiled(x, bits), x & ((1 << bits) - 1))
    with pytest.raises(ArgumentError, match=r"^host value 'mask' of low_bits \(computed by its host code\), passed as "
                                            r"%mask: i64: 18446744073709551615 does not fit in i64$"):
        compiled(x, 64)


def test_tunable_in_device_code_is_the_configs_value() -> None:
    """``hl.register_tunable``'s value, used as a tile extent in device code, is the config's
    (the fragment's default when the config leaves it out): a constant of the module."""
    kernel = helion.kernel(TUNING_KERNELS.repeated_copy)
    x = torch.randn(40)
    bound = kernel.bind((x,))
    for config, trips in ((helion.Config(block_sizes=[16], repeats=1), 1), (helion.Config(block_sizes=[16]), 64)):
        text = generate_mlir(bound, config=config)
        assert f"arith.constant {trips} : index" in text
        torch.testing.assert_close(compile_kernel(bound, config=config)(x), x * 2.0)
