"""Execution of emitted-style MLIR on CPU: every kernel is compared with torch.

The modules are written by hand in the forms the lowering emits (destination tensors
passed in and returned, tile loops with tensor ``iter_args``, ragged edges through
``affine.min`` and ``tensor.pad``), plus two files torch-mlir itself emitted.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from filecheck_util import run_filecheck
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_mlir import ir

from helion_mlir.errors import ArgumentError, ExecutionError, MLIRVerificationError
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.engine import (
    CompiledFunction,
    clear_compile_cache,
    compile_module,
)
from helion_mlir.runtime.cpu.rewrites.tensor.single_element_stores import store_single_elements_in_place

DATA = Path(__file__).parent / "data" / "execute"

ELEMENTWISE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @fused(%x: tensor<8x33xf32>, %y: tensor<8x33xf32>, %out: tensor<8x33xf32>) -> tensor<8x33xf32> {
  %half = arith.constant 0.5 : f32
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<8x33xf32>, tensor<8x33xf32>) outs(%out : tensor<8x33xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %e = math.exp %a : f32
    %t = math.tanh %b : f32
    %et = arith.mulf %e, %t : f32
    %erf = math.erf %a : f32
    %h = arith.mulf %erf, %half : f32
    %s = arith.addf %et, %h : f32
    %m = arith.maximumf %s, %o : f32
    linalg.yield %m : f32
  } -> tensor<8x33xf32>
  return %r : tensor<8x33xf32>
}
"""

