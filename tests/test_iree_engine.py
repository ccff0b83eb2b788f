"""The IREE runtime: what crosses the boundary (every element type, 0-d tensors, scalars,
dynamic sizes), argument checks, compiler errors, and compile_kernel(runtime="iree").
Each result is compared with torch-mlir's ExecutionEngine on the same module."""

from __future__ import annotations

import helion
import pytest
import torch

from examples_util import clone_args, load_example_by_name, run_reference_mode
from helion_mlir.errors import ArgumentError, ExecutionError
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.cpu.engine import compile_module
from helion_mlir.runtime.function import NativeFunction
from helion_mlir.runtime.iree.engine import IREE_COMPILE_FLAGS, compile_with_iree, iree_available

pytestmark = [
    pytest.mark.iree,
    pytest.mark.skipif(not iree_available(), reason="IREE is not installed (pip install -e '.[test]')"),
]

EVERY_TYPE = """
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<() -> ()>
func.func @every_type(%b: tensor<5xi1>, %i: tensor<5xi8>, %d: tensor<5xf64>, %z: tensor<f32>, %h: tensor<5xbf16>,
                      %s: f64, %flag: i1, %n: i64) -> (tensor<5xi1>, tensor<5xi8>, tensor<5xf64>, tensor<f32>, tensor<5xbf16>) {
  %e1 = tensor.empty() : tensor<5xi1>
  %nb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%b : tensor<5xi1>) outs(%e1 : tensor<5xi1>) {
  ^bb0(%x: i1, %o: i1):
    %t = arith.xori %x, %flag : i1
    linalg.yield %t : i1
  } -> tensor<5xi1>
  %e2 = tensor.empty() : tensor<5xi8>
  %ni = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%i : tensor<5xi8>) outs(%e2 : tensor<5xi8>) {
  ^bb0(%x: i8, %o: i8):
    %c = arith.trunci %n : i64 to i8
    %t = arith.addi %x, %c : i8
    linalg.yield %t : i8
  } -> tensor<5xi8>
  %e3 = tensor.empty() : tensor<5xf64>
  %nd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%d : tensor<5xf64>) outs(%e3 : tensor<5xf64>) {
  ^bb0(%x: f64, %o: f64):
    %t = arith.subf %x, %s : f64
    linalg.yield %t : f64
  } -> tensor<5xf64>
  %e4 = tensor.empty() : tensor<f32>
  %nz = linalg.generic {indexing_maps = [#scalar, #scalar], iterator_types = []} ins(%z : tensor<f32>) outs(%e4 : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.mulf %x, %x : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  %e5 = tensor.empty() : tensor<5xbf16>
  %nh = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%h : tensor<5xbf16>) outs(%e5 : tensor<5xbf16>) {
  ^bb0(%x: bf16, %o: bf16):
    %t = arith.addf %x, %x : bf16
    linalg.yield %t : bf16
  } -> tensor<5xbf16>
  return %nb, %ni, %nd, %nz, %nh : tensor<5xi1>, tensor<5xi8>, tensor<5xf64>, tensor<f32>, tensor<5xbf16>
}
"""

DYNAMIC = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @scaled(%x: tensor<?x?xf32>, %out: tensor<?x?xf32>, %k: f32) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%out : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %k : f32
    linalg.yield %m : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""

def test_every_element_type_0d_tensors_and_scalars_cross_like_with_the_jit() -> None:
    args = (
        torch.tensor([True, False, True, True, False]),
        torch.tensor([1, -2, 127, -128, 0], dtype=torch.int8),
        torch.tensor([1.5, 2.5, -3.25, 1e3, 0.0], dtype=torch.float64),
        torch.tensor(2.5),
        torch.tensor([1.5, 2.0, -3.0, 0.0078125, 300.0], dtype=torch.bfloat16),
        0.5,
        True,
        3,
    )
    iree = compile_with_iree(EVERY_TYPE, "every_type")(*args)
    jit = compile_module(EVERY_TYPE, "every_type")(*args)
    for got, want in zip(iree, jit):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=0, atol=0)  # exact: f64 values here survive f32
    assert torch.equal(iree[0], ~args[0]) and iree[3].shape == ()
    assert torch.equal(iree[1], args[1] + 3)  # int8 wraps around as in the JIT


def test_dynamic_sizes_change_between_calls_including_empty() -> None:
    scaled = compile_with_iree(DYNAMIC, "scaled")
    for shape in [(3, 4), (17, 1), (0, 5)]:
        x = torch.randn(shape)
        (got,) = scaled(x, torch.empty(shape), 1.5)
        assert got.shape == shape
        torch.testing.assert_close(got, x * 1.5)


