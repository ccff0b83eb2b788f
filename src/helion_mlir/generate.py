"""``generate_mlir``: one Helion kernel to one verified MLIR module.

The emitted module holds one public ``func.func`` named after the kernel, in
destination-passing style with tensor value semantics (docs/abi.md): arguments are the
kernel's tensors, its scalars, then the other host tensors the device code uses; the
results are the final values of every tensor the device code writes. Each top-level
tile loop becomes an ``scf.for`` nest over tiles (phases in order), and each device-IR
node is lowered by its registered rule.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import logging
import textwrap
import time
from typing import Any

import sympy
import torch

from .errors import HelionMLIRError
from .importer.node_importer import TorchMLIRNodeImporter
from .inliner.builder import MLIRBuilder
from .inliner.lexer import strip_locations
from .lowering import rules  # noqa: F401  (registers every lowering rule, once)
from .lowering.kernel_model import KernelModel
from .lowering.loops import emit_tile_loops
from .lowering.values import Scalar, Tensor, Tile
from .lowering.visitor import IRVisitor, source_location_body
from .output_type import OutputType
from .verify import verify_module_text

__all__ = ["generate_mlir", "bind_kernel"]

log = logging.getLogger(__name__)


def bind_kernel(kernel: Any, args: tuple[Any, ...] | None = None) -> Any:
    """A bound kernel from either a bound kernel or a ``helion.Kernel`` plus example args."""
    if hasattr(kernel, "host_function") and hasattr(kernel, "env"):
        if args is not None:
            raise HelionMLIRError("pass example args only with an unbound helion.Kernel")
        return kernel
    if hasattr(kernel, "bind"):
        if args is None:
            raise HelionMLIRError("an unbound helion.Kernel needs example args: generate_mlir(kernel, args)")
        return kernel.bind(tuple(args))
    raise HelionMLIRError(f"expected a helion.Kernel or a BoundKernel, got {type(kernel).__name__}")


def generate_mlir(
    bound_kernel: Any,
    args: tuple[Any, ...] | None = None,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    config: Any = None,
    debug_info: bool = False,
) -> str:
    """Lower a Helion kernel to the text of one verified MLIR module.

    ``bound_kernel`` is what ``kernel.bind(args)`` returns (or a ``helion.Kernel`` with
    ``args``). ATen ops are lowered to ``output_type``; the config's block sizes give the
    static tile shapes (``config`` overrides the kernel's own config).

    Every op has the ``loc("file.py":line:col)`` of the kernel line it came from, and the
    module is verified with them (diagnostics quote kernel lines). As MLIR's printer does
    by default, the returned text leaves them out; ``debug_info=True`` keeps them (MLIR's
    ``--mlir-print-debuginfo``).
    """
    started = time.perf_counter()
    model, text = emit_unverified(bound_kernel, args, output_type=output_type, config=config)
    verify_module_text(text, what=f"module emitted for kernel '{model.name}'")
    log.info("emitted kernel %s (%s) in %.1f ms", model.name, OutputType.parse(output_type).value,
             (time.perf_counter() - started) * 1e3)
    return text if debug_info else strip_locations(text)


def emit_unverified(
    bound_kernel: Any,
    args: tuple[Any, ...] | None = None,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    config: Any = None,
) -> tuple[KernelModel, str]:
    """The emission step of :func:`generate_mlir` without verification (for batch reports,
    which tell emission failures from verification failures). Never return its text to users."""
    output_type = OutputType.parse(output_type)
    bound = bind_kernel(bound_kernel, args)
    model = KernelModel(bound, config)
    builder = MLIRBuilder()
    visitor = IRVisitor(model, builder, TorchMLIRNodeImporter(output_type))
    with model.helion_env():
        try:
            _emit_function(visitor)
        except HelionMLIRError:
            visitor.deferred.check()  # an earlier ATen node's failure comes first
            raise
        visitor.deferred.flush()
    return model, builder.render()


def _emit_function(v: IRVisitor) -> None:
    model, ops = v.model, v.ops
    arg_decls = []
    v.function_arg_values = {}
    for arg in model.args:
        ssa = arg.ssa
        v.builder.reserve(ssa)
        arg_decls.append(f"{ssa}: {arg.mlir_type}")
        if arg.kind == "tensor":
            value = Tensor(ssa, arg.shape, arg.dtype)
            v.state[arg.name] = value
            v.function_arg_values[arg.name] = value
            ops.arguments.add(ssa)
        else:
            v.function_arg_values[arg.name] = Scalar(ssa, arg.mlir_type)
    result_types = [model.arg(name).mlir_type for name in model.results]
    ops.location = _kernel_location(model)
    signature = f"func.func @{model.name}({', '.join(arg_decls)}) -> ({', '.join(result_types)})"
    with ops.region(signature + " {"):
        _bind_function_symbols(v)
        v.bind_runtime_block_sizes()
        for block_id, numel in model.persistent_reductions.items():
            extent = v.eval_symbolic(numel)
            extent = extent if isinstance(extent, int) else v.ops.index(extent)
            v.tiles[block_id] = Tile(block_id, 0, extent if isinstance(extent, int) else None, extent, 0, extent)
        for root in model.root_loops:
            _emit_root(v, root)
        results = [v.state[name] for name in model.results]
        ops.op(f"return {', '.join(r.ssa for r in results)} : {', '.join(result_types)}" if results else "return")


def _bind_function_symbols(v: IRVisitor) -> None:
    """Give every size and scalar symbol of the signature its value at function entry, so
    that uses inside loops refer to values that dominate them.

    Every dynamic size of a tensor argument is read here, once: later versions of the
    tensor (loop-carried, stored into) carry these sizes, and nothing reads the size of a
    loop-carried value (which compilers such as IREE cannot resolve)."""
    for arg in v.model.args:
        if arg.kind == "tensor":
            value = v.function_arg_values[arg.name]
            sizes = tuple(s if s is not None else v.ops.dim(value, axis) for axis, s in enumerate(value.shape))
            value = dataclasses.replace(value, sizes=sizes)
            v.function_arg_values[arg.name] = v.state[arg.name] = value
    for arg in v.model.args:
        value = v.function_arg_values[arg.name]
        if arg.kind == "scalar":
            if isinstance(arg.fake, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                v.symbols.setdefault(arg.fake.node.expr, value)  # also ``Eq(u0, 1)`` of a bool
            elif isinstance(arg.fake, sympy.Basic):  # a per-call host value (its symbol or bool expression)
                v.symbols.setdefault(arg.fake, value)
            continue
        for axis, size in enumerate(arg.fake.shape):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                if size.node.expr not in v.symbols:
                    v.symbols[size.node.expr] = v.ops.dim(value, axis)


def _emit_root(v: IRVisitor, root: Any) -> None:
    function_location = v.ops.location
    v.ops.location = source_location_body(root.location) or function_location
    try:
        _emit_root_loops(v, root)
    finally:
        v.ops.location = function_location


def _emit_root_loops(v: IRVisitor, root: Any) -> None:
    written = v.model.writes.get(root.graph_id, [])
    begins = [v.eval_symbolic(d.begin) for d in root.dims]
    ends = [v.eval_symbolic(d.end) for d in root.dims]

    def body(current: list[Any]) -> list[Any]:
        for name, value in zip(written, current):
            v.state[name] = value
        v.run_graph(root.graph_id)
        return [v.state[name] for name in written]

    finals = emit_tile_loops(v, [d.block_id for d in root.dims], begins, ends, [None] * len(root.dims),
                             [v.state[name] for name in written], body)
    for name, value in zip(written, finals):
        v.state[name] = value


def _kernel_location(model: KernelModel) -> str | None:
    """The ``def`` line of the kernel (not its decorator)."""
    fn = getattr(model.bound.kernel, "fn", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    line = code.co_firstlineno
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        line += tree.body[0].lineno - 1
    except (OSError, SyntaxError, IndexError):
        pass
    filename = code.co_filename.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{filename}":{line}:1'