RAGGED_TILED_ADD = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#edge16 = affine_map<(d0)[s0] -> (16, s0 - d0)>
#edge32 = affine_map<(d0)[s0] -> (32, s0 - d0)>
func.func @tiled_add(%x: tensor<37x100xf32>, %y: tensor<37x100xf32>, %out: tensor<37x100xf32>) -> tensor<37x100xf32> {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %m = arith.constant 37 : index
  %n = arith.constant 100 : index
  %zero = arith.constant 0.0 : f32
  %res = scf.for %i = %c0 to %m step %c16 iter_args(%acc = %out) -> (tensor<37x100xf32>) {
    %bm = affine.min #edge16(%i)[%m]
    %row = scf.for %j = %c0 to %n step %c32 iter_args(%acc2 = %acc) -> (tensor<37x100xf32>) {
      %bn = affine.min #edge32(%j)[%n]
      %xs = tensor.extract_slice %x[%i, %j] [%bm, %bn] [1, 1] : tensor<37x100xf32> to tensor<?x?xf32>
      %ys = tensor.extract_slice %y[%i, %j] [%bm, %bn] [1, 1] : tensor<37x100xf32> to tensor<?x?xf32>
      %ph = arith.subi %c16, %bm : index
      %pw = arith.subi %c32, %bn : index
      %xp = tensor.pad %xs low[0, 0] high[%ph, %pw] {
      ^bb0(%a: index, %b: index):
        tensor.yield %zero : f32
      } : tensor<?x?xf32> to tensor<16x32xf32>
      %yp = tensor.pad %ys low[0, 0] high[%ph, %pw] {
      ^bb0(%a: index, %b: index):
        tensor.yield %zero : f32
      } : tensor<?x?xf32> to tensor<16x32xf32>
      %tile = tensor.empty() : tensor<16x32xf32>
      %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%xp, %yp : tensor<16x32xf32>, tensor<16x32xf32>) outs(%tile : tensor<16x32xf32>) {
      ^bb0(%a: f32, %b: f32, %o: f32):
        %s = arith.addf %a, %b : f32
        linalg.yield %s : f32
      } -> tensor<16x32xf32>
      %valid = tensor.extract_slice %sum[0, 0] [%bm, %bn] [1, 1] : tensor<16x32xf32> to tensor<?x?xf32>
      %next = tensor.insert_slice %valid into %acc2[%i, %j] [%bm, %bn] [1, 1] : tensor<?x?xf32> into tensor<37x100xf32>
      scf.yield %next : tensor<37x100xf32>
    }
    scf.yield %row : tensor<37x100xf32>
  }
  return %res : tensor<37x100xf32>
}
"""

# Dynamic shapes, static tiles; filled in per tile size by the property test.
DYNAMIC_TILED_ADD = """
#edge_m = affine_map<(d0)[s0] -> ({tm}, s0 - d0)>
#edge_n = affine_map<(d0)[s0] -> ({tn}, s0 - d0)>
func.func @tiled_add(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %out: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tm = arith.constant {tm} : index
  %tn = arith.constant {tn} : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %out, %c0 : tensor<?x?xf32>
  %n = tensor.dim %out, %c1 : tensor<?x?xf32>
  %res = scf.for %i = %c0 to %m step %tm iter_args(%acc = %out) -> (tensor<?x?xf32>) {{
    %bm = affine.min #edge_m(%i)[%m]
    %row = scf.for %j = %c0 to %n step %tn iter_args(%acc2 = %acc) -> (tensor<?x?xf32>) {{
      %bn = affine.min #edge_n(%j)[%n]
      %xs = tensor.extract_slice %x[%i, %j] [%bm, %bn] [1, 1] : tensor<?x?xf32> to tensor<?x?xf32>
      %ys = tensor.extract_slice %y[%i, %j] [%bm, %bn] [1, 1] : tensor<?x?xf32> to tensor<?x?xf32>
      %ph = arith.subi %tm, %bm : index
      %pw = arith.subi %tn, %bn : index
      %xp = tensor.pad %xs low[0, 0] high[%ph, %pw] {{
      ^bb0(%a: index, %b: index):
        tensor.yield %zero : f32
      }} : tensor<?x?xf32> to tensor<{tm}x{tn}xf32>
      %yp = tensor.pad %ys low[0, 0] high[%ph, %pw] {{
      ^bb0(%a: index, %b: index):
        tensor.yield %zero : f32
      }} : tensor<?x?xf32> to tensor<{tm}x{tn}xf32>
      %tile = tensor.empty() : tensor<{tm}x{tn}xf32>
      %sum = linalg.add ins(%xp, %yp : tensor<{tm}x{tn}xf32>, tensor<{tm}x{tn}xf32>)
          outs(%tile : tensor<{tm}x{tn}xf32>) -> tensor<{tm}x{tn}xf32>
      %valid = tensor.extract_slice %sum[0, 0] [%bm, %bn] [1, 1] : tensor<{tm}x{tn}xf32> to tensor<?x?xf32>
      %next = tensor.insert_slice %valid into %acc2[%i, %j] [%bm, %bn] [1, 1] : tensor<?x?xf32> into tensor<?x?xf32>
      scf.yield %next : tensor<?x?xf32>
    }}
    scf.yield %row : tensor<?x?xf32>
  }}
  return %res : tensor<?x?xf32>
}}
"""

FORALL_SCALE = """
#edge16 = affine_map<(d0) -> (16, 37 - d0)>
#edge32 = affine_map<(d0) -> (32, 100 - d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @forall_scale(%x: tensor<37x100xf32>, %out: tensor<37x100xf32>) -> tensor<37x100xf32> {
  %two = arith.constant 2.0 : f32
  %r = scf.forall (%i, %j) = (0, 0) to (37, 100) step (16, 32) shared_outs(%o = %out) -> (tensor<37x100xf32>) {
    %bm = affine.min #edge16(%i)
    %bn = affine.min #edge32(%j)
    %xs = tensor.extract_slice %x[%i, %j] [%bm, %bn] [1, 1] : tensor<37x100xf32> to tensor<?x?xf32>
    %os = tensor.extract_slice %o[%i, %j] [%bm, %bn] [1, 1] : tensor<37x100xf32> to tensor<?x?xf32>
    %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%xs : tensor<?x?xf32>) outs(%os : tensor<?x?xf32>) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.mulf %a, %two : f32
      linalg.yield %s : f32
    } -> tensor<?x?xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %t into %o[%i, %j] [%bm, %bn] [1, 1] : tensor<?x?xf32> into tensor<37x100xf32>
    }
  }
  return %r : tensor<37x100xf32>
}
"""

REDUCTIONS = """
func.func @row_sum(%x: tensor<?x?xf32>, %out: tensor<?xf32>) -> tensor<?xf32> {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.reduce ins(%x : tensor<?x?xf32>) outs(%init : tensor<?xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %r : tensor<?xf32>
}

func.func @row_max(%x: tensor<7x50xf32>) -> tensor<7xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %empty = tensor.empty() : tensor<7xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%empty : tensor<7xf32>) -> tensor<7xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<7x50xf32>) outs(%init : tensor<7xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<7xf32>
  return %r : tensor<7xf32>
}

