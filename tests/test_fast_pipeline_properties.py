"""Properties: the fast CPU pipeline computes what the plain one computes, for any shape,
block sizes and thread count.

Six kernels from ``examples/`` cover what the fast pipeline changes: elementwise tiles
(add), row reductions (one-pass softmax with ``exp``, layer norm, RMS norm), matmul tiles
accumulating in place, and flash attention (batched matmuls, ``exp2``, loop-carried
tiles). The work threshold below which tile loops stay sequential is set to zero here, so
that even the small drawn shapes run their tiles on parallel workers. Elementwise results
must be identical; reductions and matmuls may differ by the rounding of a different
summation order (and ``exp``/``exp2`` by the polynomial's 2 ulp).
"""

from __future__ import annotations

import math

import helion
import pytest
import torch
from examples_util import load_example_by_name, register_cpu_matmul_dtype_overloads
from kernels import math_kernels
from hypothesis import given, settings
from hypothesis import strategies as st

from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel

POW2 = st.sampled_from([1, 2, 4, 8, 16, 32, 64])
THREADS = st.sampled_from([1, 2])
CLOSE = dict(rtol=1e-5, atol=1e-5)


pytestmark = pytest.mark.usefixtures("parallel_even_when_small")


@pytest.fixture(scope="module", autouse=True)
def _matmul_overloads() -> None:
    register_cpu_matmul_dtype_overloads()


