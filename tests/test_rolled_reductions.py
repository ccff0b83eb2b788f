"""Rolled reductions: configs with ``reduction_loops`` lower a reduction dimension as an
``scf.for`` over chunks carrying explicit accumulators (docs/lowering.md).

Every example with a rollable reduction runs rolled (chunk sizes that do and do not divide
the reduction dimension) and matches its reference; a kernel of every reduction kind does
too; FileCheck pins the loop structure; kernels Helion rolls in ways the lowering cannot
combine are lowered in persistent form with a warning, and still match.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import helion
import helion.language as hl
import pytest
import torch
from examples_util import assert_matches, load_example_by_name
from kernels import pair_kernels
from filecheck_util import run_filecheck

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir import generate_mlir
from helion_mlir.generate import kernel_model
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel

SSA = "[A-Za-z0-9_#]+"


def _clone(args: tuple[Any, ...]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _rolled_config(module: Any, chunk: int) -> helion.Config:
    config = dict(module.KERNEL.configs[0].config)
    config["reduction_loops"] = [chunk]
    return helion.Config(**config)


@contextlib.contextmanager
def _warnings(logger: str) -> Iterator[list[str]]:
    """The warnings ``logger`` emits inside the block (works with pytest's logging plugin off)."""
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger(logger).addHandler(handler)
    try:
        yield messages
    finally:
        logging.getLogger(logger).removeHandler(handler)


# --------------------------------------------------------------------- examples, rolled
# Examples whose reduction Helion rolls: (name, chunk, shape). The ragged rows are 100
# wide (softmax_looped: 200), which 16, 32 and 64 do not divide; the divisible ones are
# 128 (256) wide.
ROLLED_EXAMPLES = ["softmax_one_pass", "softmax_looped", "layer_norm", "layer_norm_affine", "rms_norm", "log_softmax",
                   "cross_entropy"]
RUNS = [(name, chunk, "ragged") for name in ROLLED_EXAMPLES for chunk in (16, 64)]
RUNS += [(name, 32, "divisible") for name in ROLLED_EXAMPLES]


@pytest.mark.parametrize(("name", "chunk", "shape"), RUNS)
def test_example_with_rolled_reduction_matches_reference(name: str, chunk: int, shape: str) -> None:
    module = load_example_by_name(name)
    args = module.make_args(shape)
    bound = module.KERNEL.bind(args)
    config = _rolled_config(module, chunk)
    assert kernel_model(bound, config=config).rolled_blocks, f"{name}: Helion did not roll the reduction"
    compiled = compile_kernel(bound, output_type="linalg-on-tensors", config=config)
    assert '"reduction"' in compiled.mlir and "linalg.reduce" not in compiled.mlir
    assert_matches(compiled(*_clone(args)), module.reference(*_clone(args)), module.TOLERANCE, f"{name}[{chunk}, {shape}]")


@pytest.mark.parametrize("output_type", ["tosa", "stablehlo"])
@pytest.mark.parametrize("name", ["softmax_one_pass", "layer_norm", "layer_norm_affine", "rms_norm"])
def test_rolled_examples_run_with_other_output_types(name: str, output_type: str) -> None:
    module = load_example_by_name(name)
    args = module.make_args("ragged")
    compiled = compile_kernel(module.KERNEL.bind(args), output_type=output_type, config=_rolled_config(module, 32))
    assert '"reduction"' in compiled.mlir
    assert_matches(compiled(*_clone(args)), module.reference(*_clone(args)), module.TOLERANCE, f"{name} [{output_type}]")


@pytest.mark.parametrize("name", ["softmax_one_pass", "layer_norm"])
def test_rolled_reductions_of_bfloat16_rows(name: str) -> None:
    module = load_example_by_name(name)
    args = module.make_args("ragged", torch.bfloat16)
    compiled = compile_kernel(module.KERNEL.bind(args), config=_rolled_config(module, 16))
    assert_matches(compiled(*_clone(args)), module.reference(*_clone(args)), dict(rtol=1.6e-2, atol=1e-2), f"{name} [bf16]")


def test_rolled_reduction_with_dynamic_shapes() -> None:
    module = load_example_by_name("softmax_one_pass")
    kernel = helion.kernel(module.KERNEL.fn, config=helion.Config(block_sizes=[8], reduction_loops=[16]),
                           static_shapes=False)
    args = module.make_args("ragged")
    compiled = compile_kernel(kernel.bind(args))
    assert "tensor<37x100xf32>" not in compiled.mlir, "host sizes must be dynamic"
    assert '"reduction"' in compiled.mlir
    assert_matches(compiled(*_clone(args)), module.reference(*_clone(args)), module.TOLERANCE, "softmax [dynamic]")


@pytest.mark.parametrize(("name", "chunk", "reason"), [
    ("group_norm", 8, "is not computed per chunk"),  # hl.specialize pins the group size (16)
    ("row_rescale", 16, "used after the loop"),  # a while loop over the row's values
    ("rope", 8, "'inv_freq' spans the whole rolled dimension"),  # hl.arange(half) computed before the loop
])
def test_kernels_rolled_beyond_the_lowering_fall_back_to_persistent_form(name: str, chunk: int, reason: str) -> None:
    module = load_example_by_name(name)
    args = module.make_args("ragged")
    bound = module.KERNEL.bind(args)
    config = _rolled_config(module, chunk)
    with _warnings("helion_mlir.lowering.kernel_model") as messages:
        model = kernel_model(bound, config=config)
    assert not model.rolled_blocks and model.persistent_reductions
    assert any("persistent form" in m and reason in m for m in messages), messages
    compiled = compile_kernel(bound, config=config)
    assert_matches(compiled(*_clone(args)), module.reference(*_clone(args)), module.TOLERANCE, name)


def test_split_halves_carried_from_one_rolled_loop_to_the_next_fall_back_to_persistent_form() -> None:
    """The halves are computed chunk by chunk in the energy's loop and joined in a second loop
    (in either branch), which would read only the last chunk: the stored row came out wrong,
    silently, on both pipelines."""
    z, weights = torch.randn(7, 128, 2), torch.randn(128)
    bound = pair_kernels.complex_row_energy.bind((z, weights, True))  # the branch is taken at run time
    config = helion.Config(block_sizes=[1], reduction_loops=[32])
    with _warnings("helion_mlir.lowering.kernel_model") as messages:
        model = kernel_model(bound, config=config)
    assert not model.rolled_blocks
    assert any("one chunk of a value another loop computes chunk by chunk" in m for m in messages), messages
    for pipeline in ("fast", "plain"):
        compiled = compile_kernel(bound, config=config, pipeline=pipeline)
        for conjugate in (True, False):
            got = compiled(z, weights, conjugate)
            for g, want in zip(got, pair_kernels.complex_row_energy_reference(z, weights, conjugate)):
                torch.testing.assert_close(g, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["row_sum", "row_mean_dynamic", "welford", "argmax_reduce", "column_stats"])
def test_examples_reducing_tiles_have_no_reduction_loop_to_roll(name: str) -> None:
    """Their reductions run over ``hl.tile`` blocks (already loops), not whole dimensions."""
    module = load_example_by_name(name)
    bound = module.KERNEL.bind(module.make_args("ragged"))
    assert len(bound.config_spec.reduction_loops) == 0
    assert not kernel_model(bound).rolled_blocks


# ------------------------------------------------------------- every reduction kind
@helion.kernel(config=helion.Config(block_sizes=[4], reduction_loops=[16]))
def reduction_kinds(x: torch.Tensor, xi: torch.Tensor) -> tuple[torch.Tensor, ...]:
    rows, cols = x.size()
    f32 = dict(dtype=torch.float32, device=x.device)
    i64 = dict(dtype=torch.int64, device=x.device)
    o_mean, o_amin, o_var, o_var_mean = (torch.empty([rows], **f32) for _ in range(4))
    o_prod, o_max = torch.empty([rows], **f32), torch.empty([rows], **f32)
    o_argmax, o_argmin, o_isum, o_max_index = (torch.empty([rows], **i64) for _ in range(4))
    o_imax = torch.empty([rows], dtype=torch.int32, device=x.device)
    o_any = torch.empty([rows], dtype=torch.bool, device=x.device)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :]
        irow = xi[tile_r, :]
        o_mean[tile_r] = torch.mean(row, dim=1)
        o_amin[tile_r] = torch.amin(row, dim=1)
        o_argmax[tile_r] = torch.argmax(row, dim=1)
        o_argmin[tile_r] = torch.argmin(row, dim=1)
        o_var[tile_r] = torch.var(row, dim=1)
        var, mean = torch.var_mean(row, dim=1, keepdim=True)
        o_var_mean[tile_r] = (var + mean).squeeze(1)
        o_isum[tile_r] = torch.sum(irow, dim=1)
        o_imax[tile_r] = torch.amax(irow, dim=1)
        o_prod[tile_r] = torch.prod(row * 0.01 + 1.0, dim=1)
        values, indices = torch.max(row, dim=1)
        o_max[tile_r] = values
        o_max_index[tile_r] = indices
        o_any[tile_r] = torch.any(row > 2.5, dim=1)
    return o_mean, o_amin, o_argmax, o_argmin, o_var, o_var_mean, o_isum, o_imax, o_prod, o_max, o_max_index, o_any


