"""The CPU pipelines as lists of named steps: the runner names the step that fails,
prints the steps that run, and writes the IR after every step; and the kinds of pipeline
and runtime are accepted as strings or enums."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from filecheck_util import run_filecheck
from torch_mlir import ir

from helion_mlir.errors import ExecutionError
from helion_mlir.mlir_context import mlir_session
from helion_mlir.output_type import OutputType
from helion_mlir.runtime.cpu.engine import compile_module, lower_module
from helion_mlir.runtime.cpu.pipelines import (
    DUMP_ENVIRONMENT_VARIABLE,
    PIPELINES,
    Pipeline,
    PipelineOptions,
    describe_pipeline,
    lower_to_llvm,
)
from helion_mlir.runtime.cpu.pipelines.steps import (
    PARALLEL,
    Condition,
    optimization,
    passes,
    rewrite,
)
from helion_mlir.runtime.kernel.compiled_kernel import Runtime
from helion_mlir_cli import main

ADD = """
#id = affine_map<(d0) -> (d0)>
func.func @add(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %init = tensor.empty() : tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %y : tensor<8xf32>, tensor<8xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %sum : tensor<8xf32>
}
"""

# One-shot analysis refuses a to_tensor without `restrict`.
UNBUFFERIZABLE = """
func.func @f() -> tensor<8xf32> {
  %m = memref.alloca() : memref<8xf32>
  %t = bufferization.to_tensor %m : memref<8xf32> to tensor<8xf32>
  return %t : tensor<8xf32>
}
"""


def _lower(text: str, func_name: str, steps, options: PipelineOptions = PipelineOptions(), **kwargs) -> str:
    with mlir_session() as (_ctx, diagnostics):
        return str(lower_to_llvm(text, func_name, Pipeline.FAST, steps, options, diagnostics, **kwargs).module)


# ------------------------------------------------------------------ failures are named
def test_a_failing_pass_in_the_middle_of_a_group_is_named() -> None:
    one_shot = "one-shot-bufferize{bufferize-function-boundaries}"
    steps = passes("func.func(canonicalize)", one_shot, "func.func(cse)")
    with pytest.raises(ExecutionError) as info:
        _lower(UNBUFFERIZABLE, "f", steps)
    assert info.value.pass_name == one_shot
    assert any("restrict" in d for d in info.value.diagnostics)


@pytest.mark.parametrize("grouped", [False, True])
def test_a_pass_that_does_not_parse_is_named(grouped: bool) -> None:
    steps = passes(*(["func.func(canonicalize)"] if grouped else []), "func.func(no-such-pass)")
    with pytest.raises(ExecutionError, match="does not parse") as info:
        _lower(ADD, "add", steps)
    assert info.value.pass_name == "func.func(no-such-pass)"
    assert "no-such-pass" in info.value.diagnostics[0]


def test_a_failing_rewrite_is_named_and_keeps_its_cause() -> None:
    def break_the_module(module: ir.Module) -> None:
        raise ValueError("no plan for this op")

    with pytest.raises(ExecutionError, match="rewrite failed: ValueError: no plan for this op") as info:
        _lower(ADD, "add", (*passes("func.func(canonicalize)"), rewrite(break_the_module)))
    assert info.value.pass_name == "break-the-module"
    assert isinstance(info.value.__cause__, ValueError)


def _half_rewrite_then_fail(module: ir.Module) -> None:
    """Marks every op of the module (a change), then fails."""
    for op in module.body.operations:
        op.attributes["half_done"] = ir.UnitAttr.get()
    raise ValueError("failed to apply named transform sequence")


def test_an_optimization_that_fails_is_skipped_with_the_module_as_before_it(caplog) -> None:
    caplog.set_level("DEBUG", logger="helion_mlir.runtime.cpu.pipelines.runner")
    text = _lower(ADD, "add", (*passes("func.func(canonicalize)"), optimization(_half_rewrite_then_fail)))
    assert "linalg.generic" in text and "half_done" not in text
    assert "@add: half-rewrite-then-fail skipped, the module left as before it: ValueError: failed to apply" in caplog.text


def test_a_rewrite_the_numbers_depend_on_still_fails_the_lowering() -> None:
    with pytest.raises(ExecutionError, match="rewrite failed: ValueError"):
        _lower(ADD, "add", (*passes("func.func(canonicalize)"), rewrite(_half_rewrite_then_fail)))


@pytest.mark.parametrize("step", [rewrite, optimization])
def test_a_rewrite_that_leaves_invalid_ir_is_reported_by_name(step) -> None:
    def drop_the_terminator(module: ir.Module) -> None:
        for op in module.body.operations:
            list(op.regions[0].blocks[0].operations)[-1].erase()

    with pytest.raises(ExecutionError, match="left a module that does not verify") as info:
        _lower(ADD, "add", (*passes("func.func(canonicalize)"), step(drop_the_terminator)))
    assert info.value.pass_name == "drop-the-terminator"


def test_a_step_whose_condition_does_not_hold_is_skipped() -> None:
    def fail(module: ir.Module) -> None:
        raise AssertionError("must not run")

    steps = (*passes("func.func(canonicalize)"), rewrite(fail, when=PARALLEL))
    assert "linalg.generic" in _lower(ADD, "add", steps, PipelineOptions(threads=1))
    with pytest.raises(ExecutionError, match="must not run"):
        _lower(ADD, "add", steps, PipelineOptions(threads=2))


# A truncation to f8: its module needs the passes that move 8-bit float arithmetic to f32.
TO_F8 = """
#id = affine_map<(d0) -> (d0)>
func.func @to_f8(%x: tensor<8xf32>) -> tensor<8xf32> {
  %init = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.truncf %a : f32 to f8E4M3FN
    %s = arith.addf %t, %t : f8E4M3FN
    %e = arith.extf %s : f8E4M3FN to f32
    linalg.yield %e : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""


def test_a_step_whose_condition_reads_the_module_runs_only_where_the_module_needs_it() -> None:
    def fail(module: ir.Module) -> None:
        raise AssertionError("ran")

    needs_f8 = Condition("f8 values", found_in=lambda module: "f8E4M3FN" in str(module))
    steps = (*passes("func.func(canonicalize)"), rewrite(fail, when=needs_f8), *passes("func.func(cse)"))
    assert "linalg.generic" in _lower(ADD, "add", steps)
    with pytest.raises(ExecutionError, match="ran"):
        _lower(TO_F8, "to_f8", steps)


def test_consecutive_passes_of_one_module_condition_read_the_module_once() -> None:
    reads: list[str] = []

    def has_f8(module: ir.Module) -> bool:
        reads.append("read")
        return "f8E4M3FN" in str(module)

    needs_f8 = Condition("f8 values", found_in=has_f8)
    steps = (*passes("func.func(canonicalize)", "func.func(cse)", when=needs_f8), *passes("func.func(cse)"))
    _lower(TO_F8, "to_f8", steps)
    assert reads == ["read"]


# ------------------------------------------------------------------ the printed pipeline
@pytest.mark.parametrize("pipeline", list(Pipeline))
def test_the_printed_pipeline_lists_the_passes_that_move_low_precision_floats_to_f32(pipeline: Pipeline) -> None:
    run_filecheck(describe_pipeline(pipeline), """
        // CHECK: rewrite define-bf16-truncation
        // CHECK-NEXT: pass func.func(math-extend-to-supported-types{target-type=f32}) [8- or 4-bit floats]
        // CHECK-NEXT: pass func.func(arith-emulate-unsupported-floats{source-types=f8E4M3FN,{{.*}},f4E2M1FN target-type=f32}) [8- or 4-bit floats]
        // CHECK-NEXT: rewrite emulate-low-precision-floats
    """)


def test_the_low_precision_passes_run_as_steps_of_their_own_only_where_such_floats_are(tmp_path: Path) -> None:
    _lower(TO_F8, "to_f8", PIPELINES[Pipeline.PLAIN], dump_dir=tmp_path / "f8")
    _lower(ADD, "add", PIPELINES[Pipeline.PLAIN], dump_dir=tmp_path / "f32")
    [f8_dump] = (tmp_path / "f8" / "to_f8.fast").glob("*-arith-emulate-unsupported-floats-source-types-f8*.mlir")
    run_filecheck(f8_dump.read_text(), """
        // CHECK: IR Dump After func.func(arith-emulate-unsupported-floats{{.*}}) //
        // CHECK: arith.addf {{.*}} : f32
        // CHECK-NOT: arith.addf {{.*}} : f8E4M3FN
    """)
    [f32_dump] = (tmp_path / "f32" / "add.fast").glob("*-arith-emulate-unsupported-floats-source-types-f8*.mlir")
    assert f32_dump.read_text().startswith(
        "// -----// IR Dump After func.func(arith-emulate-unsupported-floats{source-types=f8E4M3FN,")
    assert "(skipped: no 8- or 4-bit floats) //----- //" in f32_dump.read_text().split("\n", 1)[0]



def test_the_printed_fast_pipeline_lists_its_steps_in_order_with_their_options() -> None:
    printed = describe_pipeline(Pipeline.FAST, PipelineOptions(OutputType.TOSA, threads=2, in_place=True))
    run_filecheck(printed, """
        // CHECK: fast pipeline (tosa, 2 threads, in place): [[N:[0-9]+]] steps
        // CHECK-NEXT: 1 rewrite make-the-function-public -- Check that the function exists
        // CHECK-NEXT: 2 pass symbol-privatize{exclude=$func}
        // CHECK-NEXT: 3 pass symbol-dce
        // CHECK-NEXT: 4 pass func.func(tosa-optional-decompositions) [from tosa]
        // CHECK: check check-lowered-to-linalg
        // CHECK: rewrite write-results-in-place [in place]
        // CHECK: rewrite parallelize-tile-loops [parallel]
        // CHECK: rewrite fold-add-into-matmul
        // CHECK: rewrite vectorize-tiles
        // CHECK: pass one-shot-bufferize{bufferize-function-boundaries
        // CHECK: pass convert-scf-to-openmp{num-threads=2} [parallel]
        // CHECK: pass reconcile-unrealized-casts
        // CHECK-NEXT: rewrite move-bf16-through-memory-as-i16
        // CHECK-NEXT: rewrite leave-out-cpu-features
        // CHECK-NEXT: check check-lowered-to-llvm
        // CHECK-NEXT: [[N]] check check-openmp-constructs [parallel]
    """)


def test_the_printed_pipeline_leaves_out_steps_that_do_not_run() -> None:
    one_thread = describe_pipeline(Pipeline.FAST, PipelineOptions(threads=1))
    assert "openmp" not in one_thread.replace("convert-openmp-to-llvm", "")
    assert "tosa" not in one_thread and "write-results-in-place" not in one_thread
    plain = describe_pipeline("plain")
    assert "vectorize-tiles" not in plain and "one-shot-bufferize" in plain
    steps = PIPELINES[Pipeline.PLAIN]
    assert plain.splitlines()[0] == f"plain pipeline (linalg-on-tensors, 1 thread): {sum(s.runs_with(PipelineOptions()) for s in steps)} steps"


def test_the_pipeline_command_prints_the_pipeline(capsys) -> None:
    assert main(["pipeline", "--plain", "-t", "stablehlo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plain pipeline (stablehlo, 1 thread)")
    assert "func.func(stablehlo-legalize-to-linalg)  [from stablehlo]" in out


# ------------------------------------------------------------------ IR after every step
def test_the_ir_is_written_after_every_step(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(DUMP_ENVIRONMENT_VARIABLE, str(tmp_path))
    lowered = lower_module(ADD, "add", threads=2, in_place=True)  # grouped passes: the dumps run them one by one
    (folder,) = tmp_path.iterdir()
    assert folder.name == "add.fast"
    files = sorted(folder.iterdir())
    active = [s for s in PIPELINES[Pipeline.FAST] if s.runs_with(PipelineOptions(threads=2, in_place=True))]
    assert len(files) == len(active) + 1
    assert files[0].name == "00-input.mlir" and "IR Dump Before the pipeline" in files[0].read_text()
    assert files[1].name == "01-make-the-function-public.mlir"
    assert files[2].name == "02-symbol-privatize-exclude-add.mlir"
    assert files[3].read_text().startswith("// -----// IR Dump After symbol-dce //----- //\n")
    assert any(f.name.endswith("-vectorize-tiles.mlir") and "vector." in f.read_text() for f in files)
    assert files[-1].read_text().split("\n", 1)[1].strip() == lowered.strip()
    lower_module(ADD, "add", threads=2, in_place=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["add.fast", "add.fast.2"]


def test_the_ir_of_a_failing_step_is_written_as_failed(tmp_path: Path) -> None:
    with pytest.raises(ExecutionError):
        _lower(UNBUFFERIZABLE, "f", PIPELINES[Pipeline.PLAIN], dump_dir=tmp_path)
    last = sorted((tmp_path / "f.fast").iterdir())[-1]
    assert "-one-shot-bufferize" in last.name
    assert last.read_text().startswith("// -----// IR Dump After one-shot-bufferize{")
    assert "} Failed //----- //" in last.read_text().split("\n", 1)[0]


# ------------------------------------------------------------------ kinds as enums
def test_pipelines_and_runtimes_are_enums_that_accept_their_names() -> None:
    assert Pipeline.parse("fast") is Pipeline.FAST and Pipeline.parse(Pipeline.PLAIN) is Pipeline.PLAIN
    assert Runtime.parse("iree") is Runtime.IREE and Runtime.JIT == "jit"
    with pytest.raises(ValueError, match="unknown pipeline 'quick'; choose one of: fast, plain"):
        Pipeline.parse("quick")
    with pytest.raises(ValueError, match="unknown runtime 'aot'; choose one of: jit, iree"):
        Runtime.parse("aot")
    one = compile_module(ADD, "add", pipeline="plain")
    assert compile_module(ADD, "add", pipeline=Pipeline.PLAIN) is one
    assert one.pipeline is Pipeline.PLAIN


def test_the_thread_count_is_one_for_the_plain_pipeline_and_torchs_by_default() -> None:
    assert Pipeline.PLAIN.thread_count(4) == 1
    assert Pipeline.FAST.thread_count(3) == 3
    assert Pipeline.FAST.thread_count(None) == max(1, torch.get_num_threads())
    with pytest.raises(ValueError, match="in_place needs the fast pipeline"):
        PipelineOptions.of(Pipeline.PLAIN, in_place=True)
