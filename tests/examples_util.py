"""Load the Helion examples in ``examples/`` by path, bind them, run them in reference mode.

Shared by the example tests (and usable by benchmarks or a CLI). Also a script:
``python tests/examples_util.py OUT_DIR [NAME ...]`` writes each example's device IR to
``OUT_DIR/<name>.txt``.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import helion
import pytest
import torch
from torch.utils._pytree import tree_map

from helion_mlir.errors import ExecutionError
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.iree.engine import device_available
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.runtime.reference import reference_kernel as ref_mode_kernel
from helion_mlir.runtime.reference import register_cpu_matmul_dtype_overloads
from helion_mlir.verify import parse_module

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
SHAPE_KINDS = ("divisible", "ragged")


# Documented exceptions (docs/lowering.md): torch-mlir lowerings that compute other numbers
# than torch, whichever compiler runs them; tests pin them so that a fix upstream shows up
# as an unexpected pass.
KNOWN_NUMERIC_GAPS = {
    ("fp8_quantize", "tosa"): "torch-mlir lowers x / s to x * reciprocal(s) in tosa: one f32 ulp off, which moves "
    "a few values across an fp8 rounding boundary",
}
# (example, output type) pairs the bundled MLIR cannot run at all (an ExecutionError).
KNOWN_RUN_GAPS: dict[tuple[str, str], str] = {}
# Kernels Helion itself refuses to bind with static_shapes=False.
HELION_NEEDS_STATIC_SHAPES = frozenset({"group_norm"})


def example_paths() -> list[Path]:
    """The example files, sorted; ``_``-prefixed helpers are not examples."""
    return sorted(p for p in EXAMPLES_DIR.glob("*.py") if not p.name.startswith("_"))


def example_names() -> list[str]:
    return [p.stem for p in example_paths()]


@functools.cache
def load_example(path: str | Path) -> ModuleType:
    """Import an example (or ``_common``) from its file path; cached per resolved path.

    The module is registered in ``sys.modules`` (Helion resolves a kernel's helper functions,
    such as ``hl.reduce`` combine functions, through its module), and ``examples/`` is put on
    ``sys.path`` so that an example's ``main`` can import ``_common``.
    """
    path = Path(path).resolve()
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    name = f"helion_mlir_examples.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_example_by_name(name: str) -> ModuleType:
    return load_example(EXAMPLES_DIR / f"{name}.py")


@functools.cache
def dynamic_shapes_kernel(name: str) -> helion.Kernel:
    """The example's kernel with ``static_shapes=False``, its config and settings otherwise.

    One twin per example and process: Helion caches bound kernels per kernel object, so the
    tests that bind an example with dynamic shapes (CPU, IREE, config fuzzing) bind it once.
    """
    kernel = load_example_by_name(name).KERNEL
    return helion.kernel(kernel.fn, configs=list(kernel.configs), static_shapes=False,
                         ignore_warnings=kernel.settings.ignore_warnings)


def clone_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def clone_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}


def example_call(module: ModuleType, shape: str = "divisible") -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional arguments (``make_args``) and keywords (``make_kwargs``, when the
    example defines it) an example calls its kernel with."""
    make_kwargs = getattr(module, "make_kwargs", None)
    return tuple(module.make_args(shape)), (make_kwargs(shape) if make_kwargs is not None else {})


def assert_matches(got: Any, expected: Any, tolerance: dict[str, float], where: str = "result") -> None:
    """``got`` has ``expected``'s structure, dtypes and shapes, and its values within ``tolerance``."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_matches(g, e, tolerance, f"{where}[{i}]")
        return
    assert isinstance(got, torch.Tensor), f"{where}: got {type(got).__name__}"
    assert got.shape == expected.shape and got.dtype == expected.dtype, (
        f"{where}: got {got.dtype}{tuple(got.shape)}, expected {expected.dtype}{tuple(expected.shape)}"
    )
    torch.testing.assert_close(got, expected, msg=lambda m: f"{where}: {m}", **tolerance, equal_nan=True)


def bound_args(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Every argument in signature order, keywords placed and defaults applied (what ``bind`` takes)."""
    return tuple(kernel.normalize_args(*args, **kwargs))