func.func @scaled_total(%x: tensor<?x?xf64>, %scale: f64, %bias: i64) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %empty = tensor.empty() : tensor<f64>
  %init = linalg.fill ins(%zero : f64) outs(%empty : tensor<f64>) -> tensor<f64>
  %sum = linalg.reduce ins(%x : tensor<?x?xf64>) outs(%init : tensor<f64>) dimensions = [0, 1]
    (%in: f64, %acc: f64) {
      %s = arith.addf %in, %acc : f64
      linalg.yield %s : f64
    }
  %r = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%sum : tensor<f64>) outs(%empty : tensor<f64>) {
  ^bb0(%in: f64, %o: f64):
    %b = arith.sitofp %bias : i64 to f64
    %m = arith.mulf %in, %scale : f64
    %s = arith.addf %m, %b : f64
    linalg.yield %s : f64
  } -> tensor<f64>
  return %r : tensor<f64>
}
"""

MATMULS = """
func.func @matmul_f32(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %out: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%init : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

func.func @matmul_bf16(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>, %out: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xbf16>, tensor<?x?xbf16>) outs(%init : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

func.func @transposed_bmm_bias(%a: tensor<3x5x7xf32>, %bt: tensor<3x4x7xf32>, %bias: tensor<4xf32>) -> tensor<15x4xf32> {
  %e = tensor.empty() : tensor<3x7x4xf32>
  %b = linalg.transpose ins(%bt : tensor<3x4x7xf32>) outs(%e : tensor<3x7x4xf32>) permutation = [0, 2, 1]
  %e2 = tensor.empty() : tensor<3x5x4xf32>
  %init = linalg.broadcast ins(%bias : tensor<4xf32>) outs(%e2 : tensor<3x5x4xf32>) dimensions = [0, 1]
  %mm = linalg.batch_matmul ins(%a, %b : tensor<3x5x7xf32>, tensor<3x7x4xf32>) outs(%init : tensor<3x5x4xf32>) -> tensor<3x5x4xf32>
  %c = tensor.collapse_shape %mm [[0, 1], [2]] : tensor<3x5x4xf32> into tensor<15x4xf32>
  return %c : tensor<15x4xf32>
}
"""

LOW_PRECISION = """
#id = affine_map<(d0) -> (d0)>
func.func @narrow(%x: tensor<64xf32>) -> (tensor<64xbf16>, tensor<64xf16>) {
  %eb = tensor.empty() : tensor<64xbf16>
  %eh = tensor.empty() : tensor<64xf16>
  %r:2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<64xf32>) outs(%eb, %eh : tensor<64xbf16>, tensor<64xf16>) {
  ^bb0(%a: f32, %b: bf16, %h: f16):
    %tb = arith.truncf %a : f32 to bf16
    %th = arith.truncf %a : f32 to f16
    linalg.yield %tb, %th : bf16, f16
  } -> (tensor<64xbf16>, tensor<64xf16>)
  return %r#0, %r#1 : tensor<64xbf16>, tensor<64xf16>
}

func.func @half_mul_add(%a: tensor<64xf16>, %b: tensor<64xf16>) -> tensor<64xf16> {
  %e = tensor.empty() : tensor<64xf16>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<64xf16>, tensor<64xf16>) outs(%e : tensor<64xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %m = arith.mulf %x, %y : f16
    %s = arith.addf %m, %x : f16
    linalg.yield %s : f16
  } -> tensor<64xf16>
  return %r : tensor<64xf16>
}
"""

CONTROL_FLOW = """
func.func @maybe_negate(%x: tensor<16xf32>, %flag: i1) -> tensor<16xf32> {
  %r = scf.if %flag -> (tensor<16xf32>) {
    %e = tensor.empty() : tensor<16xf32>
    %n = linalg.negf ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) -> tensor<16xf32>
    scf.yield %n : tensor<16xf32>
  } else {
    scf.yield %x : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}

func.func @repeat_add(%x: tensor<?xf32>, %times: i64) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %i0 = arith.constant 0 : i64
  %i1 = arith.constant 1 : i64
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r:2 = scf.while (%i = %i0, %acc = %init) : (i64, tensor<?xf32>) -> (i64, tensor<?xf32>) {
    %more = arith.cmpi slt, %i, %times : i64
    scf.condition(%more) %i, %acc : i64, tensor<?xf32>
  } do {
  ^bb0(%i: i64, %acc: tensor<?xf32>):
    %next = linalg.add ins(%acc, %x : tensor<?xf32>, tensor<?xf32>) outs(%acc : tensor<?xf32>) -> tensor<?xf32>
    %i_next = arith.addi %i, %i1 : i64
    scf.yield %i_next, %next : i64, tensor<?xf32>
  }
  return %r#1 : tensor<?xf32>
}
"""

INTEGERS = """
#id = affine_map<(d0) -> (d0)>
func.func @mix_i32(%a: tensor<64xi32>, %b: tensor<64xi32>) -> tensor<64xi32> {
  %e = tensor.empty() : tensor<64xi32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<64xi32>, tensor<64xi32>) outs(%e : tensor<64xi32>) {
  ^bb0(%x: i32, %y: i32, %o: i32):
    %mask = arith.constant 31 : i32
    %s = arith.andi %y, %mask : i32
    %l = arith.shli %x, %s : i32
    %ar = arith.shrsi %x, %s : i32
    %lr = arith.shrui %x, %s : i32
    %p = arith.muli %x, %y : i32
    %t0 = arith.xori %l, %ar : i32
    %t1 = arith.ori %t0, %lr : i32
    %t2 = arith.addi %t1, %p : i32
    linalg.yield %t2 : i32
  } -> tensor<64xi32>
  return %r : tensor<64xi32>
}

func.func @mix_i64(%a: tensor<64xi64>, %b: tensor<64xi64>) -> tensor<64xi64> {
  %e = tensor.empty() : tensor<64xi64>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<64xi64>, tensor<64xi64>) outs(%e : tensor<64xi64>) {
  ^bb0(%x: i64, %y: i64, %o: i64):
    %mask = arith.constant 63 : i64
    %s = arith.andi %y, %mask : i64
    %l = arith.shli %x, %s : i64
    %lr = arith.shrui %x, %s : i64
    %t0 = arith.xori %l, %lr : i64
    %t1 = arith.subi %t0, %y : i64
    linalg.yield %t1 : i64
  } -> tensor<64xi64>
  return %r : tensor<64xi64>
}

