"""FileCheck tests pinning the structure of the important lowerings.

Each test emits one example kernel (``examples/``) or a small kernel of
``tests/kernels/`` and checks the shape of the emitted MLIR: the function signature,
the tile-loop nest, ragged-tile clipping and padding, masks, inner loops, atomics,
phases, control flow, dynamic shapes, source locations and the dialects used per
output type.

Patterns are written with ``$V`` for an SSA value name (without its ``%``) and ``${...}`` for
values a test fills in (``string.Template``); everything else is FileCheck syntax.
"""

from __future__ import annotations

import functools
import string
from pathlib import Path
from types import ModuleType
from typing import Any

import helion
import pytest
import torch
from examples_util import EXAMPLES_DIR, load_example
from filecheck_util import run_filecheck

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir import generate_mlir
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.verify import parse_module

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
SSA = "[A-Za-z0-9_#]+"  # a value name or result (%x, %loop#1), without the %


def example(name: str) -> ModuleType:
    return load_example(EXAMPLES_DIR / f"{name}.py")


@functools.cache
def emit(name: str, shape: str = "divisible", output_type: str = "linalg-on-tensors",
         block_sizes: tuple[int, ...] | None = None, debug_info: bool = False) -> str:
    """The module an example emits (cached: several tests read the same module)."""
    module = example(name)
    config = helion.Config(block_sizes=list(block_sizes)) if block_sizes is not None else None
    return generate_mlir(module.KERNEL.bind(module.make_args(shape)), output_type=output_type, config=config,
                         debug_info=debug_info)


def filecheck(text: str, patterns: str, **values: Any) -> None:
    run_filecheck(text, string.Template(patterns).substitute(V=SSA, **values))


def source_position(path: str | Path, needle: str) -> tuple[int, int]:
    """(line, 1-based column) of the only line of ``path`` containing ``needle``."""
    hits = [(n, line.index(needle) + 1) for n, line in enumerate(Path(path).read_text().splitlines(), 1)
            if needle in line]
    assert len(hits) == 1, f"{needle!r} occurs {len(hits)} times in {path}"
    return hits[0]


# ----------------------------------------------------------------------------- signature
def test_signature_orders_tensor_params_then_scalars_then_host_tensors_and_returns_written() -> None:
    kernels = load_example(KERNELS_DIR / "abi_kernels.py")
    text = generate_mlir(kernels.scaled_update.bind(kernels.scaled_update_args()))
    # x, y are only read: passed, never stored into, not returned. acc (a parameter
    # updated in place) and out (host-allocated) are destinations: carried through the
    # loop and returned, parameters first. The unused bool still has its place.
    filecheck(text, """
        // CHECK-LABEL: func.func @scaled_update(%x: tensor<48xf32>, %acc: tensor<48xf64>, %y: tensor<48xi32>, %alpha: f64, %shift: i64, %flip: i1, %out: tensor<48xf32>) -> (tensor<48xf64>, tensor<48xf32>) {
        // CHECK:       %[[LOOP:$V]]:2 = scf.for %[[IV:$V]] = {{.*}} iter_args(%[[ACC:$V]] = %acc, %[[OUT:$V]] = %out) -> (tensor<48xf64>, tensor<48xf32>) {
        // CHECK-NEXT:    %[[OLD:$V]] = tensor.extract_slice %[[ACC]][%[[IV]]] [16] [1] : tensor<48xf64> to tensor<16xf64>
        // CHECK-NEXT:    tensor.extract_slice %x[%[[IV]]] [16] [1] : tensor<48xf32> to tensor<16xf32>
        // CHECK-NEXT:    arith.truncf %alpha : f64 to f32
        // CHECK-NOT:     into %x[
        // CHECK:         linalg.generic {{.*}} ins(%[[OLD]], %{{$V}} : tensor<16xf64>, tensor<16xf32>)
        // CHECK:         %[[NEWACC:$V]] = tensor.insert_slice %{{$V}} into %[[ACC]][%[[IV]]] [16] [1] : tensor<16xf64> into tensor<48xf64>
        // CHECK-NEXT:    tensor.extract_slice %y[%[[IV]]] [16] [1] : tensor<48xi32> to tensor<16xi32>
        // CHECK-NEXT:    arith.trunci %shift : i64 to i32
        // CHECK-NOT:     into %y[
        // CHECK:         %[[NEWOUT:$V]] = tensor.insert_slice %{{$V}} into %[[OUT]][%[[IV]]] [16] [1] : tensor<16xf32> into tensor<48xf32>
        // CHECK-NEXT:    scf.yield %[[NEWACC]], %[[NEWOUT]] : tensor<48xf64>, tensor<48xf32>
        // CHECK-NEXT:  }
        // CHECK-NEXT:  return %[[LOOP]]#0, %[[LOOP]]#1 : tensor<48xf64>, tensor<48xf32>
    """)


def test_host_tensors_follow_first_use_across_phases() -> None:
    # block_scan writes block_sums in phase 1 and out in phase 2 (and allocates them in that order).
    filecheck(emit("block_scan"), """
        // CHECK-LABEL: func.func @block_scan(%x: tensor<1024xf32>, %block_sums: tensor<{{[?0-9]+}}xf32>, %out: tensor<1024xf32>) -> (tensor<{{[?0-9]+}}xf32>, tensor<1024xf32>)
    """)


# ---------------------------------------------------------------------------------- grid
@pytest.mark.parametrize("block_sizes", [None, (8, 16)], ids=["kernel-config", "config-8x16"])
def test_grid_is_nested_scf_for_stepping_by_config_block_sizes(block_sizes: tuple[int, int] | None) -> None:
    bm, bn = block_sizes or example("add").KERNEL.configs[0].block_sizes
    filecheck(emit("add", block_sizes=block_sizes), """
        // CHECK-LABEL: func.func @add(%x: tensor<64x128xf32>, %y: tensor<64x128xf32>, %out: tensor<64x128xf32>) -> (tensor<64x128xf32>) {
        // CHECK-NEXT:    %[[ZERO:$V]] = arith.constant 0 : index
        // CHECK-NEXT:    %[[M:$V]] = arith.constant 64 : index
        // CHECK-NEXT:    %[[BM:$V]] = arith.constant ${bm} : index
        // CHECK-NEXT:    %[[ROWS:$V]] = scf.for %[[IVM:$V]] = %[[ZERO]] to %[[M]] step %[[BM]] iter_args(%[[ITM:$V]] = %out) -> (tensor<64x128xf32>) {
        // CHECK-NEXT:      %[[N:$V]] = arith.constant 128 : index
        // CHECK-NEXT:      %[[BN:$V]] = arith.constant ${bn} : index
        // CHECK-NEXT:      %[[COLS:$V]] = scf.for %[[IVN:$V]] = %[[ZERO]] to %[[N]] step %[[BN]] iter_args(%[[ITN:$V]] = %[[ITM]]) -> (tensor<64x128xf32>) {
        // CHECK-NEXT:        tensor.extract_slice %x[%[[IVM]], %[[IVN]]] [${bm}, ${bn}] [1, 1] : tensor<64x128xf32> to tensor<${bm}x${bn}xf32>
        // CHECK-NEXT:        tensor.extract_slice %y[%[[IVM]], %[[IVN]]] [${bm}, ${bn}] [1, 1] : tensor<64x128xf32> to tensor<${bm}x${bn}xf32>
        // CHECK:             %[[ST:$V]] = tensor.insert_slice %{{$V}} into %[[ITN]][%[[IVM]], %[[IVN]]] [${bm}, ${bn}] [1, 1] : tensor<${bm}x${bn}xf32> into tensor<64x128xf32>
        // CHECK-NEXT:        scf.yield %[[ST]] : tensor<64x128xf32>
        // CHECK-NEXT:      }
        // CHECK-NEXT:      scf.yield %[[COLS]] : tensor<64x128xf32>
        // CHECK-NEXT:    }
        // CHECK-NEXT:    return %[[ROWS]] : tensor<64x128xf32>
    """, bm=bm, bn=bn)