def _with_config(name: str, static_shapes: bool = True, **config: object) -> helion.Kernel:
    return helion.kernel(load_example_by_name(name).KERNEL.fn, config=helion.Config(**config),
                         static_shapes=static_shapes)


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _both(kernel: helion.Kernel, args: tuple[object, ...], threads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(fast, plain) results on fresh copies of ``args``."""
    results = []
    for pipeline in ("fast", "plain"):
        fresh = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        compiled = compile_kernel(kernel.bind(tuple(fresh)), pipeline=pipeline, threads=threads)
        results.append(compiled(*fresh))
    return results[0], results[1]


@settings(max_examples=5)
@given(rows=st.integers(1, 64), cols=st.integers(1, 600), block=POW2, threads=THREADS)
def test_rms_norm_rows_match_the_plain_pipeline(rows, cols, block, threads) -> None:
    args = (_randn(rows, cols, seed=13), _randn(cols, seed=14), 1e-5)
    fast, plain = _both(_with_config("rms_norm", block_sizes=[block]), args, threads)
    torch.testing.assert_close(fast, plain, **CLOSE)


@settings(max_examples=8)
@given(rows=st.integers(1, 150), cols=st.integers(1, 150), block_m=POW2, block_n=POW2, threads=THREADS)
def test_elementwise_tiles_are_identical_to_the_plain_pipeline(rows, cols, block_m, block_n, threads) -> None:
    x, y = _randn(rows, cols, seed=1), _randn(rows, cols, seed=2)
    fast, plain = _both(_with_config("add", block_sizes=[block_m, block_n]), (x, y), threads)
    assert torch.equal(fast, plain)


@settings(max_examples=6)
@given(rows=st.integers(1, 80), cols=st.integers(1, 300), block=POW2, threads=THREADS)
def test_softmax_rows_match_the_plain_pipeline(rows, cols, block, threads) -> None:
    x = 3 * _randn(rows, cols, seed=3)
    fast, plain = _both(_with_config("softmax_one_pass", block_sizes=[block]), (x,), threads)
    torch.testing.assert_close(fast, plain, **CLOSE)


@settings(max_examples=5)
@given(rows=st.integers(1, 64), cols=st.integers(1, 200), block=POW2, threads=THREADS)
def test_layer_norm_rows_match_the_plain_pipeline(rows, cols, block, threads) -> None:
    args = (_randn(rows, cols, seed=4), _randn(cols, seed=5), _randn(cols, seed=6), 1e-5)
    fast, plain = _both(_with_config("layer_norm", block_sizes=[block]), args, threads)
    torch.testing.assert_close(fast, plain, **CLOSE)


@settings(max_examples=8)
@given(rows=st.integers(1, 80), cols=st.integers(1, 300), block=POW2, threads=THREADS,
       name=st.sampled_from(["softmax_one_pass", "rms_norm", "layer_norm", "exp"]))
def test_dynamic_shapes_rows_vectorized_with_masks_match_the_plain_pipeline(rows, cols, block, threads, name) -> None:
    """static_shapes=False: the row length is known only at run time, so vector steps past
    its end are masked."""
    args = {
        "softmax_one_pass": (3 * _randn(rows, cols, seed=7),),
        "rms_norm": (_randn(rows, cols, seed=8), _randn(cols, seed=9), 1e-5),
        "layer_norm": (_randn(rows, cols, seed=10), _randn(cols, seed=11), _randn(cols, seed=12), 1e-5),
        "exp": (_randn(rows, cols, seed=13),),
    }[name]
    fast, plain = _both(_with_config(name, static_shapes=False, block_sizes=[block]),
                        args, threads)
    torch.testing.assert_close(fast, plain, **CLOSE)


@settings(max_examples=6)
@given(m=st.integers(1, 130), k=st.integers(1, 130), n=st.integers(1, 130),
       blocks=st.tuples(st.sampled_from([8, 16, 32, 64]), st.sampled_from([8, 16, 32, 64]), st.sampled_from([8, 16, 64])),
       threads=THREADS)
def test_matmul_tiles_match_the_plain_pipeline(m, k, n, blocks, threads) -> None:
    x, y = _randn(m, k, seed=7), _randn(k, n, seed=8)
    fast, plain = _both(_with_config("matmul", block_sizes=list(blocks)), (x, y), threads)
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-4)


@settings(max_examples=5)
@given(m=st.integers(1, 100), k=st.integers(1, 100), n=st.integers(1, 100),
       blocks=st.tuples(st.sampled_from([8, 16, 64]), st.sampled_from([16, 32, 64]), st.sampled_from([8, 16, 64])),
       threads=THREADS)
def test_bf16_matmul_tiles_match_the_plain_pipeline(m, k, n, blocks, threads) -> None:
    """bf16 operands, f32 accumulation (AVX512-BF16 dot products of k pairs where the host
    has them): the same bf16 result but for a rounding moved by another summation order."""
    x, y = _randn(m, k, seed=15).bfloat16(), _randn(k, n, seed=16).bfloat16()
    fast, plain = _both(_with_config("matmul_bf16", block_sizes=list(blocks)), (x, y), threads)
    torch.testing.assert_close(fast, plain, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(fast, (x.double() @ y.double()).bfloat16(), rtol=1e-2, atol=1e-2)


@settings(max_examples=3)
@given(heads=st.integers(1, 3), seq_q=st.integers(1, 70), seq_k=st.integers(1, 70),
       head_dim=st.sampled_from([16, 32]), block_m=st.sampled_from([16, 32]), block_n=st.sampled_from([16, 32]),
       threads=THREADS)
def test_flash_attention_matches_the_plain_pipeline(heads, seq_q, seq_k, head_dim, block_m, block_n, threads) -> None:
    q, k, v = (_randn(heads, s, head_dim, seed=seed) for s, seed in ((seq_q, 9), (seq_k, 10), (seq_k, 11)))
    args = (q, k, v, 1.0 / math.sqrt(head_dim))
    fast, plain = _both(_with_config("attention", block_sizes=[1, block_m, block_n]), args, threads)
    torch.testing.assert_close(fast, plain, **CLOSE)


@settings(max_examples=8)
@given(rows=st.integers(1, 70), cols=st.integers(1, 200), blocks=st.tuples(POW2, POW2), threads=THREADS,
       name=st.sampled_from(sorted(math_kernels.KERNELS)), scale=st.sampled_from([0.01, 1.0, 30.0, 1e4, 1e6]),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]), static_shapes=st.booleans())
def test_math_functions_match_the_plain_pipeline(rows, cols, blocks, threads, name, scale, dtype, static_shapes) -> None:
    """Vector math (polynomials, libmvec calls; masked rows with static_shapes=False)
    against the plain pipeline's scalar libm calls: a few float32 ulps apart, or a bf16
    rounding where that moves a result."""
    x = (scale * _randn(rows, cols, seed=14)).to(dtype)
    kernel = helion.kernel(math_kernels.KERNELS[name], config=helion.Config(block_sizes=list(blocks)),
                           static_shapes=static_shapes)
    fast, plain = _both(kernel, (x,), threads)
    close = CLOSE if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(fast, plain, **close)
