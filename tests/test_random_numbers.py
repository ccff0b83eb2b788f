"""Random numbers in kernels, bit for bit as Helion's reference mode draws them.

Helion traces ``hl.rand``, ``hl.randint``, ``hl.rand4x`` and torch's random ops as its Philox
generator in ATen integer ops; integer negation is lowered exactly (torch-mlir's linalg
backend negated through f32, one f32 step off for magnitudes above 2^24, which moved one
uniform number in a few dozen by one ulp and most ``randint`` draws). The seeds of torch's
random ops (``torch.rand_like``, ``torch.randn``) are a buffer the host code draws from torch's
generator at each call, element ``i`` as reference mode draws it on CPU, leaving the
generator where reference mode leaves it. Compared with reference mode under configs from
Helion's generator, static and dynamic shapes, ragged and divisible sizes.
"""

from __future__ import annotations

import functools
import string
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from config_fuzz import random_configs
from examples_util import load_example
from filecheck_util import run_filecheck

from helion._compiler.rng_utils import philox_rand_ref
from torch._inductor import inductor_prims

from helion_mlir import CompiledKernel, compile_kernel, generate_mlir
from helion_mlir.runtime.kernel.host_code import HostCode
from helion_mlir.runtime.reference import reference_kernel

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "random_kernels.py")
SSA = "[A-Za-z0-9_#]+"
SHAPES = {"ragged": (37, 45), "divisible": (32, 64)}


@functools.cache
def kernel(name: str, static: bool) -> helion.Kernel:
    found = getattr(KERNELS, name)
    return found if static else helion.kernel(found.fn, configs=list(found.configs), static_shapes=False)


def _call(name: str, shape: str) -> tuple[Any, ...]:
    x = torch.randn(*SHAPES[shape], generator=torch.Generator().manual_seed(7))
    return {"dropout": (x, 0.3, 1234), "jitter": (x, 99), "strided_stream": (x, 31415), "noise_like": (x,)}[name]


def _outputs(result: Any) -> tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)


def _run_both(name: str, static: bool, args: tuple[Any, ...], compiled: CompiledKernel
              ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """The compiled kernel's and reference mode's results from the same generator state, each
    followed by a draw from the generator (where the call left it)."""
    torch.manual_seed(2026)
    got = _outputs(compiled(*args)) + (torch.rand(3),)
    torch.manual_seed(2026)
    want = _outputs(reference_kernel(kernel(name, static))(*args)) + (torch.rand(3),)
    return got, want


def _assert_same_bits(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...], what: str) -> None:
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert torch.equal(a, b), f"{what}, output {i}: {(a != b).sum().item()} of {a.numel()} values differ"


def _configs(name: str, static: bool) -> list[helion.Config]:
    """Configs from Helion's generator: two with static shapes (ragged sizes), one with dynamic
    shapes (one compiled kernel for every size)."""
    bound = kernel(name, static).bind(_call(name, "ragged"))
    return random_configs(bound, seed=len(name) + 2 * static, count=2 if static else 1)


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", ["dropout", "jitter", "strided_stream"])
def test_explicitly_seeded_draws_match_reference_mode_bit_for_bit_under_generated_configs(
        name: str, static: bool) -> None:
    for config in _configs(name, static):
        for shape in ["ragged"] if static else sorted(SHAPES):
            args = _call(name, shape)
            compiled = compile_kernel(kernel(name, static).bind(args), config=config, threads=2)
            got, want = _run_both(name, static, args, compiled)
            _assert_same_bits(got, want, f"{name} {shape} static={static} {config}")


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_torch_random_ops_draw_their_seeds_per_call_as_reference_mode_does(static: bool) -> None:
    """``rand_like`` bit for bit, ``randn`` (Box-Muller through log, cos and sqrt) within 1e-6;
    the generator ends where reference mode leaves it, so the next call draws new seeds."""
    args = _call("noise_like", "ragged")
    (config,) = random_configs(kernel("noise_like", static).bind(args), seed=3 + static, count=1)
    compiled = compile_kernel(kernel("noise_like", static).bind(args), config=config, threads=2)
    (uniform, normal, after), (uniform_ref, normal_ref, after_ref) = _run_both("noise_like", static, args, compiled)
    _assert_same_bits((uniform, after), (uniform_ref, after_ref), f"noise_like static={static} {config}")
    torch.testing.assert_close(normal, normal_ref, rtol=1e-6, atol=1e-6)
    torch.manual_seed(5)
    first, second = compiled(*args)[0], compiled(*args)[0]
    torch.manual_seed(5)
    assert not torch.equal(first, second) and torch.equal(compiled(*args)[0], first)


def test_rand_like_is_helions_philox_of_the_seed_drawn_from_the_cpu_generator() -> None:
    """Element ``i`` (row-major) of ``torch.rand_like`` is Helion's Philox reference at offset
    ``i`` for the seed ``inductor_prims.seeds`` draws on the CPU first, over ragged tiles."""
    args = _call("noise_like", "ragged")
    compiled = compile_kernel(kernel("noise_like", True).bind(args), threads=2)
    torch.manual_seed(901)
    seed = int(inductor_prims.seeds(1, torch.device("cpu"))[0])
    torch.manual_seed(901)
    uniform, _normal = compiled(*args)
    expected = philox_rand_ref(seed, torch.arange(uniform.numel(), dtype=torch.int64)).reshape_as(uniform)
    _assert_same_bits((uniform,), (expected,), "noise_like")


def test_host_code_from_the_kernel_source_draws_the_seeds_as_helions_does() -> None:
    """When Helion's code generator fails, the host code comes from the kernel's source; it
    draws the seeds itself, first thing, as Helion's host code does."""
    args = _call("noise_like", "ragged")
    compiled = compile_kernel(kernel("noise_like", True).bind(args), threads=2)
    generated = compiled.host
    compiled.host = HostCode.from_kernel_source(compiled.bound, compiled.config, compiled.model.rng_seed_count)
    try:
        (uniform, _normal, after), (uniform_ref, _normal_ref, after_ref) = _run_both("noise_like", True, args, compiled)
    finally:
        compiled.host = generated  # the compiled kernel is cached
    _assert_same_bits((uniform, after), (uniform_ref, after_ref), "noise_like, host code from the kernel source")


def test_the_seed_buffer_is_an_argument_and_each_draw_reads_its_slot() -> None:
    text = generate_mlir(kernel("noise_like", True).bind(_call("noise_like", "ragged")))
    run_filecheck(text, string.Template("""
        // CHECK-LABEL: func.func @noise_like(%x: tensor<37x45xf32>, %uniform: tensor<37x45xf32>, %normal: tensor<37x45xf32>, %rng_seed_buffer: tensor<2xi64>)
        // CHECK:       tensor.extract_slice %rng_seed_buffer[0] [1] [1] : tensor<2xi64> to tensor<i64>
        // CHECK:       tensor.extract_slice %rng_seed_buffer[1] [1] [1] : tensor<2xi64> to tensor<i64>
    """).substitute(V=SSA))