def run_through_iree(kernel: helion.Kernel, module: ModuleType, output_type: str, where: str, *,
                     compile_gap: str | None = None, run_gap: str | None = None, **options: Any) -> None:
    """Compile an example bound to its ragged arguments with IREE (``compile_kernel(...,
    runtime="iree", **options)``), run it where its device is, and compare with Helion's
    reference mode. A known gap must fail as its pattern says: ``compile_gap`` in
    iree-compile, ``run_gap`` on IREE's runtime, a known numeric gap by differing."""
    args, kwargs = example_call(module, "ragged")
    bound = kernel.bind(bound_args(kernel, args, kwargs))
    if compile_gap is not None:
        with pytest.raises(ExecutionError, match="iree-compile") as refused:
            compile_kernel(bound, output_type=output_type, runtime="iree", **options)
        assert re.search(compile_gap, str(refused.value)), f"{where}: another error than the known gap"
        return
    compiled = compile_kernel(bound, output_type=output_type, runtime="iree", **options)
    if not device_available(compiled.device):
        return  # compiled for a GPU this machine lacks
    if run_gap is not None:
        with pytest.raises(ExecutionError, match=run_gap):
            compiled(*clone_args(args), **clone_kwargs(kwargs))
        return
    got = compiled(*clone_args(args), **clone_kwargs(kwargs))
    expected, _torch = run_reference_mode(module, "ragged")
    if (module.__name__.rsplit(".", 1)[-1], output_type) in KNOWN_NUMERIC_GAPS:
        with pytest.raises(AssertionError):
            assert_matches(got, expected, module.TOLERANCE, where)
        return
    assert_matches(got, expected, module.TOLERANCE, where)


def bind_example(module: ModuleType, shape: str = "divisible") -> Any:
    """``module.KERNEL`` bound to the example's arguments (Helion caches the bound kernel)."""
    args, kwargs = example_call(module, shape)
    return module.KERNEL.bind(bound_args(module.KERNEL, args, kwargs))


def run_reference_mode(module: ModuleType, shape: str = "divisible") -> tuple[Any, Any]:
    """``(kernel result in reference mode, torch reference)`` on fresh inputs of ``shape``.

    The torch reference sees its own copy of the inputs, so kernels that write into an
    argument are compared on what they return. Computed once per example and shape (the
    inputs are seeded, so the results are too); each caller gets its own copies, so a test
    that modifies them cannot change what the next one compares with.
    """
    return tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, _reference_mode_results(module, shape))


@functools.cache
def _reference_mode_results(module: ModuleType, shape: str) -> tuple[Any, Any]:
    register_cpu_matmul_dtype_overloads()
    args, kwargs = example_call(module, shape)
    expected = module.reference(*clone_args(args), **clone_kwargs(kwargs))
    result = ref_mode_kernel(module.KERNEL)(*args, **kwargs)
    return result, expected


# Ops whose regions run once per call or per tile (their f64 values are the host's scalars),
# as against the bodies of tensor ops, which compute per element.
_SCALAR_REGION_OPS = frozenset({"builtin.module", "func.func", "scf.for", "scf.if", "scf.while", "scf.execute_region"})


def f64_computations(text: str) -> list[str]:
    """The ops of a module that compute in f64 on tensors: an f64 tensor operand or result,
    or an f64 value inside a tensor op's body (a ``linalg.generic`` extending its elements).

    Scalar f64 values outside tensor ops are Python floats, as the kernel's own host code
    computes them (a ``float`` argument, ``1.0 / n``), and are not counted.
    """
    found: list[str] = []

    def f64(value_type: Any) -> bool:
        spelled = str(value_type)
        return spelled == "f64" or ("tensor" in spelled and "f64" in spelled)

    def walk(operation: Any, in_tensor_op: bool) -> None:
        types = [v.type for v in operation.results] + [v.type for v in operation.operands]
        tensors = [t for t in types if f64(t) and str(t) != "f64"]
        if tensors or (in_tensor_op and any(f64(t) for t in types)):
            found.append(operation.operation.get_asm(enable_debug_info=False).splitlines()[0][:200])
        inner = in_tensor_op or operation.operation.name not in _SCALAR_REGION_OPS
        for region in operation.regions:
            for block in region.blocks:
                for child in block.operations:
                    walk(child, inner)

    with mlir_session():
        walk(parse_module(text).operation, False)
    return found