func.func @less_and(%x: tensor<?xf32>, %y: tensor<?xf32>, %keep: tensor<?xi1>) -> tensor<?xi1> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xi1>
  %r = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %y, %keep : tensor<?xf32>, tensor<?xf32>, tensor<?xi1>) outs(%e : tensor<?xi1>) {
  ^bb0(%a: f32, %b: f32, %k: i1, %o: i1):
    %lt = arith.cmpf olt, %a, %b : f32
    %both = arith.andi %lt, %k : i1
    linalg.yield %both : i1
  } -> tensor<?xi1>
  return %r : tensor<?xi1>
}
"""

DYNAMIC_GENERATE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @scaled_plus_iota(%x: tensor<?x?xf32>, %alpha: f32) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?xf32>
  %iota = tensor.generate %d0, %d1 {
  ^bb0(%i: index, %j: index):
    %row = arith.muli %i, %d1 : index
    %flat = arith.addi %row, %j : index
    %as_int = arith.index_cast %flat : index to i64
    %v = arith.sitofp %as_int : i64 to f32
    tensor.yield %v : f32
  } : tensor<?x?xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %iota : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %alpha : f32
    %s = arith.addf %m, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""

ALIASING_RESULTS = """
func.func @constant() -> tensor<4xi32> {
  %c = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  return %c : tensor<4xi32>
}

