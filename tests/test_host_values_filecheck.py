"""FileCheck tests of the forms host values take in the emitted function.

Per-call values (host locals, items and closure cells of arguments, block sizes the host
computes) are scalar arguments named as Helion's device code names them; module-level
values are constants; a runtime block size steps its tile loop by an ``index`` value and
gives tiles of dynamic size that hold exactly their lanes. Numbers are checked by the
example tests and tests/test_kernel_arguments.py.
"""

from __future__ import annotations

import functools
import string
from typing import Any

import helion
from examples_util import bind_example, load_example_by_name
from filecheck_util import run_filecheck

from helion_mlir import generate_mlir

SSA = "[A-Za-z0-9_#]+"


@functools.cache
def emit(name: str, *, static_shapes: bool = True) -> str:
    module = load_example_by_name(name)
    if static_shapes:
        return generate_mlir(bind_example(module, "ragged"))
    kernel = helion.kernel(module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False)
    return generate_mlir(kernel.bind(module.make_args("ragged")))


def filecheck(text: str, patterns: str, **values: Any) -> None:
    run_filecheck(text, string.Template(patterns).substitute(V=SSA, **values))


def test_runtime_block_size_steps_the_tile_loop_by_an_index_argument() -> None:
    # block_k = next_power_of_2(cdiv(k, split_k)): an i64 argument, cast once at entry; the
    # loop steps by it, clips the last tile with it, and tile.id divides by it.
    filecheck(emit("split_k_barrier"), """
        // CHECK: func.func @split_k_barrier(%a: tensor<37x300xf32>, %b: tensor<300x29xf32>, %split_k: i64, %block_k: i64, %tmp: tensor<37x29x?xf32>, %out: tensor<37x29xf32>)
        // CHECK: %[[BK:$V]] = arith.index_cast %block_k : i64 to index
        // CHECK: scf.for %[[IV:$V]] = %{{$V}} to %{{$V}} step %[[BK]] iter_args
        // CHECK: arith.minsi %[[BK]], %{{$V}} : index
        // CHECK: scf.for %{{$V}} = %[[IV]] to %{{$V}} step %{{$V}} iter_args
        // CHECK: arith.divui %[[IV]], %[[BK]] : index
        // CHECK: tensor.insert_slice
    """)


def test_runtime_tile_holds_exactly_its_in_bounds_lanes() -> None:
    # chunk = cdiv(cols, num_chunks): the column tile is dynamic and exactly N = min(chunk,
    # cols - offset) wide (only the static row dimension of the ragged tile is padded).
    filecheck(emit("chunk_means"), """
        // CHECK: func.func @chunk_means(%x: tensor<37x101xf32>, %num_chunks: i64, %chunk: i64, %out: tensor<37x?xf32>)
        // CHECK: %[[STEP:$V]] = arith.index_cast %chunk : i64 to index
        // CHECK: scf.for %[[IV:$V]] = %{{$V}} to %{{$V}} step %[[STEP]]
        // CHECK: %[[N:$V]] = arith.minsi %[[STEP]], %{{$V}} : index
        // CHECK: tensor.extract_slice %x[%{{$V}}, %[[IV]]] [%{{$V}}, %[[N]]] [1, 1] : tensor<37x101xf32> to tensor<?x?xf32>
        // CHECK: tensor.empty(%[[N]]) : tensor<8x?xf32>
        // CHECK: tensor.insert_slice %{{$V}} into %{{$V}}[0, 0] [%{{$V}}, %[[N]]] [1, 1] : tensor<?x?xf32> into tensor<8x?xf32>
        // CHECK: arith.divui %[[IV]], %[[STEP]] : index
    """)


def test_host_computed_block_size_is_static_with_static_shapes_and_runtime_without() -> None:
    filecheck(emit("softmax_whole_row"), """
        // CHECK: func.func @softmax_whole_row(%x: tensor<37x100xf32>, %out: tensor<37x100xf32>)
        // CHECK: tensor<4x128xf32>
    """)
    filecheck(emit("softmax_whole_row", static_shapes=False), """
        // CHECK: func.func @softmax_whole_row(%x: tensor<?x?xf32>, %block_cols: i64, %out: tensor<?x?xf32>)
        // CHECK: %[[BC:$V]] = arith.index_cast %block_cols : i64 to index
        // CHECK: scf.for %{{$V}} = %{{$V}} to %{{$V}} step %[[BC]]
        // CHECK: tensor.insert_slice {{.*}} into tensor<4x?xf32>
    """)


def test_items_and_closure_cells_of_arguments_are_arguments_named_like_helions() -> None:
    filecheck(emit("bias_activation"), """
        // CHECK: func.func @bias_activation(%x: tensor<37x100xf32>, %bias: tensor<100xf32>, %clamp_item_0: f64, %clamp_item_1: f64, %out: tensor<37x100xf32>)
    """)
    # The float the score_mod captured is a scalar argument, its tensor a host tensor argument.
    filecheck(emit("alibi_attention"), """
        // CHECK: func.func @alibi_attention({{.*}}, %score_mod_closure_0: f64, %out: tensor<3x37x16xf32>, %score_mod_closure_1: tensor<3xf32>)
        // CHECK: tensor.extract_slice %score_mod_closure_1[
        // CHECK: arith.negf %score_mod_closure_0 : f64
    """)


def test_module_level_values_are_constants_and_a_module_level_block_size_gives_static_tiles() -> None:
    filecheck(emit("gelu_module_constants"), """
        // CHECK: func.func @gelu_module_constants(%x: tensor<37x100xf32>, %bias: tensor<100xf32>, %residual: tensor<37x100xf32>, %out: tensor<37x100xf32>)
        // CHECK: arith.constant 0.044715 : f32
        // CHECK: arith.constant 0.7978846 : f32
    """)
    filecheck(emit("rms_norm_module_eps"), """
        // CHECK: func.func @rms_norm_module_eps(%x: tensor<37x100xf32>, %weight: tensor<100xf32>, %out: tensor<37x100xf32>)
        // CHECK: arith.constant 1.0e-06 : f32
    """)
    filecheck(emit("linear_attention_chunked"), """
        // CHECK: func.func @linear_attention_chunked(%q: tensor<3x45x16xf32>, %k: tensor<3x45x16xf32>, %v: tensor<3x45x16xf32>, %out: tensor<3x45x16xf32>)
        // CHECK: %[[CHUNK:$V]] = arith.constant 16 : index
        // CHECK: scf.for %{{$V}} = %{{$V}} to %{{$V}} step %[[CHUNK]]
        // CHECK: arith.constant 0.125 : f32
        // CHECK: arith.constant 0.95 : f32
    """)


def test_bool_parameter_is_an_i1_argument_that_scf_if_branches_on() -> None:
    filecheck(emit("kl_div_loss"), """
        // CHECK: func.func @kl_div_loss(%y_pred: tensor<19x300xf32>, %y_true: tensor<19x300xf32>, %log_target: i1, %eps: f64, %loss: tensor<19xf32>)
        // CHECK: scf.if %log_target -> (tensor<8x64xf32>)
    """)
