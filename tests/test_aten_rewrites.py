"""ATen forms lowered before torch-mlir (``lowering/rules/aten_rewrites.py``).

``prims.iota`` with a runtime start, ``aten.scalar_tensor`` of a runtime scalar, and
``aten.mean.dim`` with ``dtype=`` or over a dynamic dimension: torch-mlir's tosa backend
refuses them (and for a mean over a dynamic dimension with ``dtype=`` divided by a wrong
count), its linalg and stablehlo backends refuse a mean with ``dtype=``; integer ``aten.neg``:
its linalg backend negates through f32, its tosa backend refuses int64. FileCheck pins
the forms emitted instead; the numbers are compared with torch for every output type,
also with ``static_shapes=False``.
"""

from __future__ import annotations

import functools
import string
from pathlib import Path
from typing import Any

import pytest
import torch
from examples_util import clone_args, dynamic_shapes_kernel, load_example, load_example_by_name
from filecheck_util import run_filecheck

from helion_mlir import compile_kernel, generate_mlir

SSA = "[A-Za-z0-9_#]+"
OUTPUT_TYPES = ["linalg-on-tensors", "tosa", "stablehlo", "raw"]
NODE_KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "node_kernels.py")


def filecheck(text: str, patterns: str) -> None:
    run_filecheck(text, string.Template(patterns).substitute(V=SSA))


@functools.cache
def emit(name: str, shape: str, output_type: str) -> str:
    module = load_example_by_name(name)
    return generate_mlir(module.KERNEL.bind(module.make_args(shape)), output_type=output_type)


def dynamic_kernel(name: str) -> Any:
    return load_example_by_name(name), dynamic_shapes_kernel(name)


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_iota_with_a_runtime_start_is_an_index_generic_for_every_output_type(output_type: str) -> None:
    # alibi_bias: hl.arange(tile_m.begin, tile_m.begin + tile_m.block_size); tosa refused it.
    filecheck(emit("alibi_bias", "ragged", output_type), """
        // CHECK:      scf.for %{{$V}} =
        // CHECK:      scf.for %[[IVM:$V]] =
        // CHECK:      linalg.generic {{.*}} outs(%{{$V}} : tensor<16xi32>) {
        // CHECK-NEXT:   ^bb0(%{{$V}}: i32
        // CHECK-NEXT:     %[[I:$V]] = linalg.index 0 : index
        // CHECK-NEXT:     %[[STEP:$V]] = arith.muli %[[I]], %{{$V}} : index
        // CHECK-NEXT:     %[[POS:$V]] = arith.addi %[[IVM]], %[[STEP]] : index
        // CHECK-NEXT:     %[[CAST:$V]] = arith.index_cast %[[POS]] : index to i32
        // CHECK-NEXT:     linalg.yield %[[CAST]] : i32
        // CHECK-NOT:  prims.iota
    """)


def test_scalar_tensor_of_a_runtime_scalar_is_the_converted_scalar_in_a_0d_tensor() -> None:
    # masked_fill_value: torch.where(mask, scores, mask_value) with a float argument.
    filecheck(emit("masked_fill_value", "ragged", "tosa"), """
        // CHECK-LABEL: func.func @masked_fill_value(
        // CHECK-SAME:    %mask_value: f64
        // CHECK:         %[[F32:$V]] = arith.truncf %mask_value : f64 to f32
        // CHECK-NEXT:    %[[FILL:$V]] = tensor.from_elements %[[F32]] : tensor<f32>
        // CHECK:         "tosa.reshape"(%[[FILL]],
        // CHECK:         "tosa.select"
        // CHECK-NOT:     NumToTensor
    """)


def test_mean_over_a_clipped_ragged_tile_divides_the_sum_by_the_width_read_at_run_time() -> None:
    # window_mean_pool: the last 8-column window of a ragged row is narrower.
    filecheck(emit("window_mean_pool", "ragged", "tosa"), """
        // CHECK:      %[[VALID:$V]] = tensor.extract_slice %{{$V}}[0, 0] [16, %{{$V}}] [1, 1] : tensor<16x8xf32> to tensor<16x?xf32>
        // CHECK:      "tosa.reduce_sum"(%[[VALID]]) <{axis = 1 : i32}> : (tensor<16x?xf32>) -> tensor<16x1xf32>
        // CHECK:      %[[WIDTH:$V]] = tensor.dim %[[VALID]], %{{$V}} : tensor<16x?xf32>
        // CHECK-NEXT: %[[I64:$V]] = arith.index_cast %[[WIDTH]] : index to i64
        // CHECK-NEXT: %[[N:$V]] = arith.sitofp %[[I64]] : i64 to f32
        // CHECK-NEXT: %[[NT:$V]] = tensor.from_elements %[[N]] : tensor<f32>
        // CHECK:      "tosa.reciprocal"
        // CHECK:      "tosa.mul"
    """)