# --------------------------------------------------------------------------- ragged tiles
def test_ragged_tiles_clip_extents_pad_loads_and_store_only_the_valid_region() -> None:
    filecheck(emit("add", "ragged"), """
        // CHECK-LABEL: func.func @add(%x: tensor<37x100xf32>, %y: tensor<37x100xf32>, %out: tensor<37x100xf32>)
        // CHECK:       %[[M:$V]] = arith.constant 37 : index
        // CHECK-NEXT:  %[[BM:$V]] = arith.constant 16 : index
        // CHECK-NEXT:  scf.for %[[IVM:$V]] = %{{$V}} to %[[M]] step %[[BM]] iter_args(%[[ITM:$V]] = %out)
        // CHECK-NEXT:    %[[LEFTM:$V]] = arith.subi %[[M]], %[[IVM]] : index
        // CHECK-NEXT:    %[[EM:$V]] = arith.minsi %[[BM]], %[[LEFTM]] : index
        // CHECK-NEXT:    %[[N:$V]] = arith.constant 100 : index
        // CHECK-NEXT:    %[[BN:$V]] = arith.constant 32 : index
        // CHECK-NEXT:    scf.for %[[IVN:$V]] = %{{$V}} to %[[N]] step %[[BN]] iter_args(%[[ITN:$V]] = %[[ITM]])
        // CHECK-NEXT:      %[[LEFTN:$V]] = arith.subi %[[N]], %[[IVN]] : index
        // CHECK-NEXT:      %[[EN:$V]] = arith.minsi %[[BN]], %[[LEFTN]] : index
        // CHECK-NEXT:      %[[XS:$V]] = tensor.extract_slice %x[%[[IVM]], %[[IVN]]] [%[[EM]], %[[EN]]] [1, 1] : tensor<37x100xf32> to tensor<?x?xf32>
        // CHECK-NEXT:      %[[PAD:$V]] = arith.constant 0.0 : f32
        // CHECK-NEXT:      %[[XE:$V]] = tensor.empty() : tensor<16x32xf32>
        // CHECK-NEXT:      %[[XF:$V]] = linalg.fill ins(%[[PAD]] : f32) outs(%[[XE]] : tensor<16x32xf32>) -> tensor<16x32xf32>
        // CHECK-NEXT:      %[[XT:$V]] = tensor.insert_slice %[[XS]] into %[[XF]][0, 0] [%[[EM]], %[[EN]]] [1, 1] : tensor<?x?xf32> into tensor<16x32xf32>
        // CHECK-NEXT:      %[[YS:$V]] = tensor.extract_slice %y[%[[IVM]], %[[IVN]]] [%[[EM]], %[[EN]]] [1, 1] : tensor<37x100xf32> to tensor<?x?xf32>
        // CHECK-NEXT:      %[[YE:$V]] = tensor.empty() : tensor<16x32xf32>
        // CHECK-NEXT:      %[[YF:$V]] = linalg.fill ins(%[[PAD]] : f32) outs(%[[YE]] : tensor<16x32xf32>) -> tensor<16x32xf32>
        // CHECK-NEXT:      %[[YT:$V]] = tensor.insert_slice %[[YS]] into %[[YF]][0, 0] [%[[EM]], %[[EN]]] [1, 1] : tensor<?x?xf32> into tensor<16x32xf32>
        // CHECK:           %[[SUM:$V]] = linalg.generic {{.*}} ins(%[[XT]], %[[YT]] : tensor<16x32xf32>, tensor<16x32xf32>)
        // CHECK:             arith.addf
        // CHECK:           %[[VALID:$V]] = tensor.extract_slice %[[SUM]][0, 0] [%[[EM]], %[[EN]]] [1, 1] : tensor<16x32xf32> to tensor<?x?xf32>
        // CHECK-NEXT:      %[[ST:$V]] = tensor.insert_slice %[[VALID]] into %[[ITN]][%[[IVM]], %[[IVN]]] [%[[EM]], %[[EN]]] [1, 1] : tensor<?x?xf32> into tensor<37x100xf32>
        // CHECK-NEXT:      scf.yield %[[ST]] : tensor<37x100xf32>
    """)


def test_divisible_tiles_are_neither_clipped_nor_padded() -> None:
    filecheck(emit("add"), """
        // CHECK-LABEL: func.func @add(
        // CHECK-NOT:   arith.minsi
        // CHECK-NOT:   linalg.fill
        // CHECK-NOT:   tensor<?x
        // CHECK:       return
    """)


def test_mask_to_replaces_out_of_bounds_lanes_with_the_reduction_identity() -> None:
    # column_stats reduces each [8, 32] block over its (ragged) rows with amax and amin;
    # lanes outside the valid extents read -inf for the max and +inf for the min.
    filecheck(emit("column_stats", "ragged"), """
        // CHECK-LABEL: func.func @column_stats(
        // CHECK:       %[[ER:$V]] = arith.minsi
        // CHECK:       %[[EC:$V]] = arith.minsi
        // CHECK:       %[[TILE:$V]] = tensor.insert_slice %{{$V}} into %{{$V}}[0, 0] [%[[ER]], %[[EC]]] [1, 1] : tensor<?x?xf32> into tensor<8x32xf32>
        // CHECK:       %[[FORMAX:$V]] = linalg.generic {{.*}} ins(%[[TILE]] : tensor<8x32xf32>)
        // CHECK-NEXT:    ^{{$V}}(%[[IN:$V]]: f32
        // CHECK-DAG:     %[[I:$V]] = linalg.index 0 : index
        // CHECK-DAG:     %[[J:$V]] = linalg.index 1 : index
        // CHECK:         %[[ROWOK:$V]] = arith.cmpi slt, %[[I]], %[[ER]] : index
        // CHECK-NEXT:    %[[COLOK:$V]] = arith.cmpi slt, %[[J]], %[[EC]] : index
        // CHECK-NEXT:    %[[OK:$V]] = arith.andi %[[ROWOK]], %[[COLOK]] : i1
        // CHECK-NEXT:    %[[NEGINF:$V]] = arith.constant 0xFF800000 : f32
        // CHECK-NEXT:    %[[MASKED:$V]] = arith.select %[[OK]], %[[IN]], %[[NEGINF]] : f32
        // CHECK-NEXT:    linalg.yield %[[MASKED]] : f32
        // CHECK:       %[[ROWS:$V]] = tensor.extract_slice %[[FORMAX]][0, 0] [%[[ER]], 32] [1, 1] : tensor<8x32xf32> to tensor<?x32xf32>
        // CHECK:       linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[ROWS]] : tensor<?x32xf32>)
        // CHECK:         arith.maximumf
        // CHECK:       %[[FORMIN:$V]] = linalg.generic {{.*}} ins(%[[TILE]] : tensor<8x32xf32>)
        // CHECK:         %[[POSINF:$V]] = arith.constant 0x7F800000 : f32
        // CHECK-NEXT:    arith.select %{{$V}}, %{{$V}}, %[[POSINF]] : f32
        // CHECK:       tensor.extract_slice %[[FORMIN]][0, 0] [%[[ER]], 32] [1, 1]
        // CHECK:         arith.minimumf
    """)
    filecheck(emit("column_stats"), """
        // CHECK-LABEL: func.func @column_stats(
        // CHECK-NOT:   arith.cmpi slt
        // CHECK:       return
    """)


