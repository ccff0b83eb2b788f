"""Nodes helion_mlir cannot lower raise UnsupportedNodeError, and say where and why.

Covers the Helion targets rejected on purpose (inline assembly, inline Triton,
device_print), ATen ops torch-mlir cannot lower for an output type, and device-IR
targets with no lowering rule at all. Every error names the node, its target and the
kernel source line; generate_mlir returns nothing when it raises.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import helion
import helion.language as hl
import pytest
import torch
from examples_util import EXAMPLES_DIR, load_example
from helion.language import _tracing_ops
from torch import fx

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir import (
    KernelCase,
    OutputType,
    UnsupportedNodeError,
    check_kernels,
    compile_kernel,
    generate_mlir,
)
from helion_mlir.inliner.builder import MLIRBuilder
from helion_mlir.lowering import registry as lowering_registry
from helion_mlir.lowering.visitor import IRVisitor

KERNELS = load_example(Path(__file__).resolve().parent / "kernels" / "rejected_kernels.py")
KERNEL_FILE = KERNELS.uses_inline_asm.fn.__code__.co_filename


def line_of(needle: str, path: str = KERNEL_FILE) -> int:
    hits = [n for n, line in enumerate(Path(path).read_text().splitlines(), 1) if needle in line]
    assert len(hits) == 1, f"{needle!r} occurs {len(hits)} times in {path}"
    return hits[0]


def lowering_error(kernel: Any, args: tuple[Any, ...], output_type: str = "linalg-on-tensors") -> UnsupportedNodeError:
    """The UnsupportedNodeError generate_mlir raises (no text is returned when it raises)."""
    bound = kernel.bind(args)
    with pytest.raises(UnsupportedNodeError) as info:
        generate_mlir(bound, output_type=output_type)
    return info.value


# ------------------------------------------------------------------- rejected Helion targets
REJECTED = [
    # kernel, args, node name, target as the message spells it, source text, reason fragment
    ("uses_inline_asm", KERNELS.int_args, "inline_asm_elementwise", "inline_asm_ops.inline_asm_elementwise",
     'hl.inline_asm_elementwise("mov.u32', "inline assembly"),
    ("uses_inline_triton", KERNELS.float_args, "inline_triton", "inline_triton_ops.inline_triton",
     'hl.inline_triton("{0} * 2"', "inline Triton"),
    ("uses_device_print", KERNELS.float_args, "device_print", "device_print.device_print",
     'hl.device_print("vals="', "device_print"),
]


@pytest.mark.parametrize(("kernel", "make_args", "node", "target", "source", "reason"), REJECTED,
                         ids=[r[0] for r in REJECTED])
def test_rejected_helion_target_raises_naming_node_target_and_source_line(
    kernel: str, make_args: Any, node: str, target: str, source: str, reason: str
) -> None:
    err = lowering_error(getattr(KERNELS, kernel), make_args())
    where = f"{KERNEL_FILE}:{line_of(source)}"
    assert (err.node_name, err.target, err.source_location) == (node, target, where)
    message = str(err)
    assert message.startswith(f"node '{node}' ({target}) at {where}: "), message
    assert reason in message
    assert "hint:" in message
    assert "func.func" not in message  # no partial module in the error either


@pytest.mark.parametrize("output_type", ["tosa", "raw"])
def test_rejected_helion_target_is_rejected_for_every_output_type(output_type: str) -> None:
    err = lowering_error(KERNELS.uses_device_print, KERNELS.float_args(), output_type)
    assert err.target == "device_print.device_print"


REALISTIC_ASM = [
    # kernel, args, node name, source text
    ("softmax_fast_exp2", KERNELS.matrix_args, "powers", 'hl.inline_asm_elementwise("ex2.approx.f32'),
    ("pack_bf16x2", KERNELS.vector_args, "packed", 'hl.inline_asm_elementwise("cvt.rn.bf16x2.f32'),
]


@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "tosa", "stablehlo", "raw"])
@pytest.mark.parametrize(("kernel", "make_args", "node", "source"), REALISTIC_ASM, ids=[r[0] for r in REALISTIC_ASM])
def test_inline_asm_in_a_real_kernel_is_refused_clearly_for_every_output_type(
    kernel: str, make_args: Any, node: str, source: str, output_type: str
) -> None:
    # The asm sits between ATen ops queued for torch-mlir (and, for the softmax, inside a
    # loop carrying values): the refusal still names it, its target and its line.
    where = f"{KERNEL_FILE}:{line_of(source)}"
    err = lowering_error(getattr(KERNELS, kernel), make_args(), output_type)
    assert (err.node_name, err.target, err.source_location) == (node, "inline_asm_ops.inline_asm_elementwise", where)
    assert str(err).startswith(f"node '{node}' (inline_asm_ops.inline_asm_elementwise) at {where}: inline assembly")
    assert "hint: express the operation with torch ops" in str(err)
    with pytest.raises(UnsupportedNodeError, match="inline assembly"):
        compile_kernel(getattr(KERNELS, kernel).bind(make_args()), output_type=output_type)


def test_batch_report_lists_a_kernel_with_inline_asm_as_refused_and_goes_on() -> None:
    cases = [KernelCase("softmax_fast_exp2", KERNELS.softmax_fast_exp2, KERNELS.matrix_args()),
             KernelCase("erfinv", KERNELS.uses_erfinv, KERNELS.float_args())]
    report = check_kernels(cases, ["tosa", "raw"])
    by_case = {(r.label, r.output_type): r for r in report.results}
    for output_type in ("tosa", "raw"):
        refused = by_case[("softmax_fast_exp2", output_type)]
        assert refused.status == "emit-failed" and "inline assembly" in refused.reason
    assert by_case[("erfinv", "raw")].status == "verified"  # the batch went on


def test_unused_inline_asm_that_helion_drops_is_absent_from_the_lowering_too() -> None:
    """Helion's tracing removes an unused inline_asm_elementwise before the device IR
    exists (its own code generator never emits it); the lowering matches Helion."""
    bound = KERNELS.uses_impure_inline_asm_for_effect.bind(KERNELS.int_args())
    targets = {getattr(n.target, "__name__", "") for g in bound.host_function.device_ir.graphs for n in g.graph.nodes}
    assert "inline_asm_elementwise" not in targets
    assert "inline_asm_elementwise" not in helion_mlir.generate_mlir(bound)


def test_inline_triton_whose_result_is_unused_is_still_rejected() -> None:
    err = lowering_error(KERNELS.uses_inline_triton_for_effect, KERNELS.float_args())
    assert err.node_name == "inline_triton"


# ---------------------------------------------------------------- ATen ops torch-mlir rejects
@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "tosa", "stablehlo"])
def test_aten_op_torch_mlir_cannot_lower_raises_with_output_type_and_diagnostics(output_type: str) -> None:
    err = lowering_error(KERNELS.uses_erfinv, KERNELS.float_args(), output_type)
    where = f"{KERNEL_FILE}:{line_of('torch.erfinv(')}"
    assert (err.node_name, err.target, err.source_location, err.output_type) == (
        "erfinv", "aten.erfinv.default", where, output_type)
    assert any("failed to legalize operation 'torch.aten.erfinv'" in d for d in err.diagnostics), err.diagnostics
    message = str(err)
    assert message.startswith(f"node 'erfinv' (aten.erfinv.default) at {where}: "), message
    assert f"(output type '{output_type}')" in message
    assert "torch-mlir diagnostics:" in message and "failed to legalize operation 'torch.aten.erfinv'" in message
    assert "func.func @uses_erfinv" not in message


def test_aten_op_failing_for_one_output_type_still_lowers_for_the_others() -> None:
    # torch-mlir imports aten.erfinv (raw) but lowers it to no backend; sinh lacks only tosa.
    bound_erfinv = KERNELS.uses_erfinv.bind(KERNELS.float_args())
    assert "torch.aten.erfinv" in generate_mlir(bound_erfinv, output_type="raw")
    err = lowering_error(KERNELS.uses_sinh, KERNELS.float_args(), "tosa")
    assert (err.node_name, err.target, err.output_type) == ("sinh", "aten.sinh.default", "tosa")
    assert "failed to legalize operation 'torch.aten.sinh'" in str(err)
    bound_sinh = KERNELS.uses_sinh.bind(KERNELS.float_args())
    assert "math.sinh" in generate_mlir(bound_sinh, output_type="linalg-on-tensors")
    assert "stablehlo." in generate_mlir(bound_sinh, output_type="stablehlo")


def test_failed_lowering_of_a_rebuilt_aten_node_names_the_kernels_own_node() -> None:
    # atan2(v, v): Helion strips the repeated operand, so the lowering imports a rebuilt
    # twin of the node; the error must still name the node (and line) the kernel has.
    err = lowering_error(KERNELS.uses_atan2_of_itself, KERNELS.float_args(), "tosa")
    assert (err.node_name, err.target, err.output_type) == ("atan2", "aten.atan2.default", "tosa")
    assert err.source_location == f"{KERNEL_FILE}:{line_of('torch.atan2(')}"
    assert any("failed to legalize operation 'torch.aten.atan2'" in d for d in err.diagnostics)
    assert "(output type 'tosa')" in str(err)
    bound = KERNELS.uses_atan2_of_itself.bind(KERNELS.float_args())
    assert "math.atan2" in generate_mlir(bound, output_type="linalg-on-tensors")


def test_aten_failure_before_another_problem_is_the_one_reported() -> None:
    # ATen ops are lowered together after the visit; an earlier ATen failure still wins
    # over a later node the visit itself rejects.
    err = lowering_error(KERNELS.uses_erfinv_then_device_print, KERNELS.float_args())
    assert (err.node_name, err.target) == ("vals", "aten.erfinv.default")
    assert err.source_location == f"{KERNEL_FILE}:{line_of('vals = x[tile].erfinv()')}"


def test_rebuilt_aten_node_failure_reads_like_any_other_torch_mlir_failure() -> None:
    direct = lowering_error(KERNELS.uses_sinh, KERNELS.float_args(), "tosa")
    rebuilt = lowering_error(KERNELS.uses_atan2_of_itself, KERNELS.float_args(), "tosa")
    assert type(rebuilt) is type(direct)
    assert "torch-mlir cannot lower it to tosa" in str(direct)
    assert "torch-mlir cannot lower it to tosa" in str(rebuilt)
    assert "hint:" in str(rebuilt)


# --------------------------------------------------------------------- targets with no rule
def fake_device_op(x: Any) -> Any:
    """Stands in for a Helion device op helion_mlir has never heard of."""
    raise AssertionError("never called")


fake_device_op.__module__ = "helion.language.future_ops"


def test_visiting_a_target_without_a_rule_raises_a_clear_error_and_emits_nothing() -> None:
    graph = fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_function(fake_device_op, (x,))
    node.meta["location"] = SimpleNamespace(filename="/kernels/new_op.py", lineno=12, colno=8)
    builder = MLIRBuilder()
    visitor = IRVisitor(None, builder, OutputType.LINALG_ON_TENSORS)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedNodeError) as info:
        visitor.visit(node)
    err = info.value
    assert (err.node_name, err.target, err.source_location) == (
        "fake_device_op", "future_ops.fake_device_op", "/kernels/new_op.py:12")
    assert str(err).startswith(
        "node 'fake_device_op' (future_ops.fake_device_op) at /kernels/new_op.py:12: "
        "helion_mlir has no lowering for this node target")
    assert "hint:" in str(err)
    assert node not in visitor.values
    assert "fake_device_op" not in builder.render()


def test_kernel_reaching_a_target_whose_rule_is_missing_raises_at_its_source_line(monkeypatch: Any) -> None:
    monkeypatch.delitem(lowering_registry._LOWERINGS, _tracing_ops._while_loop)
    newton = load_example(EXAMPLES_DIR / "newton_rsqrt.py")
    source = newton.KERNEL.fn.__code__.co_filename
    err = lowering_error(newton.KERNEL, newton.make_args("divisible"))
    assert (err.node_name, err.target) == ("_while_loop", "_tracing_ops._while_loop")
    assert err.source_location == f"{source}:{line_of('while step < iters:', source)}"
    assert "helion_mlir has no lowering for this node target" in str(err)


def test_kernel_bound_before_importing_helion_mlir_gets_a_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "bind_first.py"
    script.write_text(
        "import torch, helion, helion.language as hl\n"
        "@helion.kernel(config=helion.Config(block_sizes=[8]))\n"
        "def square(x: torch.Tensor) -> torch.Tensor:\n"
        "    out = torch.empty_like(x)\n"
        "    for t in hl.tile(x.size(0)):\n"
        "        v = x[t]\n"
        "        out[t] = v * v\n"
        "    return out\n"
        "bound = square.bind((torch.randn(20),))\n"
        "import helion_mlir\n"
        "try:\n"
        "    helion_mlir.generate_mlir(bound)\n"
        "except helion_mlir.NodeNormalizationError as err:\n"
        "    print(err)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"node 'mul' (aten.mul.Tensor) at {script}:7" in done.stdout
    assert "bound before helion_mlir was imported" in done.stdout
    assert "hint: import helion_mlir before calling kernel.bind" in done.stdout


@helion.kernel(config=helion.Config(block_sizes=[]))
def rows_through_pointers(pointers: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    count = hl.specialize(pointers.size(0))
    out = torch.empty([count, like.size(0)], dtype=like.dtype, device=like.device)
    for i in hl.grid(like.size(0)):
        out[:, i] = hl.stacktensor_like(like, pointers[:])[i]
    return out


@helion.kernel(config=helion.Config(block_sizes=[]))
def fill_through_pointers(pointers: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    for i in hl.grid(like.size(0)):
        stack = hl.stacktensor_like(like, pointers[:])
        stack[i] = 1.0
    return like


@pytest.mark.parametrize("kernel", [rows_through_pointers, fill_through_pointers])
def test_loads_and_stores_through_a_stack_tensor_are_refused_saying_why(kernel: Any) -> None:
    rows = [torch.randn(6) for _ in range(3)]
    pointers = torch.tensor([row.data_ptr() for row in rows], dtype=torch.uint64)
    with pytest.raises(UnsupportedNodeError, match=r"stack tensor .*pointers read at run time") as raised:
        compile_kernel(kernel.bind((pointers, rows[0])))
    assert "test_unsupported_nodes.py" in str(raised.value)


@helion.kernel(config=helion.Config(block_sizes=[4]))
def pick_through_apart_index_tensors(x: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([x.size(0), x.size(1), columns.size(1)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile, :, :] = x[tile.index[:, None], :, columns[tile, :]]
    return out


def test_index_tensors_of_several_dims_that_are_not_adjacent_are_refused() -> None:
    # Helion does not broadcast them together (should_broadcast_tensor_indexers) and keeps
    # one block dim of each: neither torch's meaning nor a Cartesian product.
    x, columns = torch.randn(6, 2, 5), torch.randint(0, 5, (6, 3))
    with pytest.raises(UnsupportedNodeError, match=r"node 'load.*positions that are not adjacent") as raised:
        compile_kernel(pick_through_apart_index_tensors.bind((x, columns)))
    assert "test_unsupported_nodes.py" in str(raised.value)
