"""Code for CPUs without this one's bfloat16 instructions compiles and computes torch's numbers.

Integers become bfloat16 as torch makes them (through float32, rounded to nearest even) in a
form no CPU needs a compiler-rt helper for: IREE compiles it for a baseline x86-64 CPU and
for an AVX-512 CPU without AVX512-BF16, both of which this machine runs. The JIT compiles for
this CPU less the features ``HELION_MLIR_CPU_FEATURES`` names: no AVX512-BF16 dot products,
and every function's ``target-features`` without the feature.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from examples_util import load_example
from filecheck_util import run_filecheck
from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine

from helion_mlir import generate_mlir
from helion_mlir.errors import ExecutionError
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.engine import lower_module
from helion_mlir.runtime.cpu.host_cpu import CPU_FEATURES_VARIABLE, host_cpu
from helion_mlir.runtime.cpu.rewrites.llvm.target_features import leave_out_cpu_features
from helion_mlir.runtime.iree.engine import iree_available
from helion_mlir.runtime.kernel.compiled_kernel import (
    clear_kernel_cache,
    compile_kernel,
)

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "portability_kernels.py")
CONVERT = load_example(Path(__file__).resolve().parent / "kernels" / "low_precision_kernels.py").convert

# Code for these runs on this machine: a baseline x86-64 (no AVX, F16C or AVX512-BF16) and
# an AVX-512 CPU without AVX512-BF16 (IREE reported such Xeons as emeraldrapids less bf16).
CPUS_WITHOUT_BF16 = ["cpu:x86-64", "cpu:skylake-avx512"]
without_iree = pytest.mark.skipif(not iree_available(), reason="IREE is not installed (pip install -e '.[test]')")

# torch rounds int32 -> bfloat16 through float32: 2^24 + 2^16 + 1 becomes 2^24 (one rounding
# would give 2^24 + 2^17).
DOUBLE_ROUNDING = [2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**31 - 1, -(2**31)]


def _integers(dtype: torch.dtype) -> torch.Tensor:
    """Every value of 8- and 16-bit types, random and double-rounding values of int32."""
    if dtype == torch.bool:
        return torch.tensor([True, False] * 8)
    if dtype in (torch.int8, torch.uint8, torch.int16):
        info = torch.iinfo(dtype)
        return torch.arange(info.min, info.max + 1, dtype=torch.int32).to(dtype)
    gen = torch.Generator().manual_seed(3)
    random = torch.randint(-(2**31), 2**31 - 1, (4000,), generator=gen, dtype=torch.int64)
    return torch.cat([random, torch.tensor(DOUBLE_ROUNDING)]).to(dtype)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16)


def test_integer_to_bf16_rounds_through_f32_on_the_floats_bits() -> None:
    x = torch.zeros(64, dtype=torch.int32)
    text = generate_mlir(CONVERT.bind((x, torch.empty(64, dtype=torch.bfloat16))))
    run_filecheck(text, """
        // CHECK:      arith.sitofp %{{.*}} : i32 to f32
        // CHECK-NEXT: arith.bitcast %{{.*}} : f32 to i32
        // CHECK:      arith.trunci %{{.*}} : i32 to i16
        // CHECK-NEXT: arith.bitcast %{{.*}} : i16 to bf16
        // CHECK-NOT:  to bf16
    """)


def test_integers_promoted_to_bf16_inside_a_torch_op_round_on_the_bits_too() -> None:
    x, counts = torch.zeros(64, dtype=torch.bfloat16), torch.zeros(64, dtype=torch.int32)
    run_filecheck(generate_mlir(KERNELS.scaled_by_counts.bind((x, counts))), """
        // CHECK:      ^bb{{.*}}(%[[X:.*]]: bf16, %[[N:.*]]: i32, %{{.*}}: bf16):
        // CHECK-NEXT: %[[WIDE:.*]] = arith.sitofp %[[N]] : i32 to f32
        // CHECK-NEXT: arith.bitcast %[[WIDE]] : f32 to i32
        // CHECK:      %[[NARROW:.*]] = arith.bitcast %{{.*}} : i16 to bf16
        // CHECK-NEXT: arith.mulf %[[X]], %[[NARROW]] : bf16
        // CHECK-NOT:  to bf16
    """)


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_integer_to_bf16_on_the_jit_is_torchs_conversion_bit_for_bit(dtype: torch.dtype) -> None:
    x = _integers(dtype)
    got = compile_kernel(CONVERT.bind((x, torch.empty(x.shape, dtype=torch.bfloat16))))(
        x, torch.empty(x.shape, dtype=torch.bfloat16))
    assert torch.equal(_bits(got), _bits(x.to(torch.bfloat16)))


# One IREE compile per case: in CI int32 (random and double-rounding values) in linalg and
# int16 in stablehlo; with --iree-all every width, output type and CPU model.
_INTEGERS_TO_BF16_CI = [(torch.int32, "linalg-on-tensors", CPUS_WITHOUT_BF16[0]),
                        (torch.int16, "stablehlo", CPUS_WITHOUT_BF16[0])]
# The matmul in CI for the AVX-512 CPU without AVX512-BF16, with --iree-all for both in both.
_MATMUL_CI = [("linalg-on-tensors", CPUS_WITHOUT_BF16[1])]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    every = metafunc.config.getoption("--iree-all")
    if metafunc.function is test_integer_to_bf16_in_iree_on_a_cpu_without_bf16_is_torchs_conversion:
        cases = ([(d, t, c) for d in (torch.bool, torch.uint8, torch.int16, torch.int32)
                  for t in ("linalg-on-tensors", "stablehlo", "tosa", "raw") for c in CPUS_WITHOUT_BF16]
                 if every else _INTEGERS_TO_BF16_CI)
        metafunc.parametrize(("dtype", "output_type", "device"), cases)
    elif metafunc.function is test_bf16_times_int16_matmul_runs_in_iree_on_a_cpu_without_bf16:
        cases = ([(t, c) for t in ("linalg-on-tensors", "stablehlo") for c in CPUS_WITHOUT_BF16]
                 if every else _MATMUL_CI)
        metafunc.parametrize(("output_type", "device"), cases)


@pytest.mark.iree
@without_iree
def test_integer_to_bf16_in_iree_on_a_cpu_without_bf16_is_torchs_conversion(
        dtype: torch.dtype, output_type: str, device: str) -> None:
    # A direct sitofp to bf16 failed to link there: `undefined symbol: __truncsfbf2`.
    x = _integers(dtype)
    out = torch.empty(x.shape, dtype=torch.bfloat16)
    compiled = compile_kernel(CONVERT.bind((x, out)), output_type=output_type, runtime="iree", device=device)
    assert torch.equal(_bits(compiled(x, out)), _bits(x.to(torch.bfloat16)))


@pytest.mark.iree
@without_iree
def test_integers_promoted_to_bf16_in_linalg_run_in_iree_on_a_cpu_without_bf16() -> None:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(300, generator=gen).to(torch.bfloat16)
    counts = torch.randint(-(2**20), 2**20, (300,), generator=gen, dtype=torch.int32)
    compiled = compile_kernel(KERNELS.scaled_by_counts.bind((x, counts)), runtime="iree", device="cpu:x86-64")
    assert torch.equal(compiled(x, counts), x * counts)


@pytest.mark.iree
@without_iree
def test_integers_promoted_to_bf16_by_stablehlo_are_a_known_gap_on_a_cpu_without_bf16() -> None:
    # torch-mlir's stablehlo.convert i32 -> bf16 is left as it is; IREE lowers it to an
    # arith.sitofp to bf16 that needs compiler-rt (docs/downstream.md).
    x, counts = torch.zeros(64, dtype=torch.bfloat16), torch.zeros(64, dtype=torch.int32)
    with pytest.raises(ExecutionError, match="__truncsfbf2"):
        compile_kernel(KERNELS.scaled_by_counts.bind((x, counts)), output_type="stablehlo", runtime="iree",
                       device="cpu:x86-64")


@pytest.mark.iree
@without_iree
def test_bf16_times_int16_matmul_runs_in_iree_on_a_cpu_without_bf16(output_type: str, device: str) -> None:
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(37, 40, generator=gen).to(torch.bfloat16)
    w = torch.randint(-300, 300, (40, 29), generator=gen, dtype=torch.int16)
    compiled = compile_kernel(KERNELS.bf16_times_int16.bind((x, w)), output_type=output_type, runtime="iree",
                              device=device)
    expected = (x.float() @ w.to(torch.bfloat16).float()).to(torch.bfloat16)
    torch.testing.assert_close(compiled(x, w), expected, rtol=1e-2, atol=1e-2)


# -- the JIT for a CPU with fewer features -------------------------------------------------


@pytest.fixture
def without_bf16(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The JIT compiles for this CPU without AVX512-BF16."""
    monkeypatch.setenv(CPU_FEATURES_VARIABLE, "-avx512bf16")
    clear_kernel_cache()
    yield
    monkeypatch.delenv(CPU_FEATURES_VARIABLE)
    clear_kernel_cache()