# ----------------------------------------------------------------------------- inner loops
def test_inner_tile_loop_carries_f32_accumulator_into_bf16_linalg_matmul() -> None:
    filecheck(emit("matmul_bf16"), """
        // CHECK-LABEL: func.func @matmul_bf16(%a: tensor<32x64xbf16>, %b: tensor<64x32xbf16>, %out: tensor<32x32xbf16>) -> (tensor<32x32xbf16>)
        // CHECK:       %[[B32:$V]] = arith.constant 32 : index
        // CHECK-NEXT:  %[[B16:$V]] = arith.constant 16 : index
        // CHECK-NEXT:  scf.for %[[IVM:$V]] = {{.*}} step %[[B16]] iter_args(
        // CHECK-NEXT:    scf.for %[[IVN:$V]] = {{.*}} step %[[B16]] iter_args(%[[ITN:$V]] =
        // CHECK-NEXT:      %[[ZERO:$V]] = arith.constant 0.0 : f32
        // CHECK-NEXT:      %[[E:$V]] = tensor.empty() : tensor<16x16xf32>
        // CHECK-NEXT:      %[[ACC0:$V]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E]] : tensor<16x16xf32>) -> tensor<16x16xf32>
        // CHECK-NEXT:      %[[K:$V]] = arith.constant 64 : index
        // CHECK-NEXT:      %[[KLOOP:$V]] = scf.for %[[IVK:$V]] = %{{$V}} to %[[K]] step %[[B32]] iter_args(%[[ACC:$V]] = %[[ACC0]]) -> (tensor<16x16xf32>) {
        // CHECK-NEXT:        %[[A:$V]] = tensor.extract_slice %a[%[[IVM]], %[[IVK]]] [16, 32] [1, 1] : tensor<32x64xbf16> to tensor<16x32xbf16>
        // CHECK-NEXT:        %[[B:$V]] = tensor.extract_slice %b[%[[IVK]], %[[IVN]]] [32, 16] [1, 1] : tensor<64x32xbf16> to tensor<32x16xbf16>
        // CHECK-NEXT:        %[[DOT:$V]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<16x32xbf16>, tensor<32x16xbf16>) outs(%[[ACC]] : tensor<16x16xf32>) -> tensor<16x16xf32>
        // CHECK-NEXT:        scf.yield %[[DOT]] : tensor<16x16xf32>
        // CHECK-NEXT:      }
        // CHECK:           linalg.generic {{.*}} ins(%[[KLOOP]] : tensor<16x16xf32>) outs(%{{$V}} : tensor<16x16xbf16>)
        // CHECK:             arith.truncf %{{$V}} : f32 to bf16
        // CHECK:           tensor.insert_slice %{{$V}} into %[[ITN]][%[[IVM]], %[[IVN]]] [16, 16] [1, 1] : tensor<16x16xbf16> into tensor<32x32xbf16>
    """)


def test_ragged_reduction_dim_tiles_are_zero_padded_before_the_matmul() -> None:
    # Out-of-range K lanes must contribute 0 to the products: both operands are padded with 0.
    filecheck(emit("matmul", "ragged"), """
        // CHECK-LABEL: func.func @matmul(
        // CHECK:       %[[EM:$V]] = arith.minsi
        // CHECK:       %[[EN:$V]] = arith.minsi
        // CHECK-NEXT:  %[[ZERO:$V]] = arith.constant 0.0 : f32
        // CHECK:       scf.for %[[IVK:$V]] = {{.*}} iter_args(%[[ACC:$V]] = %{{$V}}) -> (tensor<16x16xf32>)
        // CHECK-NEXT:    arith.subi
        // CHECK-NEXT:    %[[EK:$V]] = arith.minsi
        // CHECK-NEXT:    %[[XS:$V]] = tensor.extract_slice %x[%{{$V}}, %[[IVK]]] [%[[EM]], %[[EK]]] [1, 1]
        // CHECK-NEXT:    %[[XE:$V]] = tensor.empty() : tensor<16x32xf32>
        // CHECK-NEXT:    %[[XF:$V]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[XE]] : tensor<16x32xf32>)
        // CHECK-NEXT:    %[[XT:$V]] = tensor.insert_slice %[[XS]] into %[[XF]][0, 0] [%[[EM]], %[[EK]]] [1, 1]
        // CHECK-NEXT:    %[[YS:$V]] = tensor.extract_slice %y[%[[IVK]], %{{$V}}] [%[[EK]], %[[EN]]] [1, 1]
        // CHECK-NEXT:    %[[YE:$V]] = tensor.empty() : tensor<32x16xf32>
        // CHECK-NEXT:    %[[YF:$V]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[YE]] : tensor<32x16xf32>)
        // CHECK-NEXT:    %[[YT:$V]] = tensor.insert_slice %[[YS]] into %[[YF]][0, 0] [%[[EK]], %[[EN]]] [1, 1]
        // CHECK:         %[[MM:$V]] = linalg.matmul ins(%[[XT]], %[[YT]] : tensor<16x32xf32>, tensor<32x16xf32>)
        // CHECK:         linalg.generic {{.*}} ins(%[[ACC]], %[[MM]] : tensor<16x16xf32>, tensor<16x16xf32>)
    """)


# ---------------------------------------------------------------------------------- atomics
def test_atomic_add_at_tile_index_adds_the_valid_region_into_the_destination_slice() -> None:
    filecheck(emit("matmul_split_k", "ragged"), """
        // CHECK-LABEL: func.func @matmul_split_k(
        // CHECK:       scf.for %[[IVM:$V]] =
        // CHECK:         %[[EM:$V]] = arith.minsi
        // CHECK:         scf.for %[[IVN:$V]] =
        // CHECK:           %[[EN:$V]] = arith.minsi
        // CHECK:           scf.for %{{$V}} = {{.*}} iter_args(%[[DST:$V]] = %{{$V}}) -> (tensor<37x29xf32>)
        // CHECK:             %[[PARTIAL:$V]] = scf.for {{.*}} -> (tensor<16x16xf32>)
        // CHECK:               scf.yield %{{$V}} : tensor<16x16xf32>
        // CHECK-NEXT:        }
        // CHECK-NEXT:        %[[OLD:$V]] = tensor.extract_slice %[[DST]][%[[IVM]], %[[IVN]]] [%[[EM]], %[[EN]]] [1, 1] : tensor<37x29xf32> to tensor<?x?xf32>
        // CHECK-NEXT:        %[[ADD:$V]] = tensor.extract_slice %[[PARTIAL]][0, 0] [%[[EM]], %[[EN]]] [1, 1] : tensor<16x16xf32> to tensor<?x?xf32>
        // CHECK:             %[[NEW:$V]] = linalg.generic {{.*}} ins(%[[OLD]], %[[ADD]] : tensor<?x?xf32>, tensor<?x?xf32>)
        // CHECK-NEXT:          ^{{$V}}(%[[L:$V]]: f32, %[[R:$V]]: f32,
        // CHECK-NEXT:          %[[S:$V]] = arith.addf %[[L]], %[[R]] : f32
        // CHECK-NEXT:          linalg.yield %[[S]] : f32
        // CHECK:             %[[STORED:$V]] = tensor.insert_slice %[[NEW]] into %[[DST]][%[[IVM]], %[[IVN]]] [%[[EM]], %[[EN]]] [1, 1] : tensor<?x?xf32> into tensor<37x29xf32>
        // CHECK:             scf.yield %[[STORED]] : tensor<37x29xf32>
    """)