def test_mean_with_a_dtype_casts_its_input_before_averaging() -> None:
    # int8_row_mean: torch.mean(q, dim=-1, dtype=torch.float32) on int8.
    filecheck(emit("int8_row_mean", "ragged", "linalg-on-tensors"), """
        // CHECK:      %[[CAST:$V]] = linalg.generic {{.*}} ins(%{{$V}} : tensor<16x100xi8>) outs(%{{$V}} : tensor<16x100xf32>)
        // CHECK:        arith.sitofp %{{$V}} : i8 to f32
        // CHECK:      linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[CAST]] : tensor<16x100xf32>)
        // CHECK:        arith.addf
        // CHECK:        arith.divf
    """)


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
@pytest.mark.parametrize("name", ["int8_row_mean", "window_mean_pool", "masked_fill_value", "rms_norm_eps", "alibi_bias"])
def test_rewritten_forms_match_torch_with_dynamic_shapes(name: str, output_type: str) -> None:
    module, kernel = dynamic_kernel(name)
    args = module.make_args("ragged")
    compiled = compile_kernel(kernel.bind(args), output_type=output_type)
    assert "?x" in compiled.mlir or "x?" in compiled.mlir
    got = compiled(*clone_args(args))
    torch.testing.assert_close(got, module.reference(*clone_args(args)), **module.TOLERANCE)


def test_mean_of_half_precision_over_a_dynamic_dimension_sums_and_divides_in_float32() -> None:
    # As torch's CPU mean of float16/bfloat16 values: float32 sum and division, one rounding.
    module = load_example_by_name("window_mean_pool")
    (x,) = module.make_args("ragged", torch.float16)
    bound = module.KERNEL.bind((x,))
    filecheck(generate_mlir(bound, output_type="tosa"), """
        // CHECK: %[[VALID:$V]] = tensor.extract_slice {{.*}} to tensor<16x?xf16>
        // CHECK: %[[WIDE:$V]] = "tosa.cast"(%[[VALID]]) : (tensor<16x?xf16>) -> tensor<16x?xf32>
        // CHECK: "tosa.reduce_sum"(%[[WIDE]]) <{axis = 1 : i32}> : (tensor<16x?xf32>) -> tensor<16x1xf32>
        // CHECK: arith.sitofp %{{$V}} : i64 to f32
        // CHECK: "tosa.mul"({{.*}} -> tensor<16xf32>
        // CHECK: arith.truncf %{{$V}} : f32 to f16
    """)
    for output_type in OUTPUT_TYPES:
        got = compile_kernel(bound, output_type=output_type)(x.clone())
        torch.testing.assert_close(got, module.reference(x), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_a_float_argument_filled_into_half_precision_rounds_through_f32_as_torch_does(
        output_type: str, dtype: torch.dtype) -> None:
    # A double just above the midpoint between two half-precision neighbours: rounded
    # directly it goes up; torch builds Half/BFloat16 from a float, which lands on the
    # midpoint and ties to even (down). Also: no f64 -> bf16 truncation for the JIT to lack.
    module = load_example_by_name("masked_fill_value")
    scores, mask, _ = module.make_args("ragged", dtype)
    fill = 1 + 2**-8 + 2**-30 if dtype == torch.bfloat16 else 1 + 2**-11 + 2**-40
    compiled = compile_kernel(module.KERNEL.bind((scores, mask, fill)), output_type=output_type)
    got = compiled(scores.clone(), mask, fill)
    torch.testing.assert_close(got, module.reference(scores, mask, fill), rtol=0, atol=0)
    assert (got[~mask] == 1.0).all()


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_bfloat16_window_means_compile_and_match_torch(output_type: str) -> None:
    # LLVM vectorizes the bf16 copies of the ragged tiles; x86 instruction selection on
    # AVX512-BF16 CPUs aborted the process on the resulting bf16 stores (the CPU pipeline
    # now moves bf16 through memory as i16).
    module = load_example_by_name("window_mean_pool")
    (x,) = module.make_args("ragged", torch.bfloat16)
    got = compile_kernel(module.KERNEL.bind((x,)), output_type=output_type)(x.clone())
    torch.testing.assert_close(got, module.reference(x), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_integer_negation_is_exact_at_every_magnitude(output_type: str, dtype: torch.dtype) -> None:
    """``0 - x`` in the integer type, wrapping at the minimum as torch does; through f32 (torch-mlir's
    linalg lowering) every magnitude above 2^24 moved, and the largest became the smallest."""
    info = torch.iinfo(dtype)
    x = torch.tensor([info.max, info.min, info.min + 1, 0, -1, 3] + [2**24 + 1, -(2**31) + 7] * (info.bits >= 32)
                     + [5] * 9, dtype=dtype)
    compiled = compile_kernel(NODE_KERNELS.negate.bind((x,)), output_type=output_type)
    assert torch.equal(compiled(x), -x)
    if output_type == "linalg-on-tensors":
        filecheck(compiled.mlir, """
            // CHECK:      %[[ZERO:$V]] = arith.constant 0 : i${BITS}
            // CHECK:      linalg.generic
            // CHECK-NEXT:   ^bb0(%[[IN:$V]]: i${BITS}
            // CHECK-NEXT:     arith.subi %[[ZERO]], %[[IN]] : i${BITS}
            // CHECK-NOT:  sitofp
        """.replace("${BITS}", str(info.bits)))
