"""Maxima, minima and clamps of floating-point values, with torch's NaN semantics in every output type.

torch lets NaN win every comparison these ops make: ``clamp(nan, -1, 1)``, ``maximum(nan, 0)``,
``amax`` of a row holding a NaN are NaN, and ``argmax`` / ``max.dim`` give the index of the
first NaN. torch-mlir's lowerings do not agree with torch, nor with one another: its linalg
backend (and so raw output, which runs through it) lowers ``maximum`` and ``clamp_max`` to
``cmpf ogt`` + ``select`` and ``clamp_min`` to ``cmpf ult`` + ``select`` (NaN lost whichever
operand holds it), and takes the index of an arg reduction with a strict ``cmpf ogt``, which
never picks a NaN; its stablehlo backend's arg reductions skip NaN too; tosa's ``clamp``
turns NaN into the lower bound and tosa's ``reduce_max`` starts from the largest finite
value, so a row of -inf gives -3.4e38. These ops are therefore emitted here, for every
output type, as ``linalg.generic``s of ``arith`` ops whose semantics are torch's:

- ``clamp_min(x, lo)`` is ``lo if x < lo or lo is NaN else x`` (so NaN stays NaN, and
  ``relu(-0.0)`` is ``-0.0``, as torch computes it), ``clamp_max`` the same with ``>``;
  ``clamp`` is both in turn, ``relu`` is ``clamp_min(x, 0)``;
- ``maximum`` / ``minimum`` are ``arith.maximumf`` / ``minimumf`` (NaN if either is NaN);
- ``amax`` / ``amin`` / ``max`` / ``min`` reduce with ``arith.maximumf`` / ``minimumf``
  from -inf / +inf; the arg reductions (``argmax``, ``argmin``, ``max.dim``, ``min.dim``)
  then take the smallest position whose lane equals that extreme or is NaN: the first NaN,
  else the first extreme, as torch. (The values of ``max.dim`` are the extreme itself, so
  a row whose largest values are ``-0.0`` and ``+0.0`` gives ``+0.0``, where torch gives
  the first of them.)

Integer ops have no NaN and keep going through torch-mlir (:func:`lower_aten_op`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx

from ...errors import HelionMLIRError
from ...mlir_types import element_type
from ..aten_calls import (
    aligned_to_result,
    bind_to_schema,
    input_values,
    lower_aten_op,
    traced_call,
    twin_node,
)
from ..context import RuleContext
from ..emitter import Emitter, broadcast_shapes
from ..registry import register_lowering
from ..unit_dims import expand_dims
from ..values import Scalar, Tensor

aten = torch.ops.aten
_COMPUTED = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_NO_INDEX = torch.iinfo(torch.int64).max

# -- elementwise --------------------------------------------------------------------------------
# Per target: the schema names of its lower and upper bound (None: no such bound).
_CLAMP_BOUNDS: dict[Any, tuple[str | None, str | None]] = {
    aten.clamp_min.default: ("min", None),
    aten.clamp_min.Tensor: ("min", None),
    aten.clamp_max.default: (None, "max"),
    aten.clamp_max.Tensor: (None, "max"),
    aten.clamp.default: ("min", "max"),
    aten.clamp.Tensor: ("min", "max"),
}
_PAIRWISE = {aten.maximum.default: "arith.maximumf", aten.minimum.default: "arith.minimumf"}


def _computes_here(node: fx.Node) -> bool:
    meta = node.meta.get("val")
    return isinstance(meta, torch.Tensor) and meta.dtype in _COMPUTED


@register_lowering(*_CLAMP_BOUNDS, aten.relu.default, *_PAIRWISE)
def lower_float_clamp(ctx: RuleContext, node: fx.Node) -> Any:
    """``clamp*``, ``relu``, ``maximum``, ``minimum`` of floats: one ``linalg.generic``
    computing torch's formula in the result dtype (see the module doc)."""
    if not _computes_here(node):
        return lower_aten_op(ctx, node)
    args, kwargs = traced_call(node)
    bound = bind_to_schema(node.target, args, kwargs)
    meta = node.meta["val"]
    dtype, elt, emit = meta.dtype, element_type(meta.dtype), ctx.emit
    if node.target in _PAIRWISE:
        operands = [bound["self"], bound["other"]]
    elif node.target is aten.relu.default:
        operands = [bound["self"], 0.0]
    else:
        lower, upper = _CLAMP_BOUNDS[node.target]
        operands = [bound["self"], bound.get(lower) if lower else None, bound.get(upper) if upper else None]
    values = aligned_to_result(ctx, node, operands, [ctx.value(a) for a in operands])
    tensors = [emit.cast(v, dtype) for v in values if isinstance(v, Tensor)]
    scalars = {i: emit.convert(v, elt) for i, v in enumerate(values) if isinstance(v, Scalar)}
    # A bound that is a number known now is checked for NaN now.
    may_be_nan = [not isinstance(v, (int, float)) or math.isnan(v) for v in values]

    def body(args: list[str], _index: Callable[[int], str]) -> str:
        lanes = iter(args)
        operand = [next(lanes) if isinstance(v, Tensor) else scalars[i].ssa if i in scalars
                   else None if v is None else emit.const(float(v), elt).ssa for i, v in enumerate(values)]
        if node.target in _PAIRWISE:
            return emit.assign("ext", f"{_PAIRWISE[node.target]} {operand[0]}, {operand[1]} : {elt}")
        result = operand[0]
        for bound_value, beyond, nan_bound in zip(operand[1:], ("olt", "ogt"), may_be_nan[1:]):
            if bound_value is not None:
                result = _clamped(emit, result, bound_value, beyond, nan_bound, elt)
        return result

    return emit.elementwise(tensors, broadcast_shapes(*(t.shape for t in tensors)), dtype, body, hint="clamp")


