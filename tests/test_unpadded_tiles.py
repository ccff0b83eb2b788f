"""A peeled last tile of a static size is computed at that size rather than padded to its block
(fast pipeline, ``runtime/cpu/rewrites/tensor/unpadded_tiles.py``, upstream
``transform.structured.fuse_into_containing_op``): no padding copy in or out, every load and
store a vector one, and the numbers of reference mode, also where padding lanes are read
(reductions over a padded dim keep their neutral fill)."""

from __future__ import annotations

from pathlib import Path

import helion
import pytest
import torch
from examples_util import load_example_by_name
from fast_pipeline_util import after_step, example_module
from filecheck_util import run_filecheck

from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.pipelines.runner import DUMP_ENVIRONMENT_VARIABLE
from helion_mlir.runtime.cpu.rewrites.tensor.unpadded_tiles import (
    compute_static_tiles_unpadded,
)
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.verify import parse_module

pytestmark = pytest.mark.usefixtures("parallel_even_when_small")

STEP = "compute-static-tiles-unpadded"


def test_peeled_last_tiles_are_computed_at_their_size_with_vector_loads_and_stores(tmp_path, monkeypatch) -> None:
    """130x300 in [16, 128] tiles: the last 44 columns of each row block, the last 2 rows and
    their corner are read straight from the input at their own sizes, with no block filled to
    pad them; lowered, no scalar element is loaded or stored (the padding copies were loops)."""
    text = example_module("bias_gelu", (torch.randn(130, 300), torch.randn(300)), block_sizes=[16, 128])
    run_filecheck(after_step(tmp_path, monkeypatch, text, "bias_gelu", STEP), """
        // CHECK-LABEL: func.func @bias_gelu(
        // CHECK-NOT: linalg.fill
        // CHECK: %[[COLUMNS:.*]] = tensor.extract_slice %arg0[%{{.*}}, 256] [16, 44] [1, 1] : tensor<130x300xf32> to tensor<16x44xf32>
        // CHECK: linalg.generic {{.*}} ins(%[[COLUMNS]], %{{.*}} : tensor<16x44xf32>, tensor<1x44xf32>) outs(%{{.*}} : tensor<16x44xf32>)
        // CHECK: %[[ROWS:.*]] = tensor.extract_slice %arg0[128, %{{.*}}] [2, 128] [1, 1] : tensor<130x300xf32> to tensor<2x128xf32>
        // CHECK: linalg.generic {{.*}} ins(%[[ROWS]], %{{.*}} : tensor<2x128xf32>, tensor<1x128xf32>) outs(%{{.*}} : tensor<2x128xf32>)
        // CHECK: %[[CORNER:.*]] = tensor.extract_slice %arg0[128, 256] [2, 44] [1, 1] : tensor<130x300xf32> to tensor<2x44xf32>
        // CHECK: linalg.generic {{.*}} ins(%[[CORNER]], %{{.*}} : tensor<2x44xf32>, tensor<1x44xf32>) outs(%{{.*}} : tensor<2x44xf32>)
        // CHECK-NOT: linalg.fill
        // CHECK-LABEL: // LOWERED
        // CHECK-NOT: -> f32
        // CHECK-NOT: f32, !llvm.ptr
    """)


_REDUCTION_OF_A_PADDED_TILE = """
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<5x100xf32>) -> tensor<5xf32> {
  %low = arith.constant 0xFF800000 : f32
  %block = tensor.empty() : tensor<8x128xf32>
  %filled = linalg.fill ins(%low : f32) outs(%block : tensor<8x128xf32>) -> tensor<8x128xf32>
  %padded = tensor.insert_slice %x into %filled[0, 0] [5, 100] [1, 1] : tensor<5x100xf32> into tensor<8x128xf32>
  %init = tensor.empty() : tensor<8xf32>
  %start = linalg.fill ins(%low : f32) outs(%init : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%padded : tensor<8x128xf32>) outs(%start : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %real = tensor.extract_slice %max[0] [5] [1] : tensor<8xf32> to tensor<5xf32>
  return %real : tensor<5xf32>
}
"""