def _matmul_bf16_module() -> tuple[str, tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(32, 64, generator=gen).to(torch.bfloat16)
    w = torch.randint(-50, 50, (64, 32), generator=gen, dtype=torch.int16)
    return generate_mlir(KERNELS.bf16_times_int16.bind((x, w))), (x, w)


def test_without_avx512_bf16_the_jit_uses_no_bf16_dot_products_and_says_so_on_every_function(
        without_bf16: None) -> None:
    assert not host_cpu().bf16_dot and host_cpu().removed == ("avx512bf16",)
    text, (x, w) = _matmul_bf16_module()
    lowered = lower_module(text, "bf16_times_int16")
    assert "dpbf16ps" not in lowered
    functions = [line for line in lowered.splitlines() if "llvm.func" in line]
    assert functions and all('target_features = #llvm.target_features<["-avx512bf16"]>' in f for f in functions)
    got = compile_kernel(KERNELS.bf16_times_int16.bind((x, w)))(x, w)
    torch.testing.assert_close(got, (x.float() @ w.to(torch.bfloat16).float()).to(torch.bfloat16),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.skipif(not host_cpu().bf16_dot, reason="the CPU lacks AVX512-BF16")
def test_with_avx512_bf16_the_jit_pairs_bf16_dot_products() -> None:
    text, _ = _matmul_bf16_module()
    assert "dpbf16ps" in lower_module(text, "bf16_times_int16")


def test_cpu_features_variable_takes_only_features_to_leave_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CPU_FEATURES_VARIABLE, "+avx512bf16")
    with pytest.raises(ValueError, match="leading '-'"):
        host_cpu()


_TRUNCATE = """
llvm.func @truncate(%x: vector<16xf32>, %out: !llvm.ptr) attributes {llvm.emit_c_interface} {
  %t = llvm.fptrunc %x : vector<16xf32> to vector<16xbf16>
  llvm.store %t, %out : vector<16xbf16>, !llvm.ptr
  llvm.return
}
"""


@pytest.mark.skipif(not host_cpu().bf16_dot or shutil.which("objdump") is None,
                    reason="needs a CPU with AVX512-BF16 and objdump")
@pytest.mark.parametrize("removed", [False, True])
def test_target_features_keep_llvm_from_bf16_instructions_the_cpu_has(
        removed: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if removed:
        monkeypatch.setenv(CPU_FEATURES_VARIABLE, "-avx512bf16")
    with mlir_session():
        module = ir.Module.parse(_TRUNCATE)
        leave_out_cpu_features(module)
        engine = ExecutionEngine(module, opt_level=2)
        engine.raw_lookup("truncate")
        engine.dump_to_object_file(str(tmp_path / "truncate.o"))
    code = subprocess.run(["objdump", "-d", str(tmp_path / "truncate.o")], capture_output=True, text=True,
                          check=True).stdout
    assert ("vcvtneps2bf16" in code) is not removed, code
