"""Properties: for any shape, block sizes and dtype a kernel admits, the kernel compiled
through MLIR computes what the reference computes.

Four representative kernels from ``examples/``: elementwise (add), a row reduction
(one-pass softmax), matmul and flash attention. Block sizes are drawn from powers of two,
as Helion's config space has them; shapes are drawn independently, so most are ragged.
"""

from __future__ import annotations

import math

import helion
import pytest
import torch
from examples_util import load_example_by_name, register_cpu_matmul_dtype_overloads
from hypothesis import given, settings
from hypothesis import strategies as st

from helion_mlir import ArgumentError
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel

POW2 = st.sampled_from([1, 2, 4, 8, 16, 32])
FLOATS = st.sampled_from([torch.float32, torch.bfloat16, torch.float16])
TOLERANCE = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
             torch.float16: dict(rtol=2e-2, atol=2e-2)}


def _with_config(name: str, **config: object) -> helion.Kernel:
    return helion.kernel(load_example_by_name(name).KERNEL.fn, config=helion.Config(**config))


def _randn(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture(scope="module", autouse=True)
def _matmul_overloads() -> None:
    register_cpu_matmul_dtype_overloads()


@settings(max_examples=12)
@given(rows=st.integers(1, 70), cols=st.integers(1, 70), block_m=POW2, block_n=POW2, dtype=FLOATS)
def test_elementwise_add_matches_torch_for_any_shape_block_and_dtype(rows, cols, block_m, block_n, dtype) -> None:
    x, y = _randn((rows, cols), dtype, 1), _randn((rows, cols), dtype, 2)
    got = compile_kernel(_with_config("add", block_sizes=[block_m, block_n]).bind((x, y)))(x, y)
    torch.testing.assert_close(got, x + y, **TOLERANCE[dtype])


@settings(max_examples=12)
@given(rows=st.integers(1, 40), cols=st.integers(1, 90), block=POW2, dtype=FLOATS)
def test_one_pass_softmax_matches_torch_for_any_shape_block_and_dtype(rows, cols, block, dtype) -> None:
    x = 3 * _randn((rows, cols), dtype, 3)
    got = compile_kernel(_with_config("softmax_one_pass", block_sizes=[block]).bind((x,)))(x)
    expected = torch.softmax(x.float(), dim=-1).to(dtype)
    torch.testing.assert_close(got, expected, **TOLERANCE[dtype])


@settings(max_examples=10)
@given(m=st.integers(1, 48), k=st.integers(1, 48), n=st.integers(1, 48),
       blocks=st.tuples(st.sampled_from([4, 8, 16, 32]), st.sampled_from([4, 8, 16, 32]), st.sampled_from([4, 8, 16, 32])))
def test_matmul_matches_torch_for_any_shape_and_blocks(m, k, n, blocks) -> None:
    x, y = _randn((m, k), torch.float32, 4), _randn((k, n), torch.float32, 5)
    got = compile_kernel(_with_config("matmul", block_sizes=list(blocks)).bind((x, y)))(x, y)
    torch.testing.assert_close(got, x @ y, rtol=1e-4, atol=1e-4)


@settings(max_examples=8)
@given(heads=st.integers(1, 3), seq_q=st.integers(1, 40), seq_k=st.integers(1, 40),
       head_dim=st.sampled_from([8, 16, 32]), block_m=st.sampled_from([8, 16, 32]), block_n=st.sampled_from([8, 16, 32]))
def test_flash_attention_matches_torch_for_any_shape_and_blocks(heads, seq_q, seq_k, head_dim, block_m, block_n) -> None:
    q, k, v = (_randn((heads, s, head_dim), torch.float32, seed) for s, seed in ((seq_q, 6), (seq_k, 7), (seq_k, 8)))
    scale = 1.0 / math.sqrt(head_dim)
    kernel = _with_config("attention", block_sizes=[1, block_m, block_n])
    got = compile_kernel(kernel.bind((q, k, v, scale)))(q, k, v, scale)
    expected = torch.softmax((q @ k.transpose(1, 2)) * scale, dim=-1) @ v
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_compiled_kernel_mutates_in_place_arguments_like_the_kernel() -> None:
    mod = load_example_by_name("matmul_split_k")
    args = mod.make_args("ragged")
    compiled = compile_kernel(mod.KERNEL.bind(args))
    mine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    result = compiled(*mine)
    torch.testing.assert_close(result, mod.reference(*args), **mod.TOLERANCE)


@pytest.mark.parametrize(
    ("bad_args", "message"),
    [
        (lambda x, y: (x,), "takes 2 arguments"),
        (lambda x, y: (x, y.double()), "dtype torch.float32"),
        (lambda x, y: (x, y[:, :5]), "size 100 in dimension 1"),
        (lambda x, y: (x, y[0]), "2 dimensions"),
        (lambda x, y: (x, 3.0), "must be a tensor"),
    ],
)
def test_bad_arguments_are_rejected_before_anything_runs(bad_args, message) -> None:
    mod = load_example_by_name("add")
    x, y = mod.make_args("ragged")
    compiled = compile_kernel(mod.KERNEL.bind((x, y)))
    with pytest.raises(ArgumentError, match=message):
        compiled(*bad_args(x, y))


def test_compile_kernel_is_cached_per_kernel_config_and_signature() -> None:
    mod = load_example_by_name("add")
    x, y = mod.make_args("ragged")
    first = compile_kernel(mod.KERNEL.bind((x, y)))
    assert compile_kernel(mod.KERNEL.bind((x, y))) is first
    assert compile_kernel(mod.KERNEL.bind((x, y)), output_type="tosa") is not first
    other = _with_config("add", block_sizes=[8, 8])
    assert compile_kernel(other.bind((x, y))) is not first