def uses_float64(bound: Any, args: tuple[Any, ...]) -> bool:
    """Whether a kernel has float64 tensors: an argument, or a value its device code computes."""
    if any(isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args):
        return True
    return any(isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].dtype == torch.float64
               for graph in device_graphs(bound) for n in graph.graph.nodes)


def device_graphs(bound: Any) -> list[Any]:
    """Every device graph of a bound kernel that a converter meets.

    The bind-time graphs, plus, when the kernel's config asks for ``reduction_loops``, the
    graphs from ``build_codegen_graphs`` (where the rolled reduction loops are reachable).
    """
    device_ir = bound.host_function.device_ir
    graphs = list(device_ir.graphs)
    config = bound.kernel.configs[0] if bound.kernel.configs else None
    if config is not None and config.config.get("reduction_loops"):
        with bound.env, bound.host_function:
            graphs += device_ir.build_codegen_graphs(config)
    return graphs


def target_name(target: object) -> str:
    """A node target as the op census spells it: ``aten.add.Tensor``, ``memory_ops.load``, ..."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or type(target).__module__
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    module = module.removeprefix("helion.language.")
    return f"{module}.{name}"


def node_targets(bound: Any) -> set[str]:
    return {
        target_name(node.target)
        for graph in device_graphs(bound)
        for node in graph.graph.nodes
        if node.op == "call_function"
    }


def graph_kinds(bound: Any) -> set[str]:
    return {type(graph).__name__ for graph in device_graphs(bound)}


def _format_val(val: object) -> str:
    if isinstance(val, torch.Tensor):
        dtype = str(val.dtype).removeprefix("torch.")
        return f"{dtype}[{', '.join(str(s) for s in val.shape)}]"
    if isinstance(val, (list, tuple)):
        inner = ", ".join(_format_val(v) for v in val)
        return f"[{inner}]" if isinstance(val, list) else f"({inner})"
    return repr(val) if val is not None else "None"


def format_device_ir(bound: Any) -> str:
    """Readable dump: each graph's kind and kwargs, then every node's name, target, args, val."""
    device_ir = bound.host_function.device_ir
    lines = [
        f"root_ids={device_ir.root_ids} grid_block_ids={device_ir.grid_block_ids}",
        f"config={bound.kernel.configs[0] if bound.kernel.configs else None}",
        f"static_shapes={bound.kernel.settings.static_shapes}",
    ]
    bind_count = len(device_ir.graphs)
    for index, graph in enumerate(device_graphs(bound)):
        origin = "bind" if index < bind_count else "build_codegen_graphs"
        kwargs = {k: v for k, v in graph.kwargs().items() if k != "cute_grid_execution_plans"}
        lines.append("")
        lines.append(f"== graph {graph.graph_id} {type(graph).__name__} ({origin}) {kwargs}")
        for node in graph.graph.nodes:
            val = _format_val(node.meta.get("val"))
            args = f"args={node.args!r}"
            if node.kwargs:
                args += f" kwargs={node.kwargs!r}"
            lines.append(
                f"  {node.name}: {node.op} {target_name(node.target)} {args} val={val}"
            )
    return "\n".join(lines) + "\n"


def dump_device_ir(out_dir: str | Path, names: list[str] | None = None) -> list[Path]:
    """Write ``format_device_ir`` of each example, all shape kinds, to ``out_dir/<name>.txt``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or example_names():
        module = load_example_by_name(name)
        sections = []
        for shape in SHAPE_KINDS:
            args = bound_args(module.KERNEL, *example_call(module, shape))
            shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args]
            header = f"##### {name} shape={shape} args={shapes}"
            sections.append(f"{header}\n{format_device_ir(module.KERNEL.bind(args))}")
        path = out_dir / f"{name}.txt"
        path.write_text("\n".join(sections))
        written.append(path)
    return written


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: python tests/examples_util.py OUT_DIR [NAME ...]")
    for written in dump_device_ir(sys.argv[1], sys.argv[2:] or None):
        print(written)