def _kinds_args() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(10, 50, generator=gen)
    x[1, 7] = x[1, 40] = 9.0  # a tie across chunks: the first occurrence wins
    x[2, 20] = x[2, 45] = -9.0
    x[3, 33] = float("nan")  # NaN is the max, the min and propagates
    x[4, :] = 1.0  # all equal
    x[5, 49] = 20.0  # the extreme in the last (ragged) lane
    xi = torch.randint(-100, 100, (10, 50), dtype=torch.int32, generator=gen)
    return x, xi


def _kinds_reference(x: torch.Tensor, xi: torch.Tensor) -> tuple[torch.Tensor, ...]:
    var, mean = torch.var_mean(x, dim=1, keepdim=True)
    values, indices = torch.max(x, dim=1)
    return (x.mean(1), x.amin(1), x.argmax(1), x.argmin(1), x.var(1), (var + mean).squeeze(1), xi.sum(1),
            xi.amax(1), torch.prod(x * 0.01 + 1.0, dim=1), values, indices, torch.any(x > 2.5, dim=1))


@pytest.mark.parametrize(("chunk", "output_type"), [
    (8, "linalg-on-tensors"), (16, "linalg-on-tensors"), (32, "linalg-on-tensors"), (16, "tosa"), (16, "stablehlo"),
])
def test_every_reduction_kind_rolled_matches_torch(chunk: int, output_type: str) -> None:
    args = _kinds_args()
    config = helion.Config(block_sizes=[4], reduction_loops=[chunk])
    bound = reduction_kinds.bind(args)
    assert kernel_model(bound, config=config).rolled_blocks
    compiled = compile_kernel(bound, output_type=output_type, config=config)
    assert compiled.mlir.count('"reduction"') >= 14  # one fold per rolled reduction node
    assert_matches(compiled(*_clone(args)), _kinds_reference(*args), dict(rtol=1e-4, atol=1e-4),
                    f"kinds[{chunk}, {output_type}]")