def test_a_reduction_over_a_padded_dim_is_cut_to_the_real_rows_and_keeps_its_padding_lanes() -> None:
    """The 5 real rows of a row maximum over a block padded with -inf: the maximum (then its
    initial fill) is computed for those rows only, still over all 128 lanes of the padded dim,
    read from the padded block, whose 28 padding lanes keep their -inf."""
    with mlir_session():
        module = parse_module(_REDUCTION_OF_A_PADDED_TILE, what="test module")
        assert compute_static_tiles_unpadded(module) == 2  # the maximum, then its initial fill
        assert module.operation.verify()
        run_filecheck(str(module), """
            // CHECK: %[[LOW:.*]] = arith.constant 0xFF800000 : f32
            // CHECK: %[[FILLED:.*]] = linalg.fill ins(%[[LOW]] : f32) outs(%{{.*}} : tensor<8x128xf32>)
            // CHECK: %[[PADDED:.*]] = tensor.insert_slice %arg0 into %[[FILLED]][0, 0] [5, 100] [1, 1]
            // CHECK: %[[ROWS:.*]] = tensor.extract_slice %[[PADDED]][0, 0] [5, 128] [1, 1] : tensor<8x128xf32> to tensor<5x128xf32>
            // CHECK: linalg.generic {{.*}} ins(%[[ROWS]] : tensor<5x128xf32>) outs(%{{.*}} : tensor<5xf32>)
        """)


_SLICE_IN_A_LOOP = """
#map = affine_map<(d0) -> (d0)>
func.func @f(%x: tensor<64xf32>, %out: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %init = tensor.empty() : tensor<64xf32>
  %neg = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<64xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<64xf32>
  %r = scf.for %i = %c0 to %c64 step %c16 iter_args(%acc = %out) -> (tensor<64xf32>) {
    %piece = tensor.extract_slice %neg[%i] [16] [1] : tensor<64xf32> to tensor<16xf32>
    %stored = tensor.insert_slice %piece into %acc[%i] [16] [1] : tensor<16xf32> into tensor<64xf32>
    scf.yield %stored : tensor<64xf32>
  }
  return %r : tensor<64xf32>
}
"""


def test_a_slice_inside_a_loop_over_a_result_computed_before_it_is_left_alone() -> None:
    """Tiling the producer into the loop would compute it again on every iteration."""
    with mlir_session():
        module = parse_module(_SLICE_IN_A_LOOP, what="test module")
        before = str(module)
        assert compute_static_tiles_unpadded(module) == 0
        assert str(module) == before


def _changed_by_the_step(dump_dir: Path) -> bool:
    """Whether the step changed the module (its dump against the one of the step before it)."""
    [after] = dump_dir.glob(f"*.fast/*-{STEP}.mlir")
    steps = sorted(after.parent.glob("*.mlir"))
    before = steps[steps.index(after) - 1]
    return after.read_text().split("\n", 1)[1] != before.read_text().split("\n", 1)[1]


# (example, args, block sizes): ragged rows and columns, reductions over rows and over padded
# column chunks (the online softmax's -inf and 0 fills, the KL divergence's chunk sums).
CASES = {
    "gelu-both-dims": ("bias_gelu", lambda: (torch.randn(130, 300), torch.randn(300)), [16, 128]),
    "gelu-narrow-blocks": ("bias_gelu", lambda: (torch.randn(133, 100), torch.randn(100)), [8, 32]),
    "softmax-rows": ("softmax_one_pass", lambda: (3 * torch.randn(37, 100),), [16]),
    "online-softmax-chunks": ("softmax_two_pass", lambda: (3 * torch.randn(37, 100),), [8, 32, 32]),
    "layer-norm-rows": ("layer_norm", lambda: (torch.randn(37, 100), 1 + 0.1 * torch.randn(100),
                                              torch.randn(100), 1e-5), [16]),
    "rms-norm-rows": ("rms_norm", lambda: (torch.randn(45, 200), 1 + 0.1 * torch.randn(200), 1e-5), [16]),
    "kl-div-chunks": ("kl_div_loss", lambda: (torch.log_softmax(torch.randn(67, 300), -1),
                                             torch.log_softmax(torch.randn(67, 300), -1), True, "none"), [16, 128]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_ragged_kernels_computed_on_unpadded_tiles_match_torch(case: str, tmp_path, monkeypatch) -> None:
    name, make_args, blocks = CASES[case]
    example = load_example_by_name(name)
    torch.manual_seed(5)
    args = make_args()
    monkeypatch.setenv(DUMP_ENVIRONMENT_VARIABLE, str(tmp_path))
    kernel = helion.kernel(example.KERNEL.fn, config=helion.Config(block_sizes=blocks))
    compiled = compile_kernel(kernel.bind(args), threads=2)
    assert _changed_by_the_step(tmp_path), "no tile was computed unpadded: the case tests nothing of the step"
    torch.testing.assert_close(compiled(*args), example.reference(*args), **example.TOLERANCE)