def test_atomic_add_at_tensor_index_updates_element_by_element_over_valid_lanes() -> None:
    # histogram: hl.atomic_add(counts, [bins], 1) with data-dependent bins on a ragged tile;
    # nothing reads the old values, so the lane loop carries only the destination. counts has
    # one dynamic size (num_bins), read once at entry: the nested lane loop carries it with a
    # trailing unit dimension whose sizes are stated on the way in and out, and the bin is
    # compared with the entry size, never a tensor.dim of the loop-carried value. A bin
    # outside counts adds nothing: the update runs in a loop of one iteration or none (an
    # scf.if of a dynamic shape is what IREE cannot size, docs/downstream.md). The element is
    # stored as a one-element slice (see docs/downstream.md).
    filecheck(emit("histogram", "ragged"), r"""
        // CHECK-LABEL: func.func @histogram(%x: tensor<1000xf32>, %lo: f64, %hi: f64, %num_bins: i64, %bin_width: f64, %counts: tensor<?xi32>) -> (tensor<?xi32>)
        // CHECK-NEXT:    %[[C0:$V]] = arith.constant 0 : index
        // CHECK-NEXT:    %[[BINS:$V]] = tensor.dim %counts, %[[C0]] : tensor<?xi32>
        // CHECK-NOT:     tensor.dim
        // CHECK:         scf.for %{{$V}} = {{.*}} iter_args(%[[DST:$V]] = %counts) -> (tensor<?xi32>)
        // CHECK:           %[[EXTENT:$V]] = arith.minsi
        // CHECK:           %[[ONE:$V]] = arith.constant 1 : index
        // CHECK:           %[[ONES:$V]] = linalg.fill ins(%{{$V}} : i32) outs(%{{$V}} : tensor<64xi32>)
        // CHECK-NEXT:      %[[WIDE:$V]] = tensor.expand_shape %[[DST]] {{\[\[}}0, 1]] output_shape [%[[BINS]], 1] : tensor<?xi32> into tensor<?x1xi32>
        // CHECK-NEXT:      %[[LANES:$V]] = scf.for %[[LANE:$V]] = %{{$V}} to %[[EXTENT]] step %[[ONE]] iter_args(%[[CARRIED:$V]] = %[[WIDE]]) -> (tensor<?x1xi32>)
        // CHECK-NEXT:        %[[CUR:$V]] = tensor.collapse_shape %[[CARRIED]] {{\[\[}}0, 1]] : tensor<?x1xi32> into tensor<?xi32>
        // CHECK-NEXT:        %[[BIN:$V]] = tensor.extract %{{$V}}[%[[LANE]]] : tensor<64xi64>
        // CHECK-NEXT:        %[[AT:$V]] = arith.index_cast %[[BIN]] : i64 to index
        // CHECK-NEXT:        %[[INSIDE:$V]] = arith.cmpi ult, %[[AT]], %[[BINS]] : index
        // CHECK-NEXT:        %[[TRIPS:$V]] = arith.select %[[INSIDE]], %[[ONE]], %{{$V}} : index
        // CHECK-NEXT:        %[[WIDER:$V]] = tensor.expand_shape %[[CUR]] {{\[\[}}0, 1, 2]] output_shape [%[[BINS]], 1, 1] : tensor<?xi32> into tensor<?x1x1xi32>
        // CHECK-NEXT:        %[[ADDED:$V]] = scf.for %{{$V}} = %{{$V}} to %[[TRIPS]] step %[[ONE]] iter_args(%[[IN:$V]] = %[[WIDER]]) -> (tensor<?x1x1xi32>)
        // CHECK-NEXT:          %[[OLDS:$V]] = tensor.collapse_shape %[[IN]] {{\[\[}}0, 1, 2]] : tensor<?x1x1xi32> into tensor<?xi32>
        // CHECK-NEXT:          %[[INC:$V]] = tensor.extract %[[ONES]][%[[LANE]]] : tensor<64xi32>
        // CHECK-NEXT:          %[[OLD:$V]] = tensor.extract %[[OLDS]][%[[AT]]] : tensor<?xi32>
        // CHECK-NEXT:          %[[SUM:$V]] = arith.addi %[[OLD]], %[[INC]] : i32
        // CHECK-NEXT:          %[[ELT:$V]] = tensor.from_elements %[[SUM]] : tensor<1xi32>
        // CHECK-NEXT:          %[[UPD:$V]] = tensor.insert_slice %[[ELT]] into %[[OLDS]][%[[AT]]] [1] [1] : tensor<1xi32> into tensor<?xi32>
        // CHECK-NEXT:          %[[OUT:$V]] = tensor.expand_shape %[[UPD]] {{\[\[}}0, 1, 2]] output_shape [%[[BINS]], 1, 1] : tensor<?xi32> into tensor<?x1x1xi32>
        // CHECK-NEXT:          scf.yield %[[OUT]] : tensor<?x1x1xi32>
        // CHECK-NEXT:        }
        // CHECK-NEXT:        %[[DONE_LANE:$V]] = tensor.collapse_shape %[[ADDED]] {{\[\[}}0, 1, 2]] : tensor<?x1x1xi32> into tensor<?xi32>
        // CHECK-NEXT:        %[[BACK:$V]] = tensor.expand_shape %[[DONE_LANE]] {{\[\[}}0, 1]] output_shape [%[[BINS]], 1] : tensor<?xi32> into tensor<?x1xi32>
        // CHECK-NEXT:        scf.yield %[[BACK]] : tensor<?x1xi32>
        // CHECK-NEXT:      }
        // CHECK-NEXT:      %[[DONE:$V]] = tensor.collapse_shape %[[LANES]] {{\[\[}}0, 1]] : tensor<?x1xi32> into tensor<?xi32>
        // CHECK-NEXT:      scf.yield %[[DONE]] : tensor<?xi32>
    """)


