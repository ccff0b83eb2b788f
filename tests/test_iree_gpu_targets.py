"""The examples' modules compile with IREE for GPUs, which need no GPU to compile for: CUDA
(sm_80, sm_89), ROCm (gfx942) and Vulkan (rdna3); where this machine has such a GPU, they run
there and give Helion's reference numbers.

Compiling every example for every target takes about an hour on one core (docs/downstream.md),
so CI compiles a representative subset, one example per kind of kernel, each for one target
(:data:`REPRESENTATIVE`); ``--iree-all`` compiles every example, linalg-on-tensors and
stablehlo, for every target. Each known gap is listed with a pattern of its error, so that a
gap that closes or changes fails its test.
"""

from __future__ import annotations

import pytest

from examples_util import example_names, load_example_by_name, run_through_iree
from helion_mlir.errors import ExecutionError
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.iree.devices import IreeDevice
from helion_mlir.runtime.iree.engine import device_available, iree_available

pytestmark = [
    pytest.mark.iree,
    pytest.mark.skipif(not iree_available(), reason="IREE is not installed (pip install -e '.[test]')"),
]

TARGETS = ["cuda:sm_80", "cuda:sm_89", "rocm:gfx942", "vulkan:rdna3"]
# CI's subset: one compile per kind of kernel, the targets spread over them (an elementwise
# stablehlo module, a row reduction, a matmul, loops over data-dependent ranges, a float8
# kernel through ROCm's small-float emulation, a bfloat16 matmul).
REPRESENTATIVE = [
    ("add", "stablehlo", "vulkan:rdna3"),
    ("rms_norm", "linalg-on-tensors", "cuda:sm_80"),
    ("matmul", "linalg-on-tensors", "rocm:gfx942"),
    ("jagged_mean", "linalg-on-tensors", "vulkan:rdna3"),
    ("fp8_quantize", "linalg-on-tensors", "rocm:gfx942"),
    ("matmul_bf16", "linalg-on-tensors", "cuda:sm_89"),
]

_NO_F4_SLICES = "non-full load of unsupported element type"
# Known gaps of IREE 3.13 (docs/downstream.md): (example, device or device kind) -> error pattern.
KNOWN_GPU_GAPS = {
    # IREE refuses a slice of a sub-byte (float4_e2m1fn_x2) tensor inside a dispatch, on any target.
    **{("nvfp4_gemv", kind): _NO_F4_SLICES for kind in ("cuda", "rocm", "vulkan")},
    # IREE's CUDA path lowers no float8 truncation and no float4 extension (sm_89 has float8
    # conversion instructions, sm_80 none: there the f8 extension fails too); its small-float
    # emulation serves ROCm. The f8 arith ops reach LLVM translation.
    ("fp8_quantize", "cuda"): "missing `LLVMTranslationDialectInterface` registration .* arith.truncf",
    ("nvfp4_gemv_grouped", "cuda"): "LLVM Translation failed for operation: builtin.unrealized_conversion_cast",
    ("fp8_scaled_gemm", "cuda:sm_80"): "LLVM Translation failed for operation: builtin.unrealized_conversion_cast",
    # IREE's SPIR-V code generation has no bfloat16 (a bitcast to vector<4xbf16> does not
    # legalize, and the cooperative-matrix loads take no bf16 memref), and its rdna3 matrix
    # path fails on the float16 attention's second matmul.
    ("matmul_bf16", "vulkan"): "'gpu.subgroup_mma_load_matrix' op operand #0 must be memref of",
    ("int4_gemm", "vulkan"): "failed to legalize operation 'vector.bitcast'",
    ("attention_causal", "vulkan"): "failed conversion to GPU subgroup MMA ops",
}


def _gap(name: str, device: IreeDevice) -> str | None:
    return KNOWN_GPU_GAPS.get((name, str(device))) or KNOWN_GPU_GAPS.get((name, device.kind.value))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if {"name", "output_type", "target"} <= set(metafunc.fixturenames):
        cases = ([(name, output_type, target) for name in example_names()
                  for output_type in ("linalg-on-tensors", "stablehlo") for target in TARGETS]
                 if metafunc.config.getoption("--iree-all") else REPRESENTATIVE)
        metafunc.parametrize(("name", "output_type", "target"), cases)


def test_example_compiles_for_the_gpu_target_and_runs_there_when_one_is_present(
        name: str, output_type: str, target: str) -> None:
    device = IreeDevice.parse(target)
    module = load_example_by_name(name)
    run_through_iree(module.KERNEL, module, output_type, f"{name} [{output_type}, IREE on {device}]",
                     compile_gap=_gap(name, device), device=device)


def test_a_gpu_module_compiles_without_the_gpu_and_calling_it_says_what_is_missing() -> None:
    device = next((IreeDevice.parse(t) for t in TARGETS if not device_available(IreeDevice.parse(t))), None)
    if device is None:
        pytest.skip("every GPU driver finds a GPU here")
    module = load_example_by_name("add")
    args = module.make_args("ragged")
    compiled = compile_kernel(module.KERNEL.bind(args), runtime="iree", device=device)
    with pytest.raises(ExecutionError, match=rf"IREE's '{device.driver}' driver has no device here.*compiled"):
        compiled(*args)


@pytest.mark.parametrize(("spec", "device", "flags"), [
    (None, IreeDevice(), ("--iree-llvmcpu-target-cpu=host",)),
    ("cpu:skylake-avx512", IreeDevice.parse("cpu:skylake-avx512"), ("--iree-llvmcpu-target-cpu=skylake-avx512",)),
    ("cuda", IreeDevice.parse("cuda:sm_80"), ("--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80")),
    ("ROCM", IreeDevice.parse("rocm:gfx942"), ("--iree-rocm-target=gfx942",
                                               "--iree-llvmgpu-enable-small-float-emulation")),
    ("vulkan:rdna3", IreeDevice.parse("vulkan"), ("--iree-hal-target-device=vulkan", "--iree-vulkan-target=rdna3")),
])
def test_devices_are_written_kind_and_target_and_select_irees_flags(spec: str | None, device: IreeDevice,
                                                                   flags: tuple[str, ...]) -> None:
    parsed = IreeDevice.parse(spec)
    assert parsed == device and set(flags) <= set(parsed.compile_flags())


@pytest.mark.parametrize("spec", ["tpu", "cuda:sm_80:x", "cuda:"])
def test_a_device_iree_does_not_know_is_refused_naming_the_choices(spec: str) -> None:
    with pytest.raises(ValueError, match="cpu, cuda, rocm, vulkan|KIND\\[:TARGET\\]"):
        IreeDevice.parse(spec)


def test_a_device_needs_the_iree_runtime() -> None:
    module = load_example_by_name("add")
    with pytest.raises(ValueError, match="runtime='iree'"):
        compile_kernel(module.KERNEL.bind(module.make_args("ragged")), device="cuda")

