"""Float8 and packed float4 kernels compute what torch computes, bit for bit.

Conversions are checked on every code of each 8-bit format (float8 -> f32, NaN bit patterns
included) and on f32 inputs across the range (every representable value, every midpoint
between neighbours and the floats one ulp either side of both, subnormals, overflow, inf,
NaN, -0.0, random bit patterns) for f32 -> float8, against torch's ``.to``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from examples_util import load_example
from filecheck_util import run_filecheck
from hypothesis import given
from hypothesis import strategies as st

from helion_mlir import OutputType, generate_mlir
from helion_mlir.errors import UnsupportedNodeError
from helion_mlir.runtime.cpu.engine import compile_module
from helion_mlir.runtime.kernel.compiled_kernel import CompiledKernel, compile_kernel

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "low_precision_kernels.py")

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu]
CODES = torch.arange(256, dtype=torch.int32).to(torch.uint8)
N = 4096  # a multiple of the conversion kernels' block size: one compiled kernel per dtype pair


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@functools.cache
def _converter(source: torch.dtype, target: torch.dtype, kernel: str = "convert") -> CompiledKernel:
    example = (torch.zeros(N, dtype=source), torch.zeros(N, dtype=target))
    return compile_kernel(getattr(KERNELS, kernel).bind(example))


def _convert(x: torch.Tensor, target: torch.dtype, kernel: str = "convert") -> torch.Tensor:
    """``x.to(target)`` run by the compiled kernel, in chunks of ``N`` (zero-padded)."""
    flat = x.reshape(-1)
    chunks = []
    for start in range(0, flat.numel(), N):
        chunk = torch.zeros(N, dtype=x.dtype)
        part = flat[start:start + N]
        chunk[: part.numel()] = part
        chunks.append(_converter(x.dtype, target, kernel)(chunk, torch.empty(N, dtype=target))[: part.numel()])
    return torch.cat(chunks)


def _boundary_inputs() -> torch.Tensor:
    """Every finite float8 value of every format, the midpoints between neighbours, the
    floats one ulp either side of both, and the special values."""
    values = [torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), -float("nan"),
                            1e-45, -1e-45, 1.1754942e-38, 2.0**-127, 1.5 * 2.0**-127, 3.4e38, -3.4e38])]
    for dtype in FLOAT8:
        finite = CODES.view(dtype).to(torch.float32)
        finite = torch.sort(finite[torch.isfinite(finite)]).values
        midpoints = (finite[1:] + finite[:-1]) / 2
        for v in (finite, midpoints, -finite, -midpoints):
            bits = v.view(torch.int32)
            values += [v, (bits + 1).view(torch.float32), (bits - 1).view(torch.float32)]
    return torch.cat(values)


def _random_inputs() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    patterns = torch.randint(-(2**31), 2**31 - 1, (1 << 16,), generator=gen, dtype=torch.int64).to(torch.int32)
    scaled = torch.randn(1 << 16, generator=gen) * torch.exp2(torch.randint(-40, 40, (1 << 16,), generator=gen).float())
    return torch.cat([patterns.view(torch.float32), scaled])


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_to_float32_is_exact_for_every_code(dtype: torch.dtype) -> None:
    got = _convert(CODES.view(dtype), torch.float32)
    assert torch.equal(_bits(got), _bits(CODES.view(dtype).to(torch.float32)))


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float32_to_float8_rounds_saturates_and_keeps_nan_like_torch(dtype: torch.dtype) -> None:
    x = torch.cat([_boundary_inputs(), _random_inputs()])
    got, expected = _bits(_convert(x, dtype)), _bits(x.to(dtype))
    wrong = (got != expected).nonzero().flatten()[:5].tolist()
    assert not wrong, [(x[i].item(), got[i].item(), expected[i].item()) for i in wrong]


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64), st.sampled_from(FLOAT8))
def test_any_float32_bit_pattern_converts_like_torch(patterns: list[int], dtype: torch.dtype) -> None:
    x = torch.tensor(patterns, dtype=torch.int64).to(torch.int32).view(torch.float32)
    assert torch.equal(_bits(_convert(x, dtype)), _bits(x.to(dtype)))


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (torch.float64, torch.float8_e4m3fn),  # rounded to f32 first, as torch does
        (torch.bfloat16, torch.float8_e5m2),
        (torch.float16, torch.float8_e4m3fnuz),
        (torch.int32, torch.float8_e4m3fn),  # ints saturate too
        (torch.int64, torch.float8_e5m2fnuz),
        (torch.float8_e5m2, torch.float8_e4m3fn),
        (torch.float8_e4m3fn, torch.bfloat16),
        (torch.float8_e8m0fnu, torch.float16),
        (torch.float8_e4m3fn, torch.int32),
        (torch.float8_e5m2, torch.float64),
    ],
    ids=str,
)
def test_conversions_between_float8_and_other_dtypes_match_torch(source: torch.dtype, target: torch.dtype) -> None:
    if source.is_floating_point and source.itemsize == 1:
        x = CODES.view(source)
        x = x[torch.isfinite(x.to(torch.float32))]  # NaN to int is undefined in torch too
    elif source.is_floating_point:
        x = torch.cat([_boundary_inputs(), torch.tensor([1.0625 + 2.0**-40])]).to(source)
    else:
        x = torch.randint(-100000, 100000, (3000,), dtype=source)
    assert torch.equal(_bits(_convert(x, target)), _bits(x.to(target)))


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e8m0fnu], ids=str)
def test_a_store_converts_to_float8_as_to_does(dtype: torch.dtype) -> None:
    x = torch.cat([_boundary_inputs(), _random_inputs()[:2000]])
    assert torch.equal(_bits(_convert(x, dtype, "store_converts")), _bits(x.to(dtype)))


def test_float8_bits_are_viewed_without_conversion() -> None:
    x = CODES.view(torch.float8_e5m2)
    assert torch.equal(compile_kernel(KERNELS.bytes_of.bind((x,)))(x), CODES)
    decoded = compile_kernel(KERNELS.float8_from_bytes.bind((CODES,)))(CODES)
    assert torch.equal(_bits(decoded), _bits(CODES.view(torch.float8_e4m3fn).to(torch.float32)))


@pytest.mark.parametrize("output_type", [t.value for t in OutputType])
def test_every_float4_byte_unpacks_to_its_two_e2m1_values(output_type: str) -> None:
    packed = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float4_e2m1fn_x2)
    low, high = compile_kernel(KERNELS.unpack_float4.bind((packed,)), output_type=output_type)(packed)
    magnitudes = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    table = torch.tensor(magnitudes + [-m for m in magnitudes])
    codes = torch.arange(256)
    assert torch.equal(_bits(low), _bits(table[codes & 15])) and torch.equal(_bits(high), _bits(table[codes >> 4]))


@pytest.mark.parametrize("storage_dtype", [torch.uint8, torch.float4_e2m1fn_x2], ids=str)
def test_grouped_float4_loads_read_16_values_per_group_low_nibble_first(storage_dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(6)
    data = torch.randint(0, 256, (5, 24), generator=gen, dtype=torch.uint8)  # 15 groups of 8 bytes
    groups = torch.randint(-3, 15, (37,), generator=gen)
    got = compile_kernel(KERNELS.float4_groups.bind((data.view(storage_dtype), groups)))(data.view(storage_dtype), groups)
    magnitudes = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    table = torch.tensor(magnitudes + [-m for m in magnitudes], dtype=torch.float16)
    codes = data.reshape(15, 8)[groups.clamp(min=0)].long()
    expected = torch.stack([table[codes & 15], table[codes >> 4]], dim=-1).reshape(37, 16)
    expected[groups < 0] = 0
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))


def test_masked_load_and_store_of_packed_float4_rows() -> None:
    gen = torch.Generator().manual_seed(1)
    base, packed = (torch.randint(0, 256, (21, 37), generator=gen, dtype=torch.uint8) for _ in range(2))
    keep = torch.rand(21, generator=gen) > 0.5
    args = (base.view(torch.float4_e2m1fn_x2), packed.view(torch.float4_e2m1fn_x2), keep)
    compiled = compile_kernel(KERNELS.replace_float4_rows.bind(args))
    target = base.clone().view(torch.float4_e2m1fn_x2)
    compiled(target, args[1], keep)
    assert torch.equal(target.view(torch.uint8), torch.where(keep[:, None], packed, base))


def test_packed_float4_bytes_round_trip_through_uint8_views() -> None:
    packed = torch.arange(200, dtype=torch.int32).to(torch.uint8)
    got = compile_kernel(KERNELS.swap_nibbles.bind((packed.view(torch.float4_e2m1fn_x2),)))(
        packed.view(torch.float4_e2m1fn_x2)
    )
    assert torch.equal(got.view(torch.uint8), (packed >> 4) | (packed << 4))


def test_a_packed_float4_value_never_reaches_torch_mlir() -> None:
    packed = torch.zeros(32, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    with pytest.raises(UnsupportedNodeError, match="imports a packed tensor with half its values") as err:
        generate_mlir(KERNELS.float4_clone.bind((packed,)))
    assert "low_precision_kernels.py" in str(err.value)  # names the kernel line


@pytest.mark.parametrize("output_type", [t.value for t in OutputType])
def test_float8_matmul_accumulates_in_float32_and_rounds_once(output_type: str) -> None:
    gen = torch.Generator().manual_seed(2)
    a = (torch.randn(40, 64, generator=gen) * 8).to(torch.float8_e4m3fn)
    b = (torch.randn(64, 24, generator=gen) * 8).to(torch.float8_e4m3fn)
    got = compile_kernel(KERNELS.float8_matmul.bind((a, b)), output_type=output_type)(a, b)
    # one float8 result per K tile of 32, as torch.matmul gives it; the sum in f32
    expected = sum(torch.matmul(a[:, k:k + 32], b[k:k + 32]).float() for k in (0, 32))
    assert torch.equal(got, expected)


def test_float8_addmm_matches_torch() -> None:
    gen = torch.Generator().manual_seed(4)
    bias = torch.randn(20, 24, generator=gen).to(torch.float8_e4m3fn)
    a = torch.randn(20, 32, generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(32, 24, generator=gen).to(torch.float8_e4m3fn)
    got = compile_kernel(KERNELS.float8_addmm.bind((bias, a, b)))(bias, a, b)
    assert torch.equal(got.view(torch.uint8), torch.addmm(bias, a, b).view(torch.uint8))


def test_addmm_of_bf16_tiles_into_an_f32_accumulator_accumulates_in_f32() -> None:
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(37, 64, generator=gen).to(torch.bfloat16)
    b = torch.randn(64, 20, generator=gen).to(torch.bfloat16)
    got = compile_kernel(KERNELS.bf16_addmm_into_f32.bind((a, b)))(a, b)  # torch refuses the mixed addmm
    torch.testing.assert_close(got, (a.float() @ b.float()).to(torch.bfloat16))


def test_baddbmm_of_an_f32_bias_and_bf16_batches_matches_f32_arithmetic() -> None:
    gen = torch.Generator().manual_seed(6)
    bias = torch.randn(3, 17, 12, generator=gen)
    p = torch.randn(3, 17, 40, generator=gen).to(torch.bfloat16)
    v = torch.randn(3, 40, 12, generator=gen).to(torch.bfloat16)
    got = compile_kernel(KERNELS.bf16_baddbmm_into_f32.bind((bias, p, v)))(bias, p, v)
    torch.testing.assert_close(got, torch.baddbmm(bias, p.float(), v.float()), rtol=1e-5, atol=1e-5)


def test_arithmetic_on_float8_values_runs_in_float32() -> None:
    """Ops torch-mlir emits on float8 tensors (here ``addf``, ``maximumf``, ``exp``) run on CPU
    in f32, each result rounded to float8 once."""
    module = """
    #map = affine_map<(d0) -> (d0)>
    func.func @f(%a: tensor<256xf8E5M2>, %b: tensor<256xf8E5M2>) -> tensor<256xf8E5M2> {
      %init = tensor.empty() : tensor<256xf8E5M2>
      %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
          ins(%a, %b : tensor<256xf8E5M2>, tensor<256xf8E5M2>) outs(%init : tensor<256xf8E5M2>) {
      ^bb0(%x: f8E5M2, %y: f8E5M2, %o: f8E5M2):
        %s = arith.addf %x, %y : f8E5M2
        %m = arith.maximumf %s, %x : f8E5M2
        %e = math.exp %m : f8E5M2
        linalg.yield %e : f8E5M2
      } -> tensor<256xf8E5M2>
      return %r : tensor<256xf8E5M2>
    }
    """
    gen = torch.Generator().manual_seed(5)
    a, b = (torch.rand(256, generator=gen).to(torch.float8_e5m2) for _ in range(2))
    (got,) = compile_module(module, "f")(a, b)
    s = (a.float() + b.float()).to(torch.float8_e5m2).float()
    expected = torch.exp(torch.maximum(s, a.float()).to(torch.float8_e5m2).float()).to(torch.float8_e5m2)
    assert torch.equal(got.view(torch.uint8), expected.view(torch.uint8))


def test_uint8_tensors_pass_for_signless_i8_parameters() -> None:
    module = """
    #map = affine_map<(d0) -> (d0)>
    func.func @f(%a: tensor<4xi8>) -> tensor<4xi8> {
      %init = tensor.empty() : tensor<4xi8>
      %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
          ins(%a : tensor<4xi8>) outs(%init : tensor<4xi8>) {
      ^bb0(%x: i8, %o: i8):
        %one = arith.constant 1 : i8
        %s = arith.addi %x, %one : i8
        linalg.yield %s : i8
      } -> tensor<4xi8>
      return %r : tensor<4xi8>
    }
    """
    (got,) = compile_module(module, "f")(torch.tensor([0, 127, 254, 255], dtype=torch.uint8))
    assert torch.equal(got.view(torch.uint8), torch.tensor([1, 128, 255, 0], dtype=torch.uint8))


def _emitted(kernel: Any, args: tuple[Any, ...]) -> str:
    return generate_mlir(kernel.bind(args))


def test_conversion_to_e4m3fn_spells_out_torchs_saturation() -> None:
    text = _emitted(KERNELS.convert, (torch.zeros(N), torch.zeros(N, dtype=torch.float8_e4m3fn)))
    run_filecheck(text, """
        // CHECK: func.func @convert(%x: tensor<4096xf32>, %out: tensor<4096xf8E4M3FN>) -> (tensor<4096xf8E4M3FN>)
        // CHECK: linalg.generic
        // CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: f8E4M3FN):
        // CHECK-DAG: arith.constant -448.0 : f32
        // CHECK-DAG: arith.constant 448.0 : f32
        // CHECK: arith.maximumf
        // CHECK-NEXT: arith.minimumf
        // CHECK-NEXT: arith.truncf %{{.*}} : f32 to f8E4M3FN
    """)


def test_conversion_to_e8m0_takes_the_magnitude_and_f64_goes_through_f32() -> None:
    text = _emitted(KERNELS.convert, (torch.zeros(N, dtype=torch.float64), torch.zeros(N, dtype=torch.float8_e8m0fnu)))
    run_filecheck(text, """
        // CHECK: ^bb0(%{{.*}}: f64, %{{.*}}: f8E8M0FNU):
        // CHECK-NEXT: %[[F32:.*]] = arith.truncf %{{.*}} : f64 to f32
        // CHECK-NEXT: %[[ABS:.*]] = math.absf %[[F32]] : f32
        // CHECK-NEXT: arith.truncf %[[ABS]] : f32 to f8E8M0FNU
    """)


def test_packed_float4_arguments_have_a_trailing_pair_dimension() -> None:
    packed = torch.zeros(64, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    run_filecheck(_emitted(KERNELS.unpack_float4, (packed,)), """
        // CHECK: func.func @unpack_float4(%packed: tensor<64x2xf4E2M1FN>, %low: tensor<64xf32>, %high: tensor<64xf32>)
        // CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0] [32, 2] [1, 1] : tensor<64x2xf4E2M1FN> to tensor<32x2xf4E2M1FN>
        // CHECK: %[[LOW:.*]] = tensor.extract_slice %{{.*}}[0, 0] [32, 1] [1, 1] : tensor<32x2xf4E2M1FN> to tensor<32xf4E2M1FN>
        // CHECK: %[[HIGH:.*]] = tensor.extract_slice %{{.*}}[0, 1] [32, 1] [1, 1] : tensor<32x2xf4E2M1FN> to tensor<32xf4E2M1FN>
        // CHECK: ins(%[[LOW]] : tensor<32xf4E2M1FN>)
        // CHECK: arith.extf %{{.*}} : f4E2M1FN to f32
        // CHECK: ins(%[[HIGH]] : tensor<32xf4E2M1FN>)
        // CHECK: arith.extf %{{.*}} : f4E2M1FN to f32
    """)


def test_grouped_float4_load_reads_nibbles_of_the_flattened_bytes() -> None:
    example = load_example(Path(__file__).resolve().parents[1] / "examples" / "nvfp4_gemv_grouped.py")
    run_filecheck(_emitted(example.KERNEL, example.make_args()), """
        // CHECK: func.func @nvfp4_gemv_grouped(%weight_bytes: tensor<32x512xi8>, %x: tensor<1024xbf16>
        // CHECK: tensor.collapse_shape %weight_bytes {{\\[\\[}}0, 1]] : tensor<32x512xi8> into tensor<16384xi8>
        // CHECK: linalg.generic
        // CHECK: affine.apply affine_map<(g, l) -> (g * 8 + l floordiv 2)>
        // CHECK: tensor.extract %{{.*}} : tensor<16384xi8>
        // CHECK: affine.apply affine_map<(l) -> ((l mod 2) * 4)>
        // CHECK: arith.shrui
        // CHECK-NEXT: arith.trunci %{{.*}} : i8 to i4
        // CHECK-NEXT: arith.bitcast %{{.*}} : i4 to f4E2M1FN
        // CHECK-NEXT: arith.extf %{{.*}} : f4E2M1FN to f32
        // CHECK-NEXT: arith.truncf %{{.*}} : f32 to f16
        // CHECK: arith.select
        // CHECK: -> tensor<4x16x16xf16>
        // CHECK: tensor.extract_slice %{{.*}}[0, 0, 15] [4, 16, 1] [1, 1, 1] : tensor<4x16x16xf16> to tensor<4x16xf16>
    """)


@functools.cache
def _tosa_converter(source: torch.dtype, target: torch.dtype, static_shapes: bool) -> CompiledKernel:
    kernel = helion.kernel(KERNELS.convert_rows.fn, config=helion.Config(block_sizes=[8]), static_shapes=static_shapes)
    example = (torch.zeros(20, 14, dtype=source), torch.zeros(20, 14, dtype=target))
    return compile_kernel(kernel.bind(example), output_type="tosa")


@pytest.mark.parametrize(("source", "target", "static_shapes"), [
    (torch.float32, torch.bfloat16, False), (torch.bfloat16, torch.float32, False), (torch.float32, torch.int8, False),
    (torch.float16, torch.bfloat16, False), (torch.int64, torch.float32, False), (torch.int32, torch.bool, False),
    (torch.bfloat16, torch.float16, True),
])
def test_tosa_converts_like_torch_with_dynamic_sizes_and_between_half_types(
        source: torch.dtype, target: torch.dtype, static_shapes: bool) -> None:
    """torch-mlir's tosa form of ``.to`` refuses a tile of dynamic width ("failed to legalize
    'torch.aten.to.dtype'"), and tosa-to-linalg refuses a float16 <-> bfloat16 cast: both
    are converted with torch's rules here, truncation toward zero included."""
    values = torch.tensor([-2.7, -1.5, -0.5, 0.0, 0.3, 0.5, 1.5, 2.5, 100.9, -100.9, 127.4, -128.0, 7.0, 1e-3])
    x = (values.repeat(20)[:280].view(20, 14) * (1 if source.is_floating_point else 10)).to(source)
    compiled = _tosa_converter(source, target, static_shapes)
    assert ("x?x" in compiled.mlir) != static_shapes  # tiles of dynamic width
    assert torch.equal(compiled(x, torch.empty(20, 14, dtype=target)), x.to(target))