# ---------------------------------------------------------------------------- structure
def _emit(name: str, chunk: int, shape: str = "ragged", output_type: str = "linalg-on-tensors") -> str:
    module = load_example_by_name(name)
    return generate_mlir(module.KERNEL.bind(module.make_args(shape)), output_type=output_type,
                         config=_rolled_config(module, chunk))


def test_filecheck_rolled_max_and_sum_carry_accumulators_and_mask_the_last_chunk() -> None:
    """softmax_one_pass, 100-wide rows in chunks of 32: a max loop, a sum loop, a store loop."""
    run_filecheck(_emit("softmax_one_pass", 32), f"""
        // CHECK: scf.for %[[ROW:{SSA}]] = %{{{{{SSA}}}}} to %{{{{{SSA}}}}} step %{{{{{SSA}}}}} iter_args
        // CHECK: %[[NEG_INF:{SSA}]] = arith.constant 0xFF800000 : f32
        // CHECK: %[[INIT:{SSA}]] = linalg.fill ins(%[[NEG_INF]] : f32) outs(%{{{{{SSA}}}}} : tensor<8x1xf32>)
        // CHECK: %[[MAX:{SSA}]] = scf.for %[[OFF:{SSA}]] = %{{{{{SSA}}}}} to %[[N:{SSA}]] step %[[CHUNK:{SSA}]] iter_args(%[[ACC:{SSA}]] = %[[INIT]]) -> (tensor<8x1xf32>)
        // CHECK: %[[LEFT:{SSA}]] = arith.subi %[[N]], %[[OFF]] : index
        // CHECK: %[[EXTENT:{SSA}]] = arith.minsi %[[CHUNK]], %[[LEFT]] : index
        // CHECK: %[[FOLD:{SSA}]] = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]}} ins(%{{{{{SSA}}}}} : tensor<8x32xf32>) outs(%[[ACC]] : tensor<8x1xf32>)
        // CHECK-NEXT: ^bb0(%[[X:{SSA}]]: f32, %[[A:{SSA}]]: f32):
        // CHECK-NEXT: %[[LANE:{SSA}]] = linalg.index 1 : index
        // CHECK-NEXT: %[[IN:{SSA}]] = arith.cmpi slt, %[[LANE]], %[[EXTENT]] : index
        // CHECK-NEXT: %[[M:{SSA}]] = arith.select %[[IN]], %[[X]], %[[NEG_INF]] : f32
        // CHECK-NEXT: %[[C:{SSA}]] = arith.maximumf %[[A]], %[[M]] : f32
        // CHECK-NEXT: linalg.yield %[[C]] : f32
        // CHECK: scf.yield %[[FOLD]] : tensor<8x1xf32>
        // CHECK: %[[INIT2:{SSA}]] = linalg.fill ins(%{{{{{SSA}}}}} : f32) outs(%{{{{{SSA}}}}} : tensor<8x1xf32>)
        // CHECK: %[[SUM:{SSA}]] = scf.for %{{{{{SSA}}}}} = %{{{{{SSA}}}}} to %{{{{{SSA}}}}} step %{{{{{SSA}}}}} iter_args(%[[ACC2:{SSA}]] = %[[INIT2]]) -> (tensor<8x1xf32>)
        // CHECK: arith.subf %{{{{{SSA}}}}}, %{{{{{SSA}}}}} : f32
        // CHECK: math.exp
        // CHECK: linalg.generic {{{{.*}}}}iterator_types = ["parallel", "reduction"]{{{{.*}}}} outs(%[[ACC2]] : tensor<8x1xf32>)
        // CHECK: arith.cmpi slt
        // CHECK-NEXT: arith.select
        // CHECK-NEXT: arith.addf
        // CHECK: scf.for {{{{.*}}}} iter_args
        // CHECK: arith.divf %{{{{{SSA}}}}}, %{{{{{SSA}}}}} : f32
        // CHECK: tensor.insert_slice
    """)