# A tile loop carrying two dynamically sized tensors, each written per tile: IREE packs both
# new values into one allocation and carries the second one's offset around the loop.
TWO_CARRIED = """
func.func @rows_and_sums(%x: tensor<?x?xf32>, %copy: tensor<?x?xf32>, %sums: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x?xf32>
  %m = tensor.dim %x, %c1 : tensor<?x?xf32>
  %r:2 = scf.for %i = %c0 to %n step %c8 iter_args(%a = %copy, %b = %sums) -> (tensor<?x?xf32>, tensor<?xf32>) {
    %left = arith.subi %n, %i : index
    %size = arith.minsi %c8, %left : index
    %rows = tensor.extract_slice %x[%i, 0] [%size, %m] [1, 1] : tensor<?x?xf32> to tensor<?x?xf32>
    %e = tensor.empty(%m) : tensor<8x?xf32>
    %zeros = linalg.fill ins(%zero : f32) outs(%e : tensor<8x?xf32>) -> tensor<8x?xf32>
    %tile = tensor.insert_slice %rows into %zeros[0, 0] [%size, %m] [1, 1] : tensor<?x?xf32> into tensor<8x?xf32>
    %e8 = tensor.empty() : tensor<8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
    %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                           iterator_types = ["parallel", "reduction"]} ins(%tile : tensor<8x?xf32>) outs(%init : tensor<8xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %t = arith.addf %v, %acc : f32
      linalg.yield %t : f32
    } -> tensor<8xf32>
    %a2 = tensor.insert_slice %rows into %a[%i, 0] [%size, %m] [1, 1] : tensor<?x?xf32> into tensor<?x?xf32>
    %valid = tensor.extract_slice %sum[0] [%size] [1] : tensor<8xf32> to tensor<?xf32>
    %b2 = tensor.insert_slice %valid into %b[%i] [%size] [1] : tensor<?xf32> into tensor<?xf32>
    scf.yield %a2, %b2 : tensor<?x?xf32>, tensor<?xf32>
  }
  return %r#0, %r#1 : tensor<?x?xf32>, tensor<?xf32>
}
"""


def test_a_loop_carrying_two_dynamically_sized_tensors_returns_each_at_its_own_offset() -> None:
    # Without --iree-stream-resource-min-offset-alignment=1, IREE 3.13 returns the first
    # rows of x as the sums (docs/downstream.md).
    rows_and_sums = compile_with_iree(TWO_CARRIED, "rows_and_sums")
    x = torch.randn(37, 100)
    copy, sums = rows_and_sums(x, torch.zeros(37, 100), torch.full((37,), 7.0))
    torch.testing.assert_close(copy, x)
    torch.testing.assert_close(sums, x.sum(1), rtol=1e-5, atol=1e-5)


def test_bad_arguments_are_rejected_before_anything_runs() -> None:
    scaled = compile_with_iree(DYNAMIC, "scaled")
    x = torch.randn(2, 3)
    with pytest.raises(ArgumentError, match=r"takes 3 argument\(s\), got 2"):
        scaled(x, x)
    with pytest.raises(ArgumentError, match=r"argument #0 \(tensor<\?x\?xf32>\) of @scaled: expected dtype torch.float32"):
        scaled(x.double(), x, 1.0)
    with pytest.raises(ArgumentError, match=r"argument #2 \(f32\) of @scaled: expected int or float, got str"):
        scaled(x, x, "1.0")


def test_both_kinds_of_compiled_function_check_and_describe_a_call_alike() -> None:
    """The JIT's and IREE's functions share one base: the same signature, the same errors for
    the same bad call, the same repr (IREE's naming its device too)."""
    jit, iree = compile_module(DYNAMIC, "scaled"), compile_with_iree(DYNAMIC, "scaled")
    assert isinstance(jit, NativeFunction) and isinstance(iree, NativeFunction)
    assert jit.signature == iree.signature == "@scaled(tensor<?x?xf32>, tensor<?x?xf32>, f32) -> (tensor<?x?xf32>)"
    x = torch.randn(2, 3)
    for bad_call in [(x, x), (x.int(), x, 1.0), (x, x, "1.0")]:
        errors = []
        for function in (jit, iree):
            with pytest.raises(ArgumentError) as info:
                function(*bad_call)
            errors.append(str(info.value))
        assert errors[0] == errors[1]
    assert repr(jit) == f"CompiledFunction({jit.signature}, output_type='linalg-on-tensors')"
    assert repr(iree) == f"IreeFunction({jit.signature}, output_type='linalg-on-tensors', device='{iree.device}')"


def test_a_module_iree_rejects_is_reported_with_its_diagnostics() -> None:
    # row_rescale with static_shapes=False carries a whole dynamic row through an scf.while:
    # IREE tracks the sizes of tensors carried by scf.for, not of scf.while results
    # (docs/downstream.md).
    module = load_example_by_name("row_rescale")
    kernel = helion.kernel(module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False)
    with pytest.raises(ExecutionError) as caught:
        compile_kernel(kernel.bind(module.make_args("ragged")), runtime="iree")
    message = str(caught.value)
    assert "@row_rescale" in message and "iree-compile" in message
    assert all(flag in message for flag in IREE_COMPILE_FLAGS)
    assert "'tensor.dim' op unexpected during shape cleanup" in message
    assert "row_rescale.py:" in message  # IREE's diagnostics point at the kernel's source lines


def test_compile_kernel_with_iree_runs_the_host_code_and_writes_arguments_in_place() -> None:
    # xorshift_rand writes its state argument and returns it: the in-place update happens.
    module = load_example_by_name("xorshift_rand")
    args = module.make_args("ragged")
    compiled = compile_kernel(module.KERNEL.bind(args), runtime="iree")
    assert compiled.runtime == "iree" and compiled is compile_kernel(module.KERNEL.bind(args), runtime="iree")
    assert compiled is not compile_kernel(module.KERNEL.bind(args), runtime="jit")
    ours = clone_args(args)
    result = compiled(*ours)
    expected, _ = run_reference_mode(module, "ragged")
    torch.testing.assert_close(result, expected, **module.TOLERANCE)
    written = [a for a, b in zip(ours, args) if isinstance(a, torch.Tensor) and not torch.equal(a, b)]
    assert written, "the kernel's written argument must change in place"
    with pytest.raises(ValueError, match="unknown runtime 'gpu'"):
        compile_kernel(module.KERNEL.bind(args), runtime="gpu")