func.func @same_twice(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %y = linalg.add ins(%x, %x : tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  return %y, %y, %x : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}
"""

TOSA_ADD_EXP = """
func.func @add_exp(%a: tensor<4x8xf32>, %b: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %0 = tosa.add %a, %b : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %1 = tosa.exp %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}
"""

STABLEHLO_ADD_EXP_CUMSUM = """
func.func @add_exp_cumsum(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.add %a, %b : tensor<4x8xf32>
  %1 = stablehlo.exponential %0 : tensor<4x8xf32>
  %2 = "stablehlo.reduce_window"(%b, %zero) <{padding = dense<[[0, 0], [7, 0]]> : tensor<2x2xi64>,
      window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 1, 8>, window_strides = array<i64: 1, 1>}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>
}
"""

STABLEHLO_DYNAMIC = """
func.func @exp_row_sum(%a: tensor<?x13xf32>) -> (tensor<?x13xf32>, tensor<?xf32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.exponential %a : tensor<?x13xf32>
  %1 = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<?x13xf32>, tensor<f32>) -> tensor<?xf32>
  return %0, %1 : tensor<?x13xf32>, tensor<?xf32>
}
"""

STABLEHLO_SORT = """
func.func @sort(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "stablehlo.sort"(%a) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %lt = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


def _wrap(value: int, bits: int) -> int:
    """Two's-complement wrap-around of a Python int to ``bits`` bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def test_elementwise_generic_matches_torch_and_leaves_inputs_alone() -> None:
    fused = compile_module(ELEMENTWISE, "fused")
    x = torch.randn(33, 8).t()  # non-contiguous on purpose
    y = torch.randn(8, 33)
    out = torch.randn(8, 33)
    out_before = out.clone()
    (got,) = fused(x, y, out)
    want = torch.maximum(torch.exp(x) * torch.tanh(y) + 0.5 * torch.erf(x), out)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert torch.equal(out, out_before), "the destination argument must not be written"
    assert got.is_contiguous() and got.data_ptr() != out.data_ptr()


def test_ragged_tiled_loop_nest_with_pad() -> None:
    tiled = compile_module(RAGGED_TILED_ADD, "tiled_add")
    x, y = torch.randn(37, 100), torch.randn(37, 100)
    out = torch.full((37, 100), float("nan"))
    (got,) = tiled(x, y, out)
    assert torch.equal(got, x + y)
    assert out.isnan().all()


@settings(max_examples=30)
@given(
    tiles=st.sampled_from([(16, 32), (8, 8), (1, 64), (5, 3)]),
    rows=st.integers(1, 70),
    cols=st.integers(1, 70),
    seed=st.integers(0, 2**16),
)
def test_tiled_add_property(tiles: tuple[int, int], rows: int, cols: int, seed: int) -> None:
    tm, tn = tiles
    tiled = compile_module(DYNAMIC_TILED_ADD.format(tm=tm, tn=tn), "tiled_add")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=generator)
    y = torch.randn(rows, cols, generator=generator)
    (got,) = tiled(x, y, torch.zeros(rows, cols))
    assert torch.equal(got, x + y)


def test_forall_with_parallel_insert_slice() -> None:
    scale = compile_module(FORALL_SCALE, "forall_scale")
    x = torch.randn(37, 100)
    (got,) = scale(x, torch.zeros(37, 100))
    assert torch.equal(got, x * 2)


def test_row_reductions() -> None:
    row_sum = compile_module(REDUCTIONS, "row_sum")
    row_max = compile_module(REDUCTIONS, "row_max")
    x = torch.randn(9, 130)
    (sums,) = row_sum(x, torch.empty(9))
    torch.testing.assert_close(sums, x.sum(dim=1), rtol=1e-5, atol=1e-5)
    x = torch.randn(7, 50)
    (maxes,) = row_max(x)
    assert torch.equal(maxes, x.amax(dim=1))


def test_rank0_result_with_scalar_arguments() -> None:
    total = compile_module(REDUCTIONS, "scaled_total")
    x = torch.randn(6, 11, dtype=torch.float64)
    (got,) = total(x, 0.25, -3)
    assert got.shape == () and got.dtype == torch.float64
    torch.testing.assert_close(got, x.sum() * 0.25 - 3)
    (from_int,) = total(x, 2, 0)  # an int is fine where a float is expected
    torch.testing.assert_close(from_int, x.sum() * 2)


def test_matmul_f32_and_bf16_accumulating_in_f32() -> None:
    a, b = torch.randn(33, 20), torch.randn(20, 17)
    (got,) = compile_module(MATMULS, "matmul_f32")(a, b, torch.empty(33, 17))
    torch.testing.assert_close(got, a @ b, rtol=1e-5, atol=1e-5)
    a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
    (got16,) = compile_module(MATMULS, "matmul_bf16")(a16, b16, torch.empty(33, 17))
    assert got16.dtype == torch.float32
    torch.testing.assert_close(got16, a16.float() @ b16.float(), rtol=1e-5, atol=1e-5)


def test_transpose_broadcast_batch_matmul_collapse() -> None:
    fn = compile_module(MATMULS, "transposed_bmm_bias")
    a, bt, bias = torch.randn(3, 5, 7), torch.randn(3, 4, 7), torch.randn(4)
    (got,) = fn(a, bt, bias)
    want = (a @ bt.transpose(1, 2) + bias).reshape(15, 4)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_bf16_and_f16_results() -> None:
    x = torch.randn(64) * 1000
    bf16, f16 = compile_module(LOW_PRECISION, "narrow")(x)
    assert torch.equal(bf16, x.to(torch.bfloat16))
    assert torch.equal(f16, x.to(torch.float16))
    a, b = torch.randn(64, dtype=torch.float16), torch.randn(64, dtype=torch.float16)
    (got,) = compile_module(LOW_PRECISION, "half_mul_add")(a, b)
    assert torch.equal(got, a * b + a)


def test_scf_if_and_scf_while() -> None:
    maybe_negate = compile_module(CONTROL_FLOW, "maybe_negate")
    x = torch.randn(16)
    assert torch.equal(maybe_negate(x, True)[0], -x)
    kept = maybe_negate(x, False)[0]
    assert torch.equal(kept, x) and kept.data_ptr() != x.data_ptr()
    repeat_add = compile_module(CONTROL_FLOW, "repeat_add")
    small_ints = torch.randint(-50, 50, (23,)).float()  # sums stay exact
    assert torch.equal(repeat_add(small_ints, 5)[0], small_ints * 5)
    assert torch.equal(repeat_add(small_ints, 0)[0], torch.zeros(23))


def test_integer_ops_are_exact() -> None:
    a = torch.randint(-(2**31), 2**31, (64,), dtype=torch.int32)
    b = torch.randint(-(2**31), 2**31, (64,), dtype=torch.int32)
    (got,) = compile_module(INTEGERS, "mix_i32")(a, b)
    want = []
    for x, y in zip(a.tolist(), b.tolist()):
        s = y & 31
        logical = (x & 0xFFFFFFFF) >> s
        mixed = _wrap(x << s, 32) ^ (x >> s) | logical
        want.append(_wrap(mixed + x * y, 32))
    assert got.tolist() == want

    a = torch.randint(-(2**63), 2**63 - 1, (64,), dtype=torch.int64)
    b = torch.randint(-(2**63), 2**63 - 1, (64,), dtype=torch.int64)
    (got,) = compile_module(INTEGERS, "mix_i64")(a, b)
    want = []
    for x, y in zip(a.tolist(), b.tolist()):
        s = y & 63
        want.append(_wrap((_wrap(x << s, 64) ^ ((x & (2**64 - 1)) >> s)) - y, 64))
    assert got.tolist() == want


def test_bool_inputs_and_outputs() -> None:
    less_and = compile_module(INTEGERS, "less_and")
    x, y = torch.randn(101), torch.randn(101)
    keep = torch.rand(101) > 0.3
    (got,) = less_and(x, y, keep)
    assert got.dtype == torch.bool
    assert torch.equal(got, (x < y) & keep)


def test_dynamic_dims_across_shapes_including_empty() -> None:
    fn = compile_module(DYNAMIC_GENERATE, "scaled_plus_iota")
    for shape in [(3, 4), (17, 1), (0, 5)]:
        x = torch.randn(shape)
        (got,) = fn(x, 1.5)
        want = x * 1.5 + torch.arange(x.numel(), dtype=torch.float32).reshape(shape)
        assert got.shape == shape
        torch.testing.assert_close(got, want)


def test_torch_mlir_linalg_output_with_tm_tensor_scan() -> None:
    text = (DATA / "cumsum_exp_linalg.mlir").read_text()
    assert "tm_tensor.scan" in text
    x, y = torch.randn(5, 13), torch.randn(5, 13)
    cumsum, exp_mul = compile_module(text, "cumsum_exp")(x, y)
    torch.testing.assert_close(cumsum, torch.cumsum(x, 1))
    torch.testing.assert_close(exp_mul, torch.exp(x) * y)


def test_torch_mlir_linalg_output_with_tm_tensor_scatter_and_sort() -> None:
    text = (DATA / "scatter_sort_linalg.mlir").read_text()
    x, src = torch.randn(6, 4), torch.randn(4, 4)
    index = torch.tensor([0, 2, 2, 5])
    x_before = x.clone()
    accumulated, sorted_rows = compile_module(text, "scatter_sort")(x, index, src)
    torch.testing.assert_close(accumulated, x.index_put((index,), src, accumulate=True))
    assert torch.equal(sorted_rows, torch.sort(x, dim=1).values)
    assert torch.equal(x, x_before), "tm_tensor ops write into their outs, never into the caller's x"


def test_affine_for_tensor_insert_extract_index_ops_and_libm_calls() -> None:
    text = """
    func.func @powers(%x: tensor<6x4xf32>, %e: f32) -> (tensor<6x4xf32>, tensor<2x3x4xf32>) {
      %r = affine.for %i = 0 to 6 iter_args(%acc = %x) -> (tensor<6x4xf32>) {
        %row = affine.for %j = 0 to 4 iter_args(%acc2 = %acc) -> (tensor<6x4xf32>) {
          %v = tensor.extract %acc2[%i, %j] : tensor<6x4xf32>
          %k = index.add %i, %j
          %ki = arith.index_cast %k : index to i32
          %p = math.fpowi %v, %ki : f32, i32
          %q = math.powf %p, %e : f32
          %t = tensor.insert %q into %acc2[%i, %j] : tensor<6x4xf32>
          affine.yield %t : tensor<6x4xf32>
        }
        affine.yield %row : tensor<6x4xf32>
      }
      %dynamic = tensor.cast %r : tensor<6x4xf32> to tensor<?x4xf32>
      %static = tensor.cast %dynamic : tensor<?x4xf32> to tensor<6x4xf32>
      %split = tensor.expand_shape %static [[0, 1], [2]] output_shape [2, 3, 4]
          : tensor<6x4xf32> into tensor<2x3x4xf32>
      return %r, %split : tensor<6x4xf32>, tensor<2x3x4xf32>
    }
    """
    x = torch.rand(6, 4) + 0.5
    powers, split = compile_module(text, "powers")(x, 1.5)
    exponents = (torch.arange(6).view(6, 1) + torch.arange(4).view(1, 4)).float()
    torch.testing.assert_close(powers, (x**exponents) ** 1.5)
    assert torch.equal(split, powers.view(2, 3, 4))


def test_raw_torch_dialect_executes() -> None:
    text = (DATA / "cumsum_exp_raw.mlir").read_text()
    fn = compile_module(text, "cumsum_exp", output_type="raw")
    tensor = "tensor<5x13xf32>"
    assert fn.signature == f"@cumsum_exp({tensor}, {tensor}) -> ({tensor}, {tensor})"
    x, y = torch.randn(5, 13), torch.randn(5, 13)
    cumsum, exp_mul = fn(x, y)
    torch.testing.assert_close(cumsum, torch.cumsum(x, 1))
    torch.testing.assert_close(exp_mul, torch.exp(x) * y)


def test_tosa_executes() -> None:
    fn = compile_module(TOSA_ADD_EXP, "add_exp", output_type="tosa")
    a, b = torch.randn(4, 8), torch.randn(1, 8)
    (got,) = fn(a, b)
    torch.testing.assert_close(got, torch.exp(a + b))


def test_stablehlo_executes() -> None:
    fn = compile_module(STABLEHLO_ADD_EXP_CUMSUM, "add_exp_cumsum", output_type="stablehlo")
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    exp_sum, cumsum = fn(a, b)
    torch.testing.assert_close(exp_sum, torch.exp(a + b))
    torch.testing.assert_close(cumsum, torch.cumsum(b, 1))


def test_stablehlo_with_dynamic_dims_executes() -> None:
    fn = compile_module(STABLEHLO_DYNAMIC, "exp_row_sum", output_type="stablehlo")
    for rows in (1, 6):
        a = torch.randn(rows, 13)
        exp, row_sum = fn(a)
        torch.testing.assert_close(exp, torch.exp(a))
        torch.testing.assert_close(row_sum, a.sum(dim=1))


def test_stablehlo_op_without_linalg_lowering_is_reported() -> None:
    with pytest.raises(ExecutionError, match=r"no lowering to linalg for .*stablehlo\.sort") as err:
        compile_module(STABLEHLO_SORT, "sort", output_type="stablehlo")
    assert err.value.output_type == "stablehlo"


def test_results_aliasing_constants_arguments_or_each_other_are_safe() -> None:
    constant = compile_module(ALIASING_RESULTS, "constant")
    for _ in range(3):  # the constant must survive every call
        assert constant()[0].tolist() == [1, 2, 3, 4]
    same_twice = compile_module(ALIASING_RESULTS, "same_twice")
    x = torch.randn(10)
    for _ in range(3):
        first, second, passed_through = same_twice(x)
        assert torch.equal(first, x + x) and torch.equal(second, x + x)
        assert first.data_ptr() != second.data_ptr()
        assert torch.equal(passed_through, x) and passed_through.data_ptr() != x.data_ptr()


def test_writable_argument_attribute_is_overridden_and_results_may_be_absent() -> None:
    text = """
    func.func @double_in_place(%x: tensor<4xf32> {bufferization.writable = true}) -> tensor<4xf32> {
      %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                           iterator_types = ["parallel"]}
          ins(%x : tensor<4xf32>) outs(%x : tensor<4xf32>) {
      ^bb0(%in: f32, %acc: f32):
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      } -> tensor<4xf32>
      return %r : tensor<4xf32>
    }

    func.func @nothing(%x: tensor<4xf32>, %n: i64) {
      return
    }
    """
    x = torch.arange(4.0)
    assert torch.equal(compile_module(text, "double_in_place")(x)[0], 2 * torch.arange(4.0))
    assert torch.equal(x, torch.arange(4.0))
    assert compile_module(text, "nothing")(x, 3) == ()


def test_only_the_function_and_its_callees_are_compiled() -> None:
    text = """
    func.func private @twice(%x: tensor<?xf32>) -> tensor<?xf32> {
      %c0 = arith.constant 0 : index
      %n = tensor.dim %x, %c0 : tensor<?xf32>
      %e = tensor.empty(%n) : tensor<?xf32>
      %r = linalg.add ins(%x, %x : tensor<?xf32>, tensor<?xf32>)
          outs(%e : tensor<?xf32>) -> tensor<?xf32>
      return %r : tensor<?xf32>
    }

    func.func @quadruple(%x: tensor<?xf32>) -> tensor<?xf32> {
      %y = func.call @twice(%x) : (tensor<?xf32>) -> tensor<?xf32>
      %z = func.call @twice(%y) : (tensor<?xf32>) -> tensor<?xf32>
      return %z : tensor<?xf32>
    }

    func.func @does_not_bufferize() -> tensor<8xf32> {
      %m = memref.alloca() : memref<8xf32>
      %t = bufferization.to_tensor %m : memref<8xf32> to tensor<8xf32>
      return %t : tensor<8xf32>
    }
    """
    x = torch.randn(9)
    # @does_not_bufferize would fail the lowering if it were compiled along.
    assert torch.equal(compile_module(text, "quadruple")(x)[0], x * 4)
    assert torch.equal(compile_module(text, "twice")(x)[0], x * 2)  # private in the text


_FINE = torch.randn(8, 33)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((_FINE, _FINE), r"takes 3 argument\(s\), got 2"),
        ((_FINE, 1.0, _FINE), r"argument #1 \(tensor<8x33xf32>\) of @fused: expected a torch\.Tensor"),
        ((_FINE, _FINE.double(), _FINE), r"argument #1 .*: expected dtype torch\.float32, got torch\.f"),
        ((_FINE, _FINE[..., None], _FINE), r"argument #1 .*: expected rank 2, got shape \(8, 33, 1\)"),
        ((_FINE, _FINE[:, :32], _FINE), r"argument #1 .*: dimension 1 must be 33, got shape \(8, 32\)"),
    ],
)
def test_bad_tensor_arguments_are_rejected(args: tuple[object, ...], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        compile_module(ELEMENTWISE, "fused")(*args)


@pytest.mark.parametrize(
    ("scale", "bias", "message"),
    [
        (1.0, True, r"argument #2 \(i64\) .* expected int, got bool"),
        (1.0, 2.5, r"argument #2 \(i64\) .* expected int, got float"),
        (1.0, 2**63, r"does not fit in i64"),
        (torch.tensor(1.0), 1, r"argument #1 \(f64\) .* expected int or float, got Tensor"),
    ],
)
def test_bad_scalar_arguments_are_rejected(scale: object, bias: object, message: str) -> None:
    total = compile_module(REDUCTIONS, "scaled_total")
    with pytest.raises(ArgumentError, match=message):
        total(torch.randn(2, 2, dtype=torch.float64), scale, bias)


def test_cache_returns_the_same_compiled_function() -> None:
    first = compile_module(ELEMENTWISE, "fused")
    assert compile_module(ELEMENTWISE, "fused", output_type="linalg") is first
    assert compile_module(REDUCTIONS, "row_sum") is not compile_module(REDUCTIONS, "row_max")
    clear_compile_cache()
    again = compile_module(ELEMENTWISE, "fused")
    assert again is not first
    x = torch.randn(8, 33)
    assert torch.equal(first(x, x, x)[0], again(x, x, x)[0])  # the old one still works


def test_concurrent_compiles_and_calls() -> None:
    text = DYNAMIC_TILED_ADD.format(tm=4, tn=4)
    compiled: list[CompiledFunction] = []
    failures: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            fn = compile_module(text, "tiled_add")
            compiled.append(fn)
            x = torch.randn(9, 11 + seed)
            for _ in range(20):
                assert torch.equal(fn(x, x, torch.zeros_like(x))[0], x + x)
        except BaseException as err:  # a thread cannot fail the test itself
            failures.append(err)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert len({id(fn) for fn in compiled}) == 1


@pytest.mark.parametrize(("pipeline", "failing"), [("plain", "one-shot-bufferize{"), ("fast", "eliminate-empty-tensors")])
def test_failing_pass_is_named_with_its_diagnostics(pipeline: str, failing: str) -> None:
    # One-shot analysis refuses a to_tensor without `restrict`; in the fast pipeline
    # eliminate-empty-tensors runs that analysis first (in one pass manager with the
    # bufferization, so the runner has to find which of its passes failed).
    text = """
    func.func @f() -> tensor<8xf32> {
      %m = memref.alloca() : memref<8xf32>
      %t = bufferization.to_tensor %m : memref<8xf32> to tensor<8xf32>
      return %t : tensor<8xf32>
    }
    """
    with pytest.raises(ExecutionError) as info:
        compile_module(text, "f", pipeline=pipeline)
    assert info.value.pass_name is not None and info.value.pass_name.startswith(failing)
    assert any("restrict" in d for d in info.value.diagnostics)
    assert failing in str(info.value) and "restrict" in str(info.value)


@pytest.mark.parametrize(
    ("name", "type_", "message"),
    [
        ("g", "tensor<4xf32>", r"no func\.func of that name \(it has: g\)"),
        ("f", "tensor<*xf32>", r"argument #0 has type tensor<\*xf32>"),
        ("f", "tensor<4xcomplex<f32>>", r"element type complex<f32>"),
        ("f", "i64", r"result #0 has type i64; only tensors can be returned"),
    ],
)
def test_unsupported_modules_are_reported(name: str, type_: str, message: str) -> None:
    text = f"func.func @{name}(%x: {type_}) -> {type_} {{ return %x : {type_} }}"
    with pytest.raises(ExecutionError, match=message):
        compile_module(text, "f")


def test_text_that_does_not_parse_is_a_verification_error() -> None:
    with pytest.raises(MLIRVerificationError):
        compile_module("func.func @f( {", "f")


ELEMENT_STORES = """
func.func @scatter(%dest: tensor<5x7xf32>, %rows: tensor<4xi64>, %vals: tensor<4xf32>) -> tensor<5x7xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %dest) -> (tensor<5x7xf32>) {
    %row64 = tensor.extract %rows[%i] : tensor<4xi64>
    %row = arith.index_cast %row64 : i64 to index
    %v = tensor.extract %vals[%i] : tensor<4xf32>
    %one = tensor.from_elements %v : tensor<1x1xf32>
    %at_col3 = tensor.insert_slice %one into %acc[%row, 3] [1, 1] [1, 1] : tensor<1x1xf32> into tensor<5x7xf32>
    scf.yield %at_col3 : tensor<5x7xf32>
  }
  return %r : tensor<5x7xf32>
}
"""


def test_one_element_slice_stores_become_tensor_insert_before_bufferization() -> None:
    with mlir_session() as (ctx, _diagnostics):
        module = ir.Module.parse(ELEMENT_STORES, ctx)
        store_single_elements_in_place(module)
        run_filecheck(str(module), """
            // CHECK:      %[[ROW:.+]] = arith.index_cast
            // CHECK-NEXT: %[[V:.+]] = tensor.extract %{{.+}} : tensor<4xf32>
            // CHECK-NEXT: %[[COL:.+]] = arith.constant 3 : index
            // CHECK-NEXT: %{{.+}} = tensor.insert %[[V]] into %{{.+}}[%[[ROW]], %[[COL]]] : tensor<5x7xf32>
            // CHECK-NOT:  tensor.from_elements
            // CHECK-NOT:  tensor.insert_slice
        """)
    dest = torch.zeros(5, 7)
    rows, vals = torch.tensor([4, 0, 2, 4]), torch.tensor([1.0, 2.0, 3.0, 4.0])
    (got,) = compile_module(ELEMENT_STORES, "scatter")(dest, rows, vals)
    expected = dest.clone()
    for row, value in zip(rows.tolist(), vals):
        expected[row, 3] = value  # in loop order: the last write to row 4 wins
    torch.testing.assert_close(got, expected)