def test_atomic_max_min_cas_at_tile_index_combine_with_the_matching_op() -> None:
    filecheck(emit("column_stats"), """
        // CHECK-LABEL: func.func @column_stats(%x: tensor<64x128xf32>, %col_max: tensor<128xf32>, %col_min: tensor<128xf32>, %col_sum: tensor<128xf32>, %has_negative: tensor<128xi32>)
        // CHECK-SAME:    -> (tensor<128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128xi32>)
        // CHECK:       scf.for {{.*}} iter_args(%[[MAX0:$V]] = %col_max, %[[MIN0:$V]] = %col_min, %[[SUM0:$V]] = %col_sum, %[[NEG0:$V]] = %has_negative)
        // CHECK:         scf.for {{.*}} iter_args(%[[MAX:$V]] = %[[MAX0]], %[[MIN:$V]] = %[[MIN0]], %[[SUM:$V]] = %[[SUM0]], %[[NEG:$V]] = %[[NEG0]])
        // CHECK:         %[[OLDMAX:$V]] = tensor.extract_slice %[[MAX]][
        // CHECK:         linalg.generic {{.*}} ins(%[[OLDMAX]], %{{$V}} :
        // CHECK:           arith.maximumf
        // CHECK:         tensor.insert_slice %{{$V}} into %[[MAX]][
        // CHECK:         %[[OLDMIN:$V]] = tensor.extract_slice %[[MIN]][
        // CHECK:         linalg.generic {{.*}} ins(%[[OLDMIN]], %{{$V}} :
        // CHECK:           arith.minimumf
        // CHECK:         tensor.insert_slice %{{$V}} into %[[MIN]][
        // CHECK:         %[[OLDSUM:$V]] = tensor.extract_slice %[[SUM]][
        // CHECK:         linalg.generic {{.*}} ins(%[[OLDSUM]], %{{$V}} :
        // CHECK:           arith.addf
        // CHECK:         tensor.insert_slice %{{$V}} into %[[SUM]][
        // CHECK:         %[[OLDNEG:$V]] = tensor.extract_slice %[[NEG]][
        // CHECK:         linalg.generic {{.*}} ins(%[[OLDNEG]], %{{$V}}, %{{$V}} :
        // CHECK-NEXT:      ^{{$V}}(%[[CUR:$V]]: i32, %[[EXPECTED:$V]]: i32, %[[DESIRED:$V]]: i32,
        // CHECK-NEXT:      %[[SAME:$V]] = arith.cmpi eq, %[[CUR]], %[[EXPECTED]] : i32
        // CHECK-NEXT:      %[[SWAPPED:$V]] = arith.select %[[SAME]], %[[DESIRED]], %[[CUR]] : i32
        // CHECK:         tensor.insert_slice %{{$V}} into %[[NEG]][
    """)


# ----------------------------------------------------------------------------------- phases
def test_barrier_phases_are_consecutive_loop_nests_and_the_second_reads_the_first() -> None:
    filecheck(emit("global_max_normalize"), """
        // CHECK-LABEL: func.func @global_max_normalize(%x: tensor<1024xf32>, %peak: tensor<1xf32>, %out: tensor<1024xf32>) -> (tensor<1xf32>, tensor<1024xf32>)
        // CHECK:       %[[PHASE1:$V]] = scf.for {{.*}} iter_args(%{{$V}} = %peak) -> (tensor<1xf32>) {
        // CHECK:         arith.maximumf
        // CHECK:         scf.yield
        // CHECK-NEXT:  }
        // CHECK-NEXT:  %[[PHASE2:$V]] = scf.for {{.*}} iter_args(%{{$V}} = %out) -> (tensor<1024xf32>) {
        // CHECK:         %[[MAX:$V]] = tensor.extract_slice %[[PHASE1]][0] [1] [1] : tensor<1xf32> to tensor<f32>
        // CHECK:         linalg.generic {{.*}} ins(%{{$V}}, %[[MAX]] : tensor<64xf32>, tensor<f32>)
        // CHECK:           arith.divf
        // CHECK:         scf.yield
        // CHECK-NEXT:  }
        // CHECK-NEXT:  return %[[PHASE1]], %[[PHASE2]] : tensor<1xf32>, tensor<1024xf32>
    """)
    # block_scan's second phase loops over the first phase's per-tile sums.
    filecheck(emit("block_scan"), """
        // CHECK-LABEL: func.func @block_scan(
        // CHECK:       %[[SUMS:$V]] = scf.for {{.*}} iter_args(%{{$V}} = %block_sums) -> (tensor<?xf32>) {
        // CHECK:       scf.for {{.*}} iter_args(%{{$V}} = %out) -> (tensor<1024xf32>) {
        // CHECK:         scf.for
        // CHECK:           tensor.extract_slice %[[SUMS]][
    """)


# ------------------------------------------------------------------------------ control flow
def test_if_on_a_loaded_value_becomes_scf_if_yielding_the_written_tensor() -> None:
    filecheck(emit("row_branch"), """
        // CHECK-LABEL: func.func @row_branch(
        // CHECK:       scf.for %{{$V}} = {{.*}} iter_args(%[[ROWCUR:$V]] = %out) -> (tensor<16x128xf32>)
        // CHECK:         scf.for %{{$V}} = {{.*}} iter_args(%[[CUR:$V]] = %[[ROWCUR]]) -> (tensor<16x128xf32>)
        // CHECK:         %[[COND:$V]] = tensor.extract %{{$V}}[] : tensor<i1>
        // CHECK-NEXT:    %[[IF:$V]] = scf.if %[[COND]] -> (tensor<16x128xf32>) {
        // CHECK:           arith.cmpf olt
        // CHECK:           %[[THEN:$V]] = tensor.insert_slice %{{$V}} into %[[CUR]][
        // CHECK-NEXT:      scf.yield %[[THEN]] : tensor<16x128xf32>
        // CHECK-NEXT:    } else {
        // CHECK:           math.exp
        // CHECK:           %[[ELSE:$V]] = tensor.insert_slice %{{$V}} into %[[CUR]][
        // CHECK-NEXT:      scf.yield %[[ELSE]] : tensor<16x128xf32>
        // CHECK-NEXT:    }
        // CHECK-NEXT:    scf.yield %[[IF]] : tensor<16x128xf32>
    """)


def test_if_on_tile_bounds_tests_index_arithmetic_on_clipped_tile_ends() -> None:
    # tile_branch: `if tile_c.begin > tile_r.end - 1 + diagonal`, with ragged tiles.
    filecheck(emit("tile_branch", "ragged"), """
        // CHECK-LABEL: func.func @tile_branch(%x: tensor<45x45xf32>, %diagonal: i64, %out: tensor<45x45xf32>)
        // CHECK:       scf.for %[[IVR:$V]] =
        // CHECK:         %[[ER:$V]] = arith.minsi
        // CHECK:         scf.for %[[IVC:$V]] = {{.*}} iter_args(%[[CUR:$V]] = %{{$V}})
        // CHECK:           %[[END:$V]] = arith.addi %[[IVR]], %[[ER]] : index
        // CHECK:           %[[LAST:$V]] = arith.subi %[[END]], %{{$V}} : index
        // CHECK-NEXT:      %[[DIAG:$V]] = arith.index_cast %diagonal : i64 to index
        // CHECK-NEXT:      %[[BOUND:$V]] = arith.addi %[[LAST]], %[[DIAG]] : index
        // CHECK-NEXT:      %[[ABOVE:$V]] = arith.cmpi sgt, %[[IVC]], %[[BOUND]] : index
        // CHECK-NEXT:      %[[IF:$V]] = scf.if %[[ABOVE]] -> (tensor<45x45xf32>) {
        // CHECK:             tensor.insert_slice %{{$V}} into %[[CUR]][
        // CHECK:           } else {
        // CHECK:             tensor.insert_slice %{{$V}} into %[[CUR]][
        // CHECK:           }
        // CHECK-NEXT:      scf.yield %[[IF]] : tensor<45x45xf32>
    """)


