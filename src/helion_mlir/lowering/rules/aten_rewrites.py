"""ATen and prims ops whose traced form torch-mlir's backends lower wrongly or not at all.

Each is rewritten here, before anything reaches torch-mlir, into forms every output type
takes; what torch-mlir does lower keeps going through it (``lower_aten_op``).

- ``prims.iota`` (``hl.arange``): torch-mlir's tosa backend cannot build a tensor of a
  symbolic length. It is a ``linalg.generic`` over ``linalg.index``, as ``tile.index`` is,
  for every output type.
- ``aten.scalar_tensor`` of a runtime scalar: tosa legalizes only constant scalars
  (``torch.prim.NumToTensor``), and in raw output the ``torch_c.from_f64`` of an f64
  argument crashes IREE's input conversion (which demotes the argument to f32 first). The
  scalar is converted with ``arith`` and put in a 0-d tensor, for every output type.
- ``aten.mean.dim``: with ``dtype=``, torch-mlir's linalg and stablehlo backends fail, and
  its tosa backend divides by a garbage count when a reduced dimension is dynamic; over
  a dynamic dimension (``static_shapes=False``, or a ragged tile clipped before the
  reduction) its tosa backend fails. The input is cast to ``dtype`` first (what the
  argument means), and a mean over a dynamic dimension is the sum divided by the element
  count read at run time: torch's own CPU computation, which sums and divides
  half-precision inputs in float32.
- ``aten.var`` / ``aten.std`` and their ``_mean`` forms: torch-mlir's decomposition computes
  them in f64 (45 f64 ops in a layer norm's module, which IREE's tosa input then refuses:
  f64 is in no TOSA profile). They are the mean, then the mean square deviation from it,
  computed in the input's precision (float32 for half-precision inputs, as torch's CPU
  kernels do), over the in-bounds lanes and a count read at run time like ``mean.dim``.
- ``aten.neg`` of an integer tensor: torch-mlir's linalg backend (which raw output also
  runs) negates through f32 (``sitofp``, ``negf``, ``fptosi``), wrong for every magnitude
  above 2^24 and for the minimum, and its tosa backend fails on int64. It is ``0 - x`` in
  the integer type (``arith.subi``, wrapping as torch does), for every output type; Helion's
  Philox generator (``hl.rand``, ``hl.randint``, ``torch.rand_like``) negates 32-bit
  values.
- ``aten.empty`` and its ``new_``/``_like``/``_strided`` forms: torch-mlir builds a
  ``tensor.empty``, whose elements are undefined when read (garbage on CPU, NaN among it).
  Helion's device code has Inductor's value for them, zeros (Inductor builds ``empty`` as a
  fill of 0), and kernels rely on it (``torch.empty(n) * 0``): they are a fill of 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import element_type
from ...output_type import OutputType
from ..aten_calls import (
    bind_to_schema,
    import_aten_call,
    input_values,
    lower_aten_op,
    traced_call,
    twin_node,
    zero_dim_tensor,
)
from ..context import RuleContext
from ..emitter import Emitter
from ..registry import register_lowering
from ..values import Scalar, Tensor

aten, prims = torch.ops.aten, torch.ops.prims
_HALF_TYPES = (torch.float16, torch.bfloat16)


@register_lowering(prims.iota.default)
def lower_iota(ctx: RuleContext, node: fx.Node) -> Tensor:
    """``prims.iota`` (``hl.arange``): a ``linalg.generic`` whose element ``i`` is
    ``start + i * step`` in the dtype asked for, of a static or run-time length."""
    args, kwargs = traced_call(node)
    length, start, step = (ctx.value(x) for x in (args[0], kwargs["start"], kwargs["step"]))
    emit = ctx.emit
    for what, x in (("length", length), ("start", start), ("step", step)):
        if not isinstance(x, (int, Scalar)) or isinstance(x, bool):
            raise HelionMLIRError(f"iota {what} {x!r} is not an integer")
    dtype = kwargs["dtype"]
    first, stride = emit.index(start), emit.index(step)

    def body(_args: list[str], index_of: Callable[[int], str]) -> str:
        offset = emit.binary("arith.muli", Scalar(index_of(0), "index"), stride)
        return emit.convert(emit.binary("arith.addi", first, offset), element_type(dtype)).ssa

    if isinstance(length, int):
        return emit.elementwise([], (length,), dtype, body, hint="iota")
    return emit.elementwise([], (None,), dtype, body, hint="iota", dynamic_sizes=[emit.index(length)])


@register_lowering(aten.scalar_tensor.default)
def lower_scalar_tensor(ctx: RuleContext, node: fx.Node) -> Any:
    args, _kwargs = traced_call(node)
    value = ctx.value(args[0])
    if not isinstance(value, Scalar):
        return lower_aten_op(ctx, node)
    dtype = node.meta["val"].dtype
    return zero_dim_tensor(ctx.emit, ctx.emit.convert(value, element_type(dtype)), [dtype])


@register_lowering(aten.neg.default)
def lower_neg(ctx: RuleContext, node: fx.Node) -> Any:
    """``aten.neg`` of an integer tensor: ``0 - x`` with ``arith.subi`` in the integer type
    (wrapping as torch does); floats, complex and bools go through torch-mlir."""
    args, _kwargs = traced_call(node)
    x = ctx.value(args[0])
    if not isinstance(x, Tensor) or x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        return lower_aten_op(ctx, node)
    emit = ctx.emit
    elt = element_type(x.dtype)
    zero = emit.const(0, elt)

    def body(block_args: list[str], _index: Callable[[int], str]) -> str:
        return emit.assign("neg", f"arith.subi {zero.ssa}, {block_args[0]} : {elt}")

    return emit.elementwise([x], x.shape, x.dtype, body, hint="neg")


@register_lowering(aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
                   aten.new_empty.default, aten.new_empty_strided.default)
def lower_empty(ctx: RuleContext, node: fx.Node) -> Tensor:
    meta = node.meta["val"]
    shape = ctx.static_shape(meta)
    dynamic = [ctx.emit.index(ctx.eval_symbolic(size)) for size, fixed in zip(meta.shape, shape) if fixed is None]
    return ctx.emit.fill(shape, meta.dtype, 0, dynamic)


@register_lowering(aten.mean.dim)
def lower_mean_dim(ctx: RuleContext, node: fx.Node) -> Any:
    """``aten.mean.dim``: the input cast to ``dtype=`` first, then torch-mlir's mean over
    static dimensions, else the sum (in f32 for half-precision inputs) divided by the
    element count read at run time, cast back; raw output without ``dtype=`` stays the
    op as traced."""
    args, kwargs = traced_call(node)
    bound = bind_to_schema(aten.mean.dim, args, kwargs)
    dtype, dims, keepdim = bound.get("dtype"), bound.get("dim"), bool(bound.get("keepdim", False))
    raw = ctx.output_type is OutputType.RAW
    if dtype is None and raw:
        return lower_aten_op(ctx, node)
    dims = [dims] if isinstance(dims, int) else dims
    with twin_node(node, aten.mean.dim, (bound["self"], dims, keepdim), {}) as plain:
        x = input_values(ctx, plain)[0]  # only the in-bounds lanes of a ragged tile
    if not isinstance(x, Tensor):
        raise HelionMLIRError(f"mean of {x!r}, which is not a tensor")
    emit = ctx.emit
    if dtype is not None:
        x = emit.cast(x, dtype)
    reduced = sorted({d % max(x.rank, 1) for d in dims}) if dims else list(range(x.rank))
    if raw or all(x.shape[d] is not None for d in reduced):
        return import_aten_call(ctx, node, aten.mean.dim, (x, dims, keepdim))
    accumulate = torch.float32 if x.dtype in _HALF_TYPES else x.dtype
    total = import_aten_call(ctx, node, aten.sum.dim_IntList, (x, dims, keepdim), {"dtype": accumulate})
    count = zero_dim_tensor(emit, _element_count(emit, x, reduced, element_type(accumulate)), [accumulate])
    return emit.cast(import_aten_call(ctx, node, aten.div.Tensor, (total, count)), x.dtype)


def _element_count(emit: Emitter, x: Tensor, dims: list[int], elt: str) -> Scalar:
    """The number of elements of ``x`` along ``dims`` (read at run time), as an ``elt`` scalar."""
    count: Scalar | int = math.prod(x.shape[d] for d in dims if x.shape[d] is not None)
    for d in dims:
        if x.shape[d] is None:
            size = emit.index(emit.dim(x, d))
            count = size if count == 1 else emit.binary("arith.muli", emit.index(count), size)
    return emit.convert(count, elt)


# var, var_mean, std, std_mean: (take the square root, also return the mean).
_VARIANCES = {
    aten.var.correction: (False, False),
    aten.var_mean.correction: (False, True),
    aten.std.correction: (True, False),
    aten.std_mean.correction: (True, True),
}


@register_lowering(*_VARIANCES)
def lower_variance(ctx: RuleContext, node: fx.Node) -> Any:
    """``var``/``std`` (``_mean`` too) as two passes in the input's precision:
    ``sum((x - mean)^2) / max(n - correction, 0)``, torch's definition."""
    args, kwargs = traced_call(node)
    bound = bind_to_schema(node.target, args, kwargs)
    correction = 1 if bound.get("correction") is None else bound["correction"]
    if ctx.output_type is OutputType.RAW or not isinstance(correction, (int, float)):
        return lower_aten_op(ctx, node)
    dims, keepdim = bound.get("dim"), bool(bound.get("keepdim", False))
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    with twin_node(node, node.target, (bound["self"], dims), {"correction": correction, "keepdim": keepdim}) as plain:
        x = input_values(ctx, plain)[0]  # only the in-bounds lanes of a ragged tile
    if not isinstance(x, Tensor) or not x.dtype.is_floating_point:
        raise HelionMLIRError(f"variance of {x!r}, which is not a floating-point tensor")
    emit = ctx.emit
    x = emit.cast(x, torch.float32 if x.dtype in _HALF_TYPES else x.dtype)
    reduced = sorted({d % max(x.rank, 1) for d in dims}) if dims else list(range(x.rank))
    elt = element_type(x.dtype)
    count = _element_count(emit, x, reduced, elt)
    total = import_aten_call(ctx, node, aten.sum.dim_IntList, (x, reduced, True))
    mean = import_aten_call(ctx, node, aten.div.Tensor, (total, zero_dim_tensor(emit, count, [x.dtype])))
    deviation = import_aten_call(ctx, node, aten.sub.Tensor, (x, mean))
    squares = import_aten_call(ctx, node, aten.mul.Tensor, (deviation, deviation))
    sizes = [x.shape[d] for d in reduced]
    if None in sizes:
        divisor = emit.binary("arith.maximumf", emit.binary("arith.subf", count, emit.const(float(correction), elt)),
                              emit.const(0.0, elt))
    else:
        divisor = emit.const(max(math.prod(sizes) - correction, 0), elt)
    spread = import_aten_call(ctx, node, aten.div.Tensor, (
        import_aten_call(ctx, node, aten.sum.dim_IntList, (squares, reduced, keepdim)),
        zero_dim_tensor(emit, divisor, [x.dtype])))
    take_root, with_mean = _VARIANCES[node.target]
    if take_root:
        spread = import_aten_call(ctx, node, aten.sqrt.default, (spread,))
    results = node.meta["val"] if with_mean else (node.meta["val"],)
    spread = emit.cast(spread, results[0].dtype)
    if not with_mean:
        return spread
    if not keepdim:
        mean = import_aten_call(ctx, node, aten.squeeze.dims, (mean, reduced))
    return spread, emit.cast(mean, results[1].dtype)
