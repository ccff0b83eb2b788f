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
import inspect
import logging
import textwrap
import time
from typing import Any

from .errors import HelionMLIRError
from .front_end_lock import FRONT_END_LOCK
from .inliner.builder import MLIRBuilder
from .inliner.lexer import strip_locations
from .lowering.kernel_config import resolve_config
from .lowering.kernel_model import KernelModel
from .lowering.kernel_parts import ArgKind, RootLoop, TensorBound
from .lowering.kernel_state import KernelState
from .lowering.values import Scalar, Tensor, Value
from .lowering.visitor import IRVisitor
from .mlir_context import file_location, source_location_body
from .mlir_types import element_type
from .output_type import OutputType
from .verify import verify_module_text

__all__ = ["bind_kernel", "emit_module", "emit_unverified", "generate_mlir", "kernel_model"]

log = logging.getLogger(__name__)


def bind_kernel(kernel: Any, args: tuple[Any, ...] | None = None) -> Any:
    """A bound kernel from either a bound kernel or a ``helion.Kernel`` plus example args.

    Binds under the front-end lock: Helion's bind is not safe in two threads at once
    (:mod:`helion_mlir.front_end_lock`)."""
    if hasattr(kernel, "host_function") and hasattr(kernel, "env"):
        if args is not None:
            raise HelionMLIRError("pass example args only with an unbound helion.Kernel")
        return kernel
    if hasattr(kernel, "bind"):
        if args is None:
            raise HelionMLIRError("an unbound helion.Kernel needs example args: generate_mlir(kernel, args)")
        with FRONT_END_LOCK:
            return kernel.bind(tuple(args))
    raise HelionMLIRError(f"expected a helion.Kernel or a BoundKernel, got {type(kernel).__name__}")


def generate_mlir(
    bound_kernel: Any,
    args: tuple[Any, ...] | None = None,
    *,
    output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
    config: Any = None,
    debug_info: bool = False,
    checked: bool = False,
    launch_checks: bool = False,
) -> str:
    """Lower a Helion kernel to the text of one verified MLIR module.

    ``bound_kernel`` is what ``kernel.bind(args)`` returns (or a ``helion.Kernel`` with
    ``args``). ATen ops are lowered to ``output_type``; the config's block sizes give the
    static tile shapes (``config`` overrides the kernel's own config; it is normalized as
    Helion normalizes it, and one Helion refuses raises :class:`helion.exc.InvalidConfig`).

    Every op has the ``loc("file.py":line:col)`` of the kernel line it came from, and the
    module is verified with them (diagnostics quote kernel lines). As MLIR's printer does
    by default, the returned text leaves them out; ``debug_info=True`` keeps them (MLIR's
    ``--mlir-print-debuginfo``).

    An access at a position that may lie outside its tensor reads 0 there and writes
    nothing (docs/abi.md, "Indices out of range"). ``checked=True`` adds a ``cf.assert``
    before every such access (checked mode compiles this form); ``launch_checks=True``
    leaves out the guards of positions that depend on host values alone and records the
    relations a caller must check before calling instead (the kernel model's
    ``launch_checks``, filled by :func:`emit_module`), as ``compile_kernel`` does.
    """
    kind = OutputType.parse(output_type)
    return emit_module(kernel_model(bound_kernel, args, config), kind, debug_info=debug_info, checked=checked,
                       launch_checks=launch_checks)


def kernel_model(kernel: Any, args: tuple[Any, ...] | None = None, config: Any = None) -> KernelModel:
    """The model of a kernel (bound, or a ``helion.Kernel`` with ``args``) under ``config``,
    resolved once (:func:`~helion_mlir.lowering.kernel_config.resolve_config`)."""
    with FRONT_END_LOCK:  # the bound kernel's fake tensors and compile environment are shared
        bound = bind_kernel(kernel, args)
        return KernelModel(bound, resolve_config(bound, config))