def test_while_loop_becomes_scf_while_carrying_counter_and_values() -> None:
    filecheck(emit("newton_rsqrt"), """
        // CHECK-LABEL: func.func @newton_rsqrt(%x: tensor<256xf32>, %iters: i64, %out: tensor<256xf32>)
        // CHECK:       scf.for {{.*}} iter_args(%[[CUR:$V]] = %out)
        // CHECK:         %[[Y0:$V]] = linalg.fill ins(%{{$V}} : f32) outs(%{{$V}} : tensor<64xf32>)
        // CHECK:         %[[STEP0:$V]] = linalg.fill ins(%{{$V}} : i32) outs(%{{$V}} : tensor<i32>)
        // CHECK-NEXT:    %[[LOOP:$V]]:2 = scf.while (%[[STEP:$V]] = %[[STEP0]], %[[Y:$V]] = %[[Y0]]) : (tensor<i32>, tensor<64xf32>) -> (tensor<i32>, tensor<64xf32>) {
        // CHECK:           arith.trunci %iters : i64 to i32
        // CHECK:           linalg.generic {{.*}} ins(%[[STEP]], %{{$V}} : tensor<i32>, tensor<i32>)
        // CHECK:             arith.cmpi slt
        // CHECK:           %[[GO:$V]] = tensor.extract %{{$V}}[] : tensor<i1>
        // CHECK-NEXT:      scf.condition(%[[GO]]) %[[STEP]], %[[Y]] : tensor<i32>, tensor<64xf32>
        // CHECK-NEXT:    } do {
        // CHECK:           scf.yield %{{$V}}, %{{$V}} : tensor<i32>, tensor<64xf32>
        // CHECK-NEXT:    }
        // CHECK-NEXT:    %[[ST:$V]] = tensor.insert_slice %[[LOOP]]#1 into %[[CUR]][
    """)
    # row_rescale: the condition reads a loop-carried value (data-dependent trip count).
    filecheck(emit("row_rescale"), """
        // CHECK-LABEL: func.func @row_rescale(
        // CHECK:       %[[LOOP:$V]]:3 = scf.while (%[[PEAK:$V]] = %{{$V}}, %[[VALS:$V]] = %{{$V}}, %[[COUNT:$V]] = %{{$V}}) : (tensor<f32>, tensor<64xf32>, tensor<i32>)
        // CHECK:         linalg.generic {{.*}} ins(%[[PEAK]], %{{$V}} : tensor<f32>, tensor<f32>)
        // CHECK:           arith.cmpf ogt
        // CHECK:         scf.condition(%{{$V}}) %[[PEAK]], %[[VALS]], %[[COUNT]]
        // CHECK:       } do {
        // CHECK:       tensor.insert_slice %[[LOOP]]#1 into
        // CHECK-NEXT:  tensor.insert_slice %[[LOOP]]#2 into
    """)


def test_hl_reduce_becomes_scf_for_over_the_reduced_dim_combining_columns() -> None:
    filecheck(emit("argmax_reduce"), """
        // CHECK-LABEL: func.func @argmax_reduce(
        // CHECK:       %[[ZERO:$V]] = arith.constant 0 : index
        // CHECK:       %[[VALS:$V]] = tensor.extract_slice %x[{{.*}}] [8, 32] [1, 1]
        // CHECK:       %[[IDXS:$V]] = linalg.generic {{.*}} outs(%{{$V}} : tensor<8x32xi64>)
        // CHECK:       %[[V0:$V]] = tensor.extract_slice %[[VALS]][0, %[[ZERO]]] [8, 1] [1, 1] : tensor<8x32xf32> to tensor<8xf32>
        // CHECK-NEXT:  %[[I0:$V]] = tensor.extract_slice %[[IDXS]][0, %[[ZERO]]] [8, 1] [1, 1] : tensor<8x32xi64> to tensor<8xi64>
        // CHECK-NEXT:  %[[ONE:$V]] = arith.constant 1 : index
        // CHECK-NEXT:  %[[RED:$V]]:2 = scf.for %[[COL:$V]] = %[[ONE]] to %{{$V}} step %[[ONE]] iter_args(%[[BESTV:$V]] = %[[V0]], %[[BESTI:$V]] = %[[I0]]) -> (tensor<8xf32>, tensor<8xi64>) {
        // CHECK-NEXT:    %[[V:$V]] = tensor.extract_slice %[[VALS]][0, %[[COL]]] [8, 1] [1, 1]
        // CHECK-NEXT:    %[[I:$V]] = tensor.extract_slice %[[IDXS]][0, %[[COL]]] [8, 1] [1, 1]
        // CHECK:         linalg.generic {{.*}} ins(%[[V]], %[[BESTV]] : tensor<8xf32>, tensor<8xf32>)
        // CHECK-NEXT:      ^{{.*}}
        // CHECK-NEXT:      arith.cmpf ogt
        // CHECK:         %[[NEWV:$V]] = linalg.generic {{.*}} ins(%{{$V}}, %[[V]], %[[BESTV]] : tensor<8xi1>, tensor<8xf32>, tensor<8xf32>)
        // CHECK:         %[[NEWI:$V]] = linalg.generic {{.*}} ins(%{{$V}}, %[[I]], %[[BESTI]] : tensor<8xi1>, tensor<8xi64>, tensor<8xi64>)
        // CHECK:         scf.yield %[[NEWV]], %[[NEWI]] : tensor<8xf32>, tensor<8xi64>
        // CHECK-NEXT:  }
        // CHECK:       linalg.generic {{.*}} ins(%[[RED]]#0, %{{$V}} : tensor<8xf32>, tensor<8xf32>)
    """)


def test_cumsum_becomes_scf_for_scan_writing_each_prefix_column_into_its_input() -> None:
    """The result starts as the input row (its first column is already the first prefix),
    so no element of it is left unwritten."""
    filecheck(emit("cumsum"), """
        // CHECK-LABEL: func.func @cumsum(
        // CHECK:       %[[ROW:$V]] = tensor.extract_slice %x[{{.*}}] [8, 128] [1, 1]
        // CHECK-NEXT:  %[[FIRST:$V]] = tensor.extract_slice %[[ROW]][0, %[[ZERO:$V]]] [8, 1] [1, 1] : tensor<8x128xf32> to tensor<8xf32>
        // CHECK-NOT:   tensor.empty
        // CHECK-NEXT:  %[[ONE:$V]] = arith.constant 1 : index
        // CHECK-NEXT:  %[[W:$V]] = arith.constant 128 : index
        // CHECK-NEXT:  %[[SCAN:$V]]:2 = scf.for %[[COL:$V]] = %[[ONE]] to %[[W]] step %[[ONE]] iter_args(%[[RUN:$V]] = %[[FIRST]], %[[OUT:$V]] = %[[ROW]]) -> (tensor<8xf32>, tensor<8x128xf32>) {
        // CHECK-NEXT:    %[[X:$V]] = tensor.extract_slice %[[ROW]][0, %[[COL]]] [8, 1] [1, 1]
        // CHECK:         %[[NEXT:$V]] = linalg.generic {{.*}} ins(%[[RUN]], %[[X]] : tensor<8xf32>, tensor<8xf32>)
        // CHECK:           arith.addf
        // CHECK:         %[[OUT2:$V]] = tensor.insert_slice %[[NEXT]] into %[[OUT]][0, %[[COL]]] [8, 1] [1, 1]
        // CHECK-NEXT:    scf.yield %[[NEXT]], %[[OUT2]] : tensor<8xf32>, tensor<8x128xf32>
        // CHECK-NEXT:  }
        // CHECK-NEXT:  tensor.insert_slice %[[SCAN]]#1 into
    """)