def test_filecheck_chunks_that_divide_the_dimension_are_not_masked() -> None:
    text = _emit("softmax_one_pass", 32, shape="divisible")
    run_filecheck(text, f"""
        // CHECK: scf.for {{{{.*}}}} iter_args(%[[ACC:{SSA}]] = %{{{{{SSA}}}}}) -> (tensor<8x1xf32>)
        // CHECK-NOT: arith.minsi
        // CHECK: linalg.generic {{{{.*}}}}"reduction"{{{{.*}}}} outs(%[[ACC]] : tensor<8x1xf32>)
        // CHECK-NEXT: ^bb0
        // CHECK-NEXT: linalg.index 1
        // CHECK-NEXT: arith.maximumf
    """)


def test_filecheck_argmax_carries_value_and_index_with_first_occurrence_ties() -> None:
    text = generate_mlir(reduction_kinds.bind(_kinds_args()), config=helion.Config(block_sizes=[4], reduction_loops=[16]))
    run_filecheck(text, f"""
        // CHECK: %[[BIG:{SSA}]] = arith.constant 9223372036854775807 : i64
        // CHECK: %[[NO_INDEX:{SSA}]] = linalg.fill ins(%[[BIG]] : i64) outs(%{{{{{SSA}}}}} : tensor<4xi64>)
        // CHECK: %[[LOOP:{SSA}]]:{{{{[0-9]+}}}} = scf.for %[[OFF:{SSA}]] = {{{{.*}}}} iter_args({{{{.*}}}}%[[IDX:{SSA}]] = %[[NO_INDEX]]) -> ({{{{.*}}}}tensor<4xf32>, tensor<4xi64>)
        // CHECK: %[[F:{SSA}]]:2 = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}}
        // CHECK: %[[LANE:{SSA}]] = linalg.index 1 : index
        // CHECK-NEXT: %[[IN:{SSA}]] = arith.cmpi slt, %[[LANE]], %{{{{{SSA}}}}} : index
        // CHECK-NEXT: %[[POS:{SSA}]] = arith.addi %[[OFF]], %[[LANE]] : index
        // CHECK: arith.cmpf ogt
        // CHECK: arith.cmpf uno
        // CHECK: arith.cmpi slt, %{{{{{SSA}}}}}, %{{{{{SSA}}}}} : i64
        // CHECK: %[[TAKE:{SSA}]] = arith.andi %{{{{{SSA}}}}}, %[[IN]] : i1
        // CHECK-NEXT: %[[V:{SSA}]] = arith.select %[[TAKE]], %{{{{{SSA}}}}}, %{{{{{SSA}}}}} : f32
        // CHECK-NEXT: %[[I:{SSA}]] = arith.select %[[TAKE]], %{{{{{SSA}}}}}, %{{{{{SSA}}}}} : i64
        // CHECK-NEXT: linalg.yield %[[V]], %[[I]] : f32, i64
        // CHECK: scf.yield {{{{.*}}}}%[[F]]#0, %[[F]]#1 :
    """)