def emit_module(model: KernelModel, output_type: OutputType, *, debug_info: bool = False, checked: bool = False,
                launch_checks: bool = False) -> str:
    """The verified module of ``model`` (see :func:`generate_mlir`)."""
    started = time.perf_counter()
    text = emit_unverified(model, output_type, checked=checked, launch_checks=launch_checks)
    verify_module_text(text, what=f"module emitted for kernel '{model.name}'")
    log.info("emitted kernel %s (%s) in %.1f ms", model.name, output_type.value,
             (time.perf_counter() - started) * 1e3)
    return text if debug_info else strip_locations(text)


def emit_unverified(model: KernelModel, output_type: OutputType, *, checked: bool = False,
                    launch_checks: bool = False) -> str:
    """The emission step of :func:`emit_module` without verification (for batch reports,
    which tell emission failures from verification failures). Never return its text to users.
    With ``launch_checks``, adds the relations this emission assumes to ``model.launch_checks``."""
    with FRONT_END_LOCK:  # the bound kernel's fake tensors and compile environment are shared
        builder = MLIRBuilder()
        visitor = IRVisitor(model, builder, output_type, checked=checked, launch_checks=launch_checks)
        with model.helion_env():
            try:
                _emit_function(visitor)
            except HelionMLIRError:
                visitor.deferred.check()  # an earlier ATen node's failure comes first
                raise
            visitor.deferred.flush()
    return builder.render()


def _emit_function(visitor: IRVisitor) -> None:
    """The kernel's ``func.func``: arguments bound at entry, then each root loop nest in
    order, then the final values of the written tensors returned."""
    model, emit, state = visitor.model, visitor.emit, visitor.state
    arg_decls = []
    arguments: dict[str, Value] = {}
    for arg in model.args:
        visitor.builder.reserve(arg.ssa)
        arg_decls.append(f"{arg.ssa}: {arg.mlir_type}")
        if arg.kind is ArgKind.TENSOR:
            arguments[arg.name] = Tensor(arg.ssa, arg.shape, arg.dtype)
            emit.arguments.add(arg.ssa)
        else:
            arguments[arg.name] = Scalar(arg.ssa, arg.mlir_type)
    result_types = [model.arg(name).mlir_type for name in model.results]
    emit.location = _kernel_location(model)
    signature = f"func.func @{model.name}({', '.join(arg_decls)}) -> ({', '.join(result_types)})"
    with emit.region(signature + " {"):
        state.bind_arguments(arguments)
        for root in model.root_loops:
            _emit_root_loops(visitor, root)
        results = [state.host_tensor(name) for name in model.results]
        emit.op(f"return {', '.join(r.ssa for r in results)} : {', '.join(result_types)}" if results else "return")


def _emit_root_loops(visitor: IRVisitor, root: RootLoop) -> None:
    """One top-level tile loop nest, carrying the host tensors its graph writes, at the
    location of its ``for`` statement."""
    state, emit = visitor.state, visitor.emit
    function_location = emit.location
    emit.location = source_location_body(root.location) or function_location
    try:
        written = state.carried(root.graph_id)
        begins = [_loop_bound(state, d.begin) for d in root.dims]
        ends = [_loop_bound(state, d.end) for d in root.dims]

        def body(current: list[Value]) -> list[Value]:
            written.bind(current)
            visitor.run_graph(root.graph_id)
            return written.current()

        steps = [None if d.step is None else state.eval_symbolic(d.step) for d in root.dims]
        ranges = [None if isinstance(d.begin, TensorBound) or isinstance(d.end, TensorBound) else (d.begin, d.end)
                  for d in root.dims]
        written.bind(state.tile_loops([d.block_id for d in root.dims], begins, ends, steps,
                                      written.current(), body, ranges))
    finally:
        emit.location = function_location


def _loop_bound(state: KernelState, bound: Any) -> Any:
    """A loop bound as an int or ``index`` Scalar; a tensor's value is read from its argument."""
    if not isinstance(bound, TensorBound):
        return state.eval_symbolic(bound)
    emit, tensor = state.emit, state.host_tensor(bound.name)
    value = emit.assign("bound", f"tensor.extract {tensor.ssa}[] : {tensor.type}")
    return emit.index(Scalar(value, element_type(tensor.dtype)))


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
    return file_location(code.co_filename, line, 1)