# ------------------------------------------------------------------------------ dynamic shapes
def test_dynamic_shapes_give_unknown_dims_read_with_tensor_dim() -> None:
    filecheck(emit("row_mean_dynamic"), """
        // CHECK-LABEL: func.func @row_mean_dynamic(%x: tensor<?x?xf32>, %out: tensor<?xf32>) -> (tensor<?xf32>)
        // CHECK-NEXT:    %[[C0:$V]] = arith.constant 0 : index
        // CHECK-NEXT:    %[[ROWS:$V]] = tensor.dim %x, %[[C0]] : tensor<?x?xf32>
        // CHECK-NEXT:    %[[C1:$V]] = arith.constant 1 : index
        // CHECK-NEXT:    %[[COLS:$V]] = tensor.dim %x, %[[C1]] : tensor<?x?xf32>
        // CHECK:         scf.for %[[IVR:$V]] = %[[C0]] to %[[ROWS]] step
        // CHECK-NEXT:      arith.subi %[[ROWS]], %[[IVR]]
        // CHECK-NEXT:      %[[ER:$V]] = arith.minsi
        // CHECK:           scf.for %[[IVC:$V]] = %[[C0]] to %[[COLS]] step
        // CHECK-NEXT:        arith.subi %[[COLS]], %[[IVC]]
        // CHECK-NEXT:        %[[EC:$V]] = arith.minsi
        // CHECK-NEXT:        tensor.extract_slice %x[%[[IVR]], %[[IVC]]] [%[[ER]], %[[EC]]] [1, 1] : tensor<?x?xf32> to tensor<?x?xf32>
        // CHECK:           arith.index_cast %[[COLS]] : index to i64
        // CHECK:           tensor.insert_slice %{{$V}} into %{{$V}}[%[[IVR]]] [%[[ER]]] [1] : tensor<?xf32> into tensor<?xf32>
    """)
    # The same kernel source as `add`, rebound with static_shapes=False: even sizes that
    # the example tiles evenly are unknown now, so every tile is clipped.
    add = example("add")
    dynamic_add = helion.kernel(add.KERNEL.fn, config=add.KERNEL.configs[0], static_shapes=False)
    filecheck(generate_mlir(dynamic_add.bind(add.make_args("divisible"))), """
        // CHECK-LABEL: func.func @add(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %out: tensor<?x?xf32>) -> (tensor<?x?xf32>)
        // CHECK:       %[[M:$V]] = tensor.dim %x, %{{$V}}
        // CHECK:       scf.for %{{$V}} = %{{$V}} to %[[M]] step
        // CHECK-NEXT:    arith.subi %[[M]],
        // CHECK-NEXT:    arith.minsi
        // CHECK:         tensor.insert_slice {{.*}} : tensor<?x?xf32> into tensor<?x?xf32>
    """)


def test_nested_tile_loops_over_a_dynamic_tensor_restate_the_sizes_read_at_entry() -> None:
    # Every dynamic size is read once, at function entry. The inner tile loop's initial
    # value is the outer loop's iteration argument: a reshape to its own type states its
    # sizes (two dynamic sizes, so nothing folds it), and no size is read from a
    # loop-carried value.
    add = example("add")
    dynamic_add = helion.kernel(add.KERNEL.fn, config=add.KERNEL.configs[0], static_shapes=False)
    filecheck(generate_mlir(dynamic_add.bind(add.make_args("ragged"))), """
        // CHECK-LABEL: func.func @add(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %out: tensor<?x?xf32>)
        // CHECK:         tensor.dim %y
        // CHECK-NEXT:    tensor.dim %y
        // CHECK-NEXT:    %[[M:$V]] = tensor.dim %out, %{{$V}} : tensor<?x?xf32>
        // CHECK-NEXT:    %[[N:$V]] = tensor.dim %out, %{{$V}} : tensor<?x?xf32>
        // CHECK-NOT:     tensor.dim
        // CHECK:         scf.for {{.*}} iter_args(%[[OUTER:$V]] = %out) -> (tensor<?x?xf32>)
        // CHECK:           %[[SHAPE:$V]] = tensor.from_elements %[[M]], %[[N]] : tensor<2xindex>
        // CHECK-NEXT:      %[[SIZED:$V]] = tensor.reshape %[[OUTER]](%[[SHAPE]]) : (tensor<?x?xf32>, tensor<2xindex>) -> tensor<?x?xf32>
        // CHECK-NEXT:      scf.for {{.*}} iter_args(%[[INNER:$V]] = %[[SIZED]]) -> (tensor<?x?xf32>)
        // CHECK:             tensor.insert_slice {{.*}} into %[[INNER]]
        // CHECK-NOT:     tensor.dim
    """)


def test_a_value_of_static_sizes_stored_into_dynamic_dimensions_is_cast_to_the_region_type() -> None:
    # rope with static_shapes=False and unit row tiles: the value has the specialized half
    # (16) and the pair (2) as static sizes, the region it is stored into the host's
    # dynamic sizes; an unpadded tile is stored as it is, after a cast to the region's type.
    rope = example("rope")
    kernel = helion.kernel(rope.KERNEL.fn, config=helion.Config(block_sizes=[1]), static_shapes=False)
    args = rope.make_args("ragged")
    bound = kernel.bind(args)
    filecheck(generate_mlir(bound), """
        // CHECK:      %[[JOIN:$V]] = tensor.insert_slice %{{$V}} into %{{$V}}[0, 0, 1] [1, 16, 1] [1, 1, 1] : tensor<1x16xf32> into tensor<1x16x2xf32>
        // CHECK-NEXT: %[[CAST:$V]] = tensor.cast %[[JOIN]] : tensor<1x16x2xf32> to tensor<1x?x?xf32>
        // CHECK-NEXT: tensor.insert_slice %[[CAST]] into %{{$V}}[%{{$V}}, 0, 0] [1, %{{$V}}, %{{$V}}] [1, 1, 1] : tensor<1x?x?xf32> into tensor<?x?x?xf32>
    """)
    torch.testing.assert_close(compile_kernel(bound)(*args), rope.reference(*args), **rope.TOLERANCE)


def test_stablehlo_dynamic_broadcasts_say_which_dimensions_expand() -> None:
    # torch-mlir leaves the expansion unknown; a consumer that must know it (IREE) is told:
    # only a static 1 broadcast to another size expands, a dynamic size never is 1.
    softmax = example("softmax_one_pass")
    dynamic = helion.kernel(softmax.KERNEL.fn, config=softmax.KERNEL.configs[0], static_shapes=False)
    filecheck(generate_mlir(dynamic.bind(softmax.make_args("ragged")), output_type="stablehlo"), """
        // CHECK: stablehlo.dynamic_broadcast_in_dim %{{$V}}, %{{$V}}, dims = [0, 1] {known_expanding_dimensions = array<i64>, known_nonexpanding_dimensions = array<i64: 0, 1>} : (tensor<8x?xf32>, tensor<2xindex>) -> tensor<8x?xf32>
        // CHECK: stablehlo.dynamic_broadcast_in_dim %{{$V}}, %{{$V}}, dims = [0, 1] {known_expanding_dimensions = array<i64: 1>, known_nonexpanding_dimensions = array<i64: 0>} : (tensor<8x1xf32>, tensor<2xindex>) -> tensor<8x?xf32>
        // CHECK-NOT: stablehlo.dynamic_broadcast_in_dim {{[^{]*}} : (
    """)