def _clamped(emit: Emitter, value: str, bound: str, beyond: str, bound_may_be_nan: bool, elt: str) -> str:
    """``bound`` where ``value`` is beyond it (``cmpf beyond``) or the bound is NaN, else ``value``."""
    past = emit.assign("past", f"arith.cmpf {beyond}, {value}, {bound} : {elt}")
    if bound_may_be_nan:
        nan_bound = emit.assign("past", f"arith.cmpf uno, {bound}, {bound} : {elt}")
        past = emit.assign("past", f"arith.ori {past}, {nan_bound} : i1")
    return emit.assign("clamp", f"arith.select {past}, {bound}, {value} : {elt}")


# -- reductions ---------------------------------------------------------------------------------
# Per target: (largest, gives values, gives indices).
_REDUCTIONS: dict[Any, tuple[bool, bool, bool]] = {
    aten.amax.default: (True, True, False),
    aten.amin.default: (False, True, False),
    aten.max.default: (True, True, False),
    aten.min.default: (False, True, False),
    aten.argmax.default: (True, False, True),
    aten.argmin.default: (False, False, True),
    aten.max.dim: (True, True, True),
    aten.min.dim: (False, True, True),
}


@register_lowering(*_REDUCTIONS)
def lower_float_extreme_reduction(ctx: RuleContext, node: fx.Node) -> Any:
    """``amax``/``amin``/``max``/``min``/``argmax``/``argmin``/``max.dim``/``min.dim`` of
    floats: one ``linalg.generic`` reducing the dims (see the module doc); a ragged tile's
    padding lanes along a reduced dim are left out."""
    args, kwargs = traced_call(node)
    bound = bind_to_schema(node.target, args, kwargs)
    source = bound["self"]
    meta = source.meta.get("val") if isinstance(source, fx.Node) else None
    if not isinstance(meta, torch.Tensor) or meta.dtype not in _COMPUTED:
        return lower_aten_op(ctx, node)
    with twin_node(node, node.target, args, kwargs) as twin:
        x = input_values(ctx, twin)[0]
    if not isinstance(x, Tensor):
        raise HelionMLIRError(f"reduction of {x!r}, which is not a tensor")
    dims = bound.get("dim")
    dims = [] if dims is None else [dims] if isinstance(dims, int) else list(dims)
    reduced = sorted({d % max(x.rank, 1) for d in dims}) if dims else list(range(x.rank))
    empty = [d for d in reduced if x.shape[d] == 0]
    if empty:
        raise HelionMLIRError(
            f"{node.target.overloadpacket.__name__} over dimension {empty[0]}, which has no elements: "
            "torch raises an IndexError there (an empty reduction has no extreme)"
        )
    largest, gives_values, gives_indices = _REDUCTIONS[node.target]
    values, indices = _reduce_extremes(ctx.emit, x, reduced, largest, gives_indices)
    if bound.get("keepdim", False):
        values, indices = (expand_dims(ctx.emit, v, reduced) if v is not None else None for v in (values, indices))
    if gives_values and gives_indices:
        return values, indices
    return values if gives_values else indices