def test_filecheck_mean_divides_the_rolled_sum_by_the_full_row_length() -> None:
    """rms_norm: ``mean`` is a rolled sum and, after the loop, a division by 100 (not the chunk)."""
    run_filecheck(_emit("rms_norm", 16), f"""
        // CHECK: %[[SUM:{SSA}]] = scf.for {{{{.*}}}} -> (tensor<16x1xf32>)
        // CHECK: arith.addf
        // CHECK: scf.yield
        // CHECK: %[[N:{SSA}]] = arith.constant 100.0 : f32
        // CHECK: %[[NT:{SSA}]] = linalg.fill ins(%[[N]] : f32) outs(%{{{{{SSA}}}}} : tensor<f32>)
        // CHECK: linalg.generic {{{{.*}}}} ins(%[[SUM]], %[[NT]] : tensor<16x1xf32>, tensor<f32>)
        // CHECK: arith.divf
    """)


def test_filecheck_mean_used_in_a_later_rolled_loop_is_recomputed_from_the_full_sum() -> None:
    """layer_norm_affine (``row - torch.mean(row)`` feeds both the variance and the output):
    Helion recomputes the mean inside the loop that writes the output, from the first
    loop's finished sum; it must divide that sum by the row length, never average the chunk."""
    run_filecheck(_emit("layer_norm_affine", 16), f"""
        // CHECK: %[[SUM:{SSA}]] = scf.for {{{{.*}}}} -> (tensor<8x1xf32>)
        // CHECK: %[[N:{SSA}]] = arith.constant 100.0 : f32
        // CHECK: scf.for {{{{.*}}}} -> (tensor<8x1xf32>)
        // CHECK: scf.for {{{{.*}}}} -> (tensor<37x100xf32>)
        // CHECK: %[[NT:{SSA}]] = linalg.fill ins(%[[N]] : f32) outs(%{{{{{SSA}}}}} : tensor<f32>)
        // CHECK: %[[MEAN:{SSA}]] = linalg.generic {{{{.*}}}} ins(%[[SUM]], %[[NT]] : tensor<8x1xf32>, tensor<f32>)
        // CHECK: arith.divf
        // CHECK: linalg.generic {{{{.*}}}} ins(%{{{{{SSA}}}}}, %[[MEAN]] : tensor<8x16xf32>, tensor<8x1xf32>)
        // CHECK-NEXT: ^bb
        // CHECK-NEXT: arith.subf
        // CHECK: tensor.insert_slice {{{{.*}}}} into %{{{{{SSA}}}}}[%{{{{{SSA}}}}}, %{{{{{SSA}}}}}]
    """)
