"""The undefined-read check finds every read of a ``tensor.empty``'s unwritten elements
and accepts the forms that write every element first (fills, generics that ignore their
init, covering slices, scans started from their input). The example tests run it on
every emitted module (tests/test_examples_mlir.py)."""

from __future__ import annotations

import pytest
from examples_util import load_example_by_name

from helion_mlir import generate_mlir
from helion_mlir.verify import undefined_reads

_COPY = """
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4xf32>
"""
_ACCUMULATE = _COPY.replace("linalg.yield %in", "%s = arith.addf %in, %out : f32\n    linalg.yield %s")


def _function(body: str, result: str = "%r") -> str:
    return f"""
func.func @f(%a: tensor<4xf32>, %m: tensor<4x4xf32>, %n: index) -> tensor<4xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  {body}
  return {result} : tensor<4xf32>
}}
"""


def _reads(body: str, result: str = "%r") -> list[str]:
    return [f"{r.op} {r.what}" for r in undefined_reads(_function(body, result))]


def test_a_generic_that_reads_its_empty_init_is_a_read() -> None:
    assert _reads(_ACCUMULATE) == ["linalg.generic init #0"]


def test_a_generic_that_ignores_its_init_writes_every_element() -> None:
    assert _reads(_COPY) == []


def test_a_matmul_into_an_empty_tensor_reads_it() -> None:
    body = """
  %e2 = tensor.empty() : tensor<4x4xf32>
  %mm = linalg.matmul ins(%m, %m : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e2 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = tensor.extract_slice %mm[0, 0] [1, 4] [1, 1] : tensor<4x4xf32> to tensor<4xf32>
"""
    assert _reads(body) == ["linalg.matmul init #0"]


def test_a_filled_tensor_is_defined() -> None:
    body = "%r = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>"
    assert _reads(body) == []


def test_a_partly_written_empty_tensor_is_read_where_it_is_used() -> None:
    body = """
  %h = tensor.extract_slice %a[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  %r = tensor.insert_slice %h into %e[0] [2] [1] : tensor<2xf32> into tensor<4xf32>
"""
    assert _reads(body) == ["func.return its results"]
    assert _reads(body + "  %x = tensor.extract %r[%c1] : tensor<4xf32>\n", result="%a") == [
        "tensor.extract operand #0"]


def test_static_slices_that_cover_the_tensor_together_write_every_element() -> None:
    body = """
  %h = tensor.extract_slice %a[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  %p = tensor.insert_slice %h into %e[0] [2] [1] : tensor<2xf32> into tensor<4xf32>
  %r = tensor.insert_slice %h into %p[2] [2] [1] : tensor<2xf32> into tensor<4xf32>
"""
    assert _reads(body) == []


def test_a_slice_of_the_whole_dynamic_size_covers_its_empty_destination() -> None:
    body = """
  %d = tensor.empty(%n) : tensor<?xf32>
  %s = tensor.extract_slice %m[0, 0] [1, %n] [1, 1] : tensor<4x4xf32> to tensor<?xf32>
  %w = tensor.insert_slice %s into %d[0] [%n] [1] : tensor<?xf32> into tensor<?xf32>
  %c = tensor.cast %w : tensor<?xf32> to tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%c : tensor<4xf32>) outs(%a : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4xf32>
"""
    assert _reads(body) == []
    assert _reads(body.replace("[0] [%n] [1]", "[%c1] [%n] [1]")) == ["linalg.generic input #0"]


def test_both_lanes_of_pairs_of_run_time_count_cover_their_empty_destination() -> None:
    """``hl.join`` of tiles of run-time size: the axis of run-time size taken whole (the
    empty's own size value) and both lanes of the pair axis written."""
    body = """
  %d = tensor.empty(%n) : tensor<?x2xf32>
  %s = tensor.extract_slice %m[0, 0] [1, %n] [1, 1] : tensor<4x4xf32> to tensor<?xf32>
  %p = tensor.insert_slice %s into %d[0, 0] [%n, 1] [1, 1] : tensor<?xf32> into tensor<?x2xf32>
  %w = tensor.insert_slice %s into %p[0, 1] [%n, 1] [1, 1] : tensor<?xf32> into tensor<?x2xf32>
  %x = tensor.extract %w[%c0, %c1] : tensor<?x2xf32>
  %r = tensor.insert %x into %a[%c0] : tensor<4xf32>
"""
    assert _reads(body) == []
    assert _reads(body.replace("%p[0, 1]", "%p[0, 0]")) == ["tensor.extract operand #0"]  # one lane twice
    other_size = "%k = arith.addi %n, %c0 : index\n  %d = tensor.empty(%k)"
    assert _reads(body.replace("%d = tensor.empty(%n)", other_size)) == ["tensor.extract operand #0"]


def test_a_loop_that_writes_an_empty_tensor_piece_by_piece_is_not_trusted_to_cover_it() -> None:
    body = """
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%t = %e) -> (tensor<4xf32>) {
    %x = tensor.extract %a[%i] : tensor<4xf32>
    %t2 = tensor.insert %x into %t[%i] : tensor<4xf32>
    scf.yield %t2 : tensor<4xf32>
  }
"""
    assert _reads(body) == ["func.return its results"]


def test_an_empty_tensor_read_on_the_second_iteration_of_a_loop_is_found() -> None:
    body = """
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%t = %a) -> (tensor<4xf32>) {
    %x = tensor.extract %t[%i] : tensor<4xf32>
    %y = arith.addf %x, %zero : f32
    scf.yield %e : tensor<4xf32>
  }
"""
    assert _reads(body, result="%a") == ["tensor.extract operand #0"]


def test_an_empty_tensor_returned_from_one_branch_of_an_if_is_read() -> None:
    body = """
  %cond = arith.cmpi slt, %n, %c4 : index
  %r = scf.if %cond -> (tensor<4xf32>) {
    scf.yield %a : tensor<4xf32>
  } else {
    scf.yield %e : tensor<4xf32>
  }
"""
    assert _reads(body) == ["func.return its results"]


def test_an_op_of_another_dialect_reads_all_its_operands() -> None:
    body = "%r = stablehlo.add %e, %a : tensor<4xf32>"
    assert _reads(body) == ["stablehlo.add operand #0"]


@pytest.mark.parametrize("name", ["cumsum", "block_scan", "rope", "rope_tables", "complex_multiply"])
def test_scans_and_joins_write_every_element_of_their_results(name: str) -> None:
    """The forms the check once could not prove: a scan's result filled position by
    position (it starts from its input now) and ``hl.join``'s two halves."""
    module = load_example_by_name(name)
    bound = module.KERNEL.bind(module.make_args("ragged"))
    reads = undefined_reads(generate_mlir(bound, debug_info=True))
    assert reads == [], "\n".join(map(str, reads))