def _reduce_extremes(emit: Emitter, x: Tensor, reduced: Sequence[int], largest: bool,
                     with_index: bool) -> tuple[Tensor, Tensor | None]:
    """The extreme of ``x`` over ``reduced`` and, ``with_index``, the first position holding
    it (row-major within the reduced dims; a NaN's when the extreme is NaN).

    Two reductions that each vectorize, rather than one carrying (value, index) pairs: the
    extreme (``arith.maximumf`` / ``minimumf``, NaN if any lane is NaN), then the smallest
    position whose lane equals it or is NaN (a lane is NaN only where the extreme is).
    """
    kept = [d for d in range(x.rank) if d not in reduced]
    shape = tuple(x.shape[d] for d in kept)
    dynamic = [size for size in (emit.dim(x, d) for d in kept) if isinstance(size, Scalar)]
    elt = element_type(x.dtype)
    combine = "arith.maximumf" if largest else "arith.minimumf"
    start = emit.fill(shape, x.dtype, -math.inf if largest else math.inf, dynamic)

    def extreme_step(args: list[str]) -> str:
        return emit.assign("ext", f"{combine} {args[0]}, {args[1]} : {elt}")

    extreme = _reduction(emit, [x], start, reduced, extreme_step, hint="extreme")
    if not with_index:
        return extreme, None
    strides = _row_major_strides(emit, [emit.dim(x, d) for d in reduced])
    no_index = emit.fill(shape, torch.int64, _NO_INDEX, dynamic)

    def index_step(args: list[str]) -> str:
        lane, best, first = args
        position = _position(emit, reduced, strides)
        equal = emit.assign("hit", f"arith.cmpf oeq, {lane}, {best} : {elt}")
        nan = emit.assign("hit", f"arith.cmpf uno, {lane}, {lane} : {elt}")
        hit = emit.assign("hit", f"arith.ori {equal}, {nan} : i1")
        candidate = emit.assign("hit", f"arith.select {hit}, {position}, {emit.const(_NO_INDEX, 'i64').ssa} : i64")
        return emit.assign("first", f"arith.minsi {candidate}, {first} : i64")

    return extreme, _reduction(emit, [x, extreme], no_index, reduced, index_step, hint="index")


def _reduction(emit: Emitter, inputs: Sequence[Tensor], init: Tensor, reduced: Sequence[int],
               step: Callable[[list[str]], str], *, hint: str) -> Tensor:
    """A ``linalg.generic`` reducing ``reduced`` of ``inputs[0]`` into ``init``; the other
    inputs have the result's shape (broadcast along the reduced dims). ``step(block
    arguments)`` emits the combination of the lanes with the accumulator (the last argument)."""
    rank = inputs[0].rank
    loops = [f"d{i}" for i in range(rank)]
    kept = ", ".join(loops[d] for d in range(rank) if d not in reduced)
    full = f"affine_map<({', '.join(loops)}) -> ({', '.join(loops)})>"
    partial = f"affine_map<({', '.join(loops)}) -> ({kept})>"
    maps = ", ".join([full] + [partial] * len(inputs))
    iterators = ", ".join('"reduction"' if d in reduced else '"parallel"' for d in range(rank))
    result = Tensor(emit.fresh(hint), init.shape, init.dtype)
    header = (
        f"{result.ssa} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iterators}]}} "
        f"ins({', '.join(t.ssa for t in inputs)} : {', '.join(t.type for t in inputs)}) "
        f"outs({init.ssa} : {init.type}) {{"
    )
    args = [emit.fresh("in") for _ in inputs] + [emit.fresh("acc")]
    with emit.region(header, f"}} -> {init.type}"):
        emit.block_header(", ".join(f"{a}: {element_type(t.dtype)}" for a, t in zip(args, [*inputs, init])))
        emit.op(f"linalg.yield {step(args)} : {element_type(init.dtype)}")
    return result


def _row_major_strides(emit: Emitter, sizes: Sequence[Scalar | int]) -> list[Scalar | int]:
    """Each dim's stride in a row-major layout of ``sizes`` (emitted before the reduction)."""
    strides: list[Scalar | int] = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        after, size = strides[d + 1], sizes[d + 1]
        if isinstance(after, int) and isinstance(size, int):
            strides[d] = after * size
        else:
            strides[d] = emit.binary("arith.muli", emit.index(after), emit.index(size))
    return strides


def _position(emit: Emitter, reduced: Sequence[int], strides: Sequence[Scalar | int]) -> str:
    """The lane's row-major position within the reduced dims, as an ``i64``."""
    position: Scalar | None = None
    for d, stride in zip(reduced, strides):
        term = Scalar(emit.assign("pos", f"linalg.index {d} : index"), "index")
        if stride != 1:
            term = emit.binary("arith.muli", term, emit.index(stride))
        position = term if position is None else emit.binary("arith.addi", position, term)
    assert position is not None
    return emit.convert(position, "i64").ssa