# ----------------------------------------------------------------------------------- locations
def test_ops_carry_the_source_line_and_column_of_their_load_store_and_inner_loop() -> None:
    source = example("matmul").KERNEL.fn.__code__.co_filename
    load_line, load_col = source_position(source, "x[tile_m, tile_k]")
    store_line, store_col = source_position(source, "out[tile_m, tile_n] =")
    loop_line, loop_col = source_position(source, "for tile_k in")
    def_line, _ = source_position(source, "def matmul(")
    filecheck(emit("matmul", debug_info=True), """
        // CHECK-LABEL: func.func @matmul(
        // CHECK:       scf.for {{.*}} -> (tensor<16x16xf32>) {
        // CHECK:         tensor.extract_slice %x[{{.*}} loc("${path}":${load_line}:${load_col})
        // CHECK:       } loc("${path}":${loop_line}:${loop_col})
        // CHECK:       tensor.insert_slice {{.*}} loc("${path}":${store_line}:${store_col})
        // CHECK:       return {{.*}} loc("${path}":{{${decorator_line}|${def_line}}}:1)
        // CHECK-NEXT:  } loc("${path}":{{${decorator_line}|${def_line}}}:1)
    """, path=source, load_line=load_line, load_col=load_col, store_line=store_line, store_col=store_col,
              loop_line=loop_line, loop_col=loop_col, def_line=def_line, decorator_line=def_line - 1)


def test_top_level_tile_loop_carries_the_location_of_its_for_statement() -> None:
    source = example("add").KERNEL.fn.__code__.co_filename
    line, col = source_position(source, "for tile_m, tile_n in")
    filecheck(emit("add", debug_info=True), """
        // CHECK: scf.yield {{.*}} loc("${path}":${line}:${col})
        // CHECK: } loc("${path}":${line}:${col})
    """, path=source, line=line, col=col)


# -------------------------------------------------------------------------------- output types
@pytest.mark.parametrize(("output_type", "patterns"), [
    ("linalg-on-tensors", """
        // CHECK:      %[[SUM:$V]] = linalg.generic {{.*}} ins(%[[XS]], %[[YS]] : tensor<16x32xf32>, tensor<16x32xf32>)
        // CHECK:        arith.addf
        // CHECK:      tensor.insert_slice %[[SUM]] into
    """),
    ("tosa", """
        // CHECK-NEXT: %[[SUM:$V]] = "tosa.add"(%[[XS]], %[[YS]]) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
        // CHECK-NEXT: tensor.insert_slice %[[SUM]] into
    """),
    ("stablehlo", """
        // CHECK-NEXT: %[[SUM:$V]] = stablehlo.add %[[XS]], %[[YS]] : tensor<16x32xf32>
        // CHECK-NEXT: tensor.insert_slice %[[SUM]] into
    """),
    ("raw", """
        // CHECK-NEXT: %[[TX:$V]] = torch_c.from_builtin_tensor %[[XS]] : tensor<16x32xf32> -> !torch.vtensor<[16,32],f32>
        // CHECK-NEXT: %[[TY:$V]] = torch_c.from_builtin_tensor %[[YS]] : tensor<16x32xf32> -> !torch.vtensor<[16,32],f32>
        // CHECK-NEXT: %[[ALPHA:$V]] = torch.constant.int 1
        // CHECK-NEXT: %[[SUM:$V]] = torch.aten.add.Tensor %[[TX]], %[[TY]], %[[ALPHA]] : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16,32],f32>, !torch.int -> !torch.vtensor<[16,32],f32>
        // CHECK-NEXT: %[[B:$V]] = torch_c.to_builtin_tensor %[[SUM]] : !torch.vtensor<[16,32],f32> -> tensor<16x32xf32>
        // CHECK-NEXT: tensor.insert_slice %[[B]] into
    """),
])
def test_aten_op_is_lowered_to_the_requested_output_type(output_type: str, patterns: str) -> None:
    filecheck(emit("add", output_type=output_type), """
        // CHECK-LABEL: func.func @add(%x: tensor<64x128xf32>, %y: tensor<64x128xf32>, %out: tensor<64x128xf32>) -> (tensor<64x128xf32>)
        // CHECK:       %[[XS:$V]] = tensor.extract_slice %x[
        // CHECK-NEXT:  %[[YS:$V]] = tensor.extract_slice %y[
    """ + patterns)


STRUCTURE_DIALECTS = {"builtin", "func", "arith", "math", "index", "affine", "scf", "cf", "tensor", "linalg",
                      "memref", "bufferization"}
OUTPUT_DIALECTS = {
    # tm_tensor: torch-mlir's linalg backend emits tm_tensor.scan/scatter for some ATen ops.
    "linalg-on-tensors": {"tm_tensor"},
    "tosa": {"tosa"},
    "stablehlo": {"stablehlo", "chlo"},
    "raw": {"torch", "torch_c"},
}
# What the kernels below must show for each output type (so the dialect check cannot pass
# on a module that lowered nothing).
EXPECTED_DIALECT = {"linalg-on-tensors": "linalg", "tosa": "tosa", "stablehlo": "stablehlo", "raw": "torch"}
DIALECT_KERNELS = [("softmax_one_pass", "ragged"), ("matmul_bf16", "ragged"), ("cumsum", "divisible"),
                   ("histogram", "ragged"), ("row_branch", "ragged"), ("newton_rsqrt", "ragged")]


def op_names(text: str) -> list[str]:
    """Every op name in ``text``, parsed with unregistered dialects disallowed."""
    names: list[str] = []
    with mlir_session():
        module = parse_module(text)

        def visit(op: Any) -> Any:
            names.append(op.name)
            from torch_mlir import ir

            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return names


@pytest.mark.parametrize("output_type", list(OUTPUT_DIALECTS))
def test_modules_use_only_upstream_dialects_plus_the_output_types_own(output_type: str) -> None:
    allowed = STRUCTURE_DIALECTS | OUTPUT_DIALECTS[output_type]
    for name, shape in DIALECT_KERNELS:
        text = emit(name, shape, output_type)
        dialects = {op.split(".", 1)[0] for op in op_names(text)}
        assert dialects <= allowed, f"{name} ({shape}, {output_type}) uses {sorted(dialects - allowed)}"
        if output_type != "raw":
            assert "!torch." not in text, f"{name} ({shape}, {output_type}) keeps torch types"
        assert EXPECTED_DIALECT[output_type] in dialects, f"{name} ({shape}, {output_type}) uses only {sorted(dialects)}"


@pytest.mark.parametrize("output_type", list(OUTPUT_DIALECTS))
def test_dynamic_shapes_add_the_shape_dialect_to_stablehlo_only(output_type: str) -> None:
    # docs/abi.md: torch-mlir broadcasts dynamic stablehlo operands through `shape` ops.
    softmax = example("softmax_one_pass")
    dynamic = helion.kernel(softmax.KERNEL.fn, config=softmax.KERNEL.configs[0], static_shapes=False)
    text = generate_mlir(dynamic.bind(softmax.make_args("ragged")), output_type=output_type)
    dialects = {op.split(".", 1)[0] for op in op_names(text)}
    assert dialects <= STRUCTURE_DIALECTS | OUTPUT_DIALECTS[output_type] | {"shape"}, sorted(dialects)
    assert ("shape" in dialects) == (output_type == "stablehlo")
