"""Indices out of range: which positions an index is known to keep inside its tensor, the
guard that keeps every other position from touching memory, and the checks of checked mode.

Helion's Triton code masks a load or a store only by its tiles' bounds and ``extra_mask``:
a position computed from data (``x[idx]``), from arithmetic on a grid index or on
``tile.index``, a scalar argument or ``tile.end`` that lies outside the tensor reads or
writes outside it, which Helion leaves undefined. Here (docs/abi.md, "Indices out of
range") a read out of range yields 0 and a write or an atomic out of range does nothing,
in every pipeline: the position is compared with its dimension (one unsigned compare,
which also catches negatives) and the access is skipped or redirected to position 0 and
its result discarded. Positions the lowering can prove inside (a literal, a grid index or
``tile.begin`` of a loop over the dimension, a symbol whose range says so) are not
guarded, nor, when the module is emitted with launch checks, positions that depend on host
values alone: the relation they need is recorded for the launch to check
(:func:`assumed_inside`). In checked mode each guarded position is checked first
(``cf.assert``; a lane the masks turn off is not), so the call raises
``OutOfBoundsAccessError`` naming the kernel line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from helion._compiler import variable_origin as vo
from torch import fx
from torch.utils._sympy.functions import FloorDiv
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from ..errors import INDEX_CHECK_PREFIX, HelionMLIRError
from ..mlir_types import element_type
from .context import RuleContext
from .emitter import Emitter
from .host_values import HostValue
from .kernel_parts import LaunchCheck
from .values import Scalar, Tensor, Tile

__all__ = [
    "all_of", "any_lane", "assumed_inside", "canonical_sizes", "check_message", "guard_positions",
    "guarded_update", "guarded_value", "in_range", "nonempty", "scalar_inside", "tile_inside", "truthy", "window_inside",
]

# Symbols of a tile property whose value is the tile's offset (a grid index is its tile's begin).
_OFFSET_ORIGINS = (vo.GridOrigin, vo.TileBeginOrigin)


def tile_inside(emit: Emitter, tile: Tile, size: Scalar | int) -> bool:
    """Whether every position of ``tile``'s loop range is known to lie in ``[0, size)``."""
    return emit.known_at_most(0, tile.begin) and emit.known_at_most(tile.end, size)


def canonical_sizes(ctx: RuleContext, name: str, host: Tensor) -> tuple[Scalar | int, ...]:
    """The sizes of a host tensor's dimensions as the kernel's symbols resolve them, so that
    two tensors of one size symbol (``out = torch.empty_like(x)``) and a loop over it
    (``hl.tile(x.size(0))``) compare equal; for proofs only."""
    fake = next((a.fake for a in ctx.model.args if a.name == name), None)
    sizes: list[Scalar | int] = []
    for axis, size in enumerate(host.shape):
        if size is not None:
            sizes.append(size)
            continue
        symbolic = fake.shape[axis] if isinstance(fake, torch.Tensor) and fake.dim() == host.rank else None
        expr = symbolic.node.expr if isinstance(symbolic, torch.SymInt) else None
        value = _resolved(ctx, expr) if isinstance(expr, sympy.Symbol) else None
        if value is None and isinstance(expr, sympy.Expr):
            value = _folded(ctx, expr)  # the host code computed it from block sizes and constants
        sizes.append(value if value is not None else ctx.emit.dim(host, axis))
    return tuple(sizes)


def _resolved(ctx: RuleContext, symbol: sympy.Symbol) -> Scalar | int | None:
    """What a symbol stands for here, or None when the lowering cannot tell (no origin)."""
    try:
        return ctx.eval_symbolic(symbol)
    except HelionMLIRError:
        return None


def _folded(ctx: RuleContext, expr: sympy.Expr) -> int | None:
    """``expr`` as an int when every symbol in it is one here (a block size, a constant)."""
    values = {}
    for symbol in expr.free_symbols:
        value = _resolved(ctx, symbol)
        if not isinstance(value, int):
            return None
        values[symbol] = value
    result = expr.subs(values)
    return int(result) if isinstance(result, sympy.Integer) else None


def assumed_inside(ctx: RuleContext, name: str, axis: int, begin: Any, end: Any) -> bool:
    """Whether positions ``[begin, end)`` (expressions of the kernel's symbols, tile
    properties of the active loops among them) lie inside dimension ``axis`` of host tensor
    ``name`` once a launch has checked it: when the relation is one of host values (sizes,
    scalar arguments, block sizes), it is recorded as a :class:`~.kernel_model.LaunchCheck`
    and the access needs no guard."""
    fake = next((a.fake for a in ctx.model.args if a.name == name), None)
    low, high = _bounds(ctx, begin), _bounds(ctx, end)
    if low is None or high is None or not isinstance(fake, torch.Tensor) or axis >= fake.dim():
        return False
    condition = sympy.And(sympy.Ge(low[0], 0), sympy.Le(high[1], _expr(fake.shape[axis])))
    if condition is sympy.true:
        return True
    if condition is sympy.false or not all(HostValue.of(ctx.model, s) is not None for s in condition.free_symbols):
        return False
    check = LaunchCheck(condition, f"dimension {axis} of '{name}'", ctx.location)
    if all((c.condition, c.what) != (check.condition, check.what) for c in ctx.model.launch_checks):
        ctx.model.launch_checks.append(check)
    return True


def _expr(value: Any) -> sympy.Expr:
    return value.node.expr if isinstance(value, torch.SymInt) else sympy.sympify(value)


def _bounds(ctx: RuleContext, value: Any) -> tuple[sympy.Expr, sympy.Expr] | None:
    """The least and greatest value of an expression over the active loops, as expressions
    of the other symbols: each tile property in it (``tile.begin``, a grid index,
    ``tile.end``, ``tile.id``) replaced by the least or greatest value it takes in its loop.
    None when one has no known range or the expression is not non-decreasing in them."""
    if value is None:
        return None
    expr = _expr(value)
    low: dict[sympy.Symbol, sympy.Expr] = {}
    high: dict[sympy.Symbol, sympy.Expr] = {}
    for symbol in expr.free_symbols:
        origin = ctx.model.symbol_origin(symbol)
        if not isinstance(origin, vo.GridOrigin):  # host values stay as they are
            continue
        extremes = _property_range(ctx, origin)
        if extremes is None:
            return None
        low[symbol], high[symbol] = extremes
    if low and not _nondecreasing(expr):
        return None
    return expr.xreplace(low), expr.xreplace(high)


def _property_range(ctx: RuleContext, origin: Any) -> tuple[sympy.Expr, sympy.Expr] | None:
    """The least and greatest value a tile property takes over its loop, as expressions."""
    tile = ctx.tile(origin.block_id)
    if tile is None or tile.range_exprs is None:
        return None
    ranges = [_bounds(ctx, x) for x in tile.range_exprs]  # an inner loop's range may be an outer tile's
    if ranges[0] is None or ranges[1] is None:
        return None
    begin, end = ranges[0][0], ranges[1][1]
    step = tile.stride if tile.stride is not None else ctx.model.block_sizes.get(
        tile.block_id, ctx.model.runtime_block_sizes.get(tile.block_id))
    if step is None or isinstance(step, Scalar):
        return None
    count = FloorDiv(end - begin + step - 1, step)
    if type(origin) is vo.TileIdOrigin:
        return sympy.Integer(0), count - 1
    if type(origin) is vo.TileEndOrigin:
        return begin, end
    if type(origin) in _OFFSET_ORIGINS:
        return begin, begin + (count - 1) * step
    return None


def _nondecreasing(expr: sympy.Expr) -> bool:
    """Whether ``expr`` cannot decrease when its symbols grow: sums, positive multiples and
    floor divisions by positive constants of symbols."""
    if isinstance(expr, (sympy.Symbol, sympy.Integer)):
        return True
    if isinstance(expr, sympy.Add):
        return all(_nondecreasing(a) for a in expr.args)
    if isinstance(expr, sympy.Mul):
        constants = [a for a in expr.args if a.is_number]
        others = [a for a in expr.args if not a.is_number]
        return len(others) == 1 and all(c > 0 for c in constants) and _nondecreasing(others[0])
    if isinstance(expr, FloorDiv):
        return bool(expr.args[1].is_number and expr.args[1] > 0) and _nondecreasing(expr.args[0])
    return False


def scalar_inside(ctx: RuleContext, index: Any, size: Scalar | int, assume_for: str | None = None,
                  axis: int = 0) -> bool:
    """Whether a scalar index (an int, or a node whose value is a SymInt) is known to lie in
    ``[0, size)``: a grid index or ``tile.begin`` of a loop over the dimension, or an
    expression of tile properties and other symbols whose ranges show it (``col + 1`` in a
    grid over ``range(0, cols, 2)``). With ``assume_for`` (the host tensor's name), also
    when a launch checks it (:func:`assumed_inside`): ``tile.id`` of a loop of at most
    ``size`` tiles, a literal into a dynamic dimension."""
    value = index.meta.get("val") if isinstance(index, fx.Node) else index
    if isinstance(value, torch.SymInt) and isinstance(value.node.expr, sympy.Integer):
        value = int(value.node.expr)
    if isinstance(value, int):
        if isinstance(size, int):
            return 0 <= value < size
        return assume_for is not None and assumed_inside(ctx, assume_for, axis, value, value + 1)
    if not isinstance(value, torch.SymInt):
        return False
    expr = value.node.expr
    if isinstance(expr, sympy.Symbol):
        origin = ctx.model.symbol_origin(expr)
        tile = ctx.tile(origin.block_id) if type(origin) in _OFFSET_ORIGINS else None
        if tile is not None and tile_inside(ctx.emit, tile, size):  # also for loop ranges known only at run time
            return True
    if isinstance(size, int):
        ranges = dict(value.node.shape_env.var_to_range)
        for symbol in expr.free_symbols:
            tile_range = _tile_symbol_range(ctx, symbol)
            if tile_range is not None:
                ranges[symbol] = ValueRanges(*tile_range)
        bounds = bound_sympy(expr, ranges)
        if bool(bounds.lower >= 0) and bool(bounds.upper < size):
            return True
    return assume_for is not None and assumed_inside(ctx, assume_for, axis, expr, expr + 1)


def _tile_symbol_range(ctx: RuleContext, symbol: sympy.Symbol) -> tuple[int, int] | None:
    """The values a symbol of the active tile's ``begin`` (a grid index), ``end`` or ``id``
    takes over its loop, when the loop's range and step are ints."""
    origin = ctx.model.symbol_origin(symbol)
    if type(origin) not in (*_OFFSET_ORIGINS, vo.TileEndOrigin, vo.TileIdOrigin):
        return None
    tile = ctx.tile(origin.block_id)
    step = (tile.stride or tile.block_size) if tile is not None else None
    if tile is None or not all(isinstance(v, int) for v in (tile.begin, tile.end, step)) or tile.end <= tile.begin:
        return None
    count = -(-(tile.end - tile.begin) // step)
    if type(origin) is vo.TileIdOrigin:
        return 0, count - 1
    last = tile.begin + (count - 1) * step
    if type(origin) is vo.TileEndOrigin:
        return min(tile.begin + step, tile.end), tile.end
    return tile.begin, last


def in_range(emit: Emitter, position: Scalar | int | str, size: Scalar | int) -> str:
    """An ``i1`` true when ``0 <= position < size`` (an ``index`` position; unsigned, so a
    negative one is out of range)."""
    ssa = position if isinstance(position, str) else emit.index(position).ssa
    return emit.assign("inside", f"arith.cmpi ult, {ssa}, {emit.index(size).ssa} : index")


def window_inside(emit: Emitter, base: Scalar | int, lanes: Scalar | int, size: Scalar | int) -> str:
    """An ``i1`` true when the positions ``[base, base + lanes)`` all lie in ``[0, size)``."""
    base_i = emit.index(base)
    start = emit.assign("inside", f"arith.cmpi sge, {base_i.ssa}, {emit.index(0).ssa} : index")
    end = emit.assign("end", f"arith.addi {base_i.ssa}, {emit.index(lanes).ssa} : index")
    stop = emit.assign("inside", f"arith.cmpi sle, {end}, {emit.index(size).ssa} : index")
    return emit.assign("inside", f"arith.andi {start}, {stop} : i1")


def all_of(emit: Emitter, conditions: Sequence[str]) -> str | None:
    """The conjunction of ``i1`` values; None for none."""
    result: str | None = None
    for condition in conditions:
        result = condition if result is None else emit.assign("all", f"arith.andi {result}, {condition} : i1")
    return result


def nonempty(emit: Emitter, host: Tensor, axes: Sequence[int],
             checked_at_launch: Callable[[int], bool] = lambda axis: False) -> str | None:
    """An ``i1`` true when none of ``host``'s dimensions ``axes`` has size 0 (a position
    redirected to 0 in an empty dimension would still be outside it); None when every
    one's static size is positive or ``checked_at_launch(axis)`` (a launch checks it)."""
    conditions = []
    for axis in dict.fromkeys(axes):
        size = emit.dim(host, axis)
        if (isinstance(size, int) and size > 0) or checked_at_launch(axis):
            continue
        positive = f"arith.cmpi sgt, {emit.index(size).ssa}, {emit.index(0).ssa} : index"
        conditions.append(emit.assign("nonempty", positive))
    return all_of(emit, conditions)


def check_message(name: str, axis: int, size: Scalar | int) -> str:
    """What a failed check of a position in dimension ``axis`` of host tensor ``name`` says."""
    extent = f" (size {size})" if isinstance(size, int) else ""
    return f"{INDEX_CHECK_PREFIX} into dimension {axis} of '{name}'{extent}"


def guard_positions(emit: Emitter, host: Tensor, name: str, coords: list[str], guarded: Sequence[int],
                    active: str | None, *, redirect: bool = True) -> tuple[list[str], str | None]:
    """``coords`` (``index`` positions, one per host dimension) with each of the ``guarded``
    ones moved to 0 where it lies outside its dimension (unless not ``redirect``: for a
    caller that skips the access then), and an ``i1`` true when all lie inside (None when
    none is guarded). In checked mode each is checked first, where the ``i1`` ``active``
    (the lane's masks) holds."""
    safe = list(coords)
    oks = []
    inactive = None
    if emit.checked and active is not None:
        inactive = emit.assign("off", f"arith.xori {active}, {emit.const(True, 'i1').ssa} : i1")
    for axis in guarded:
        size = emit.dim(host, axis)
        ok = in_range(emit, coords[axis], size)
        if emit.checked:
            emit.check(ok if inactive is None else emit.assign("checked", f"arith.ori {inactive}, {ok} : i1"),
                       check_message(name, axis, size))
        if redirect:
            safe[axis] = emit.assign("safe", f"arith.select {ok}, {coords[axis]}, {emit.index(0).ssa} : index")
        oks.append(ok)
    return safe, all_of(emit, oks)


def truthy(emit: Emitter, ssa: str, dtype: torch.dtype) -> str:
    """An element of a mask as an ``i1`` (nonzero is true)."""
    if dtype == torch.bool:
        return ssa
    zero = emit.const(0, element_type(dtype))
    pred = "cmpf une" if dtype.is_floating_point else "cmpi ne"
    return emit.assign("t", f"arith.{pred}, {ssa}, {zero.ssa} : {element_type(dtype)}")


def any_lane(emit: Emitter, mask: Tensor) -> str:
    """An ``i1`` true when some element of ``mask`` is (a reduction to one value; for checks)."""
    if mask.rank == 0:
        element = emit.assign("m", f"tensor.extract {mask.ssa}[] : {mask.type}")
        return truthy(emit, element, mask.dtype)
    dims = [f"d{i}" for i in range(mask.rank)]
    init = emit.fill((), torch.bool, False)
    result = emit.fresh("any")
    iterators = ", ".join(['"reduction"'] * mask.rank)
    header = (f"{result} = linalg.generic {{indexing_maps = [affine_map<({', '.join(dims)}) -> ({', '.join(dims)})>, "
              f"affine_map<({', '.join(dims)}) -> ()>], iterator_types = [{iterators}]}} "
              f"ins({mask.ssa} : {mask.type}) outs({init.ssa} : {init.type}) {{")
    element, acc = emit.fresh("m"), emit.fresh("acc")
    with emit.region(header, f"}} -> {init.type}"):
        emit.block_header(f"{element}: {element_type(mask.dtype)}, {acc}: i1")
        either = emit.assign("any", f"arith.ori {truthy(emit, element, mask.dtype)}, {acc} : i1")
        emit.op(f"linalg.yield {either} : i1")
    return emit.assign("any", f"tensor.extract {result}[] : {init.type}")


def guarded_value(emit: Emitter, condition: str | None, read: Callable[[], Tensor], zeros: Callable[[], Tensor],
                  shape: Sequence[int | None]) -> Tensor:
    """``read()`` where ``condition`` holds, else ``zeros()`` (values of ``shape``); just
    ``read()`` when there is no condition. See :func:`guarded_update` for the form."""
    if condition is None:
        return read()
    if None not in shape:
        return emit.branch(condition, lambda: [read()], lambda: [zeros()], hint="guarded")[0]
    [value] = emit.for_loop(0, _trips(emit, condition), 1, [zeros()], lambda _iv, _zeros: [read()], hint="guarded")
    return value  # type: ignore[return-value]


def guarded_update(emit: Emitter, condition: str | None, update: Callable[[list[Any]], Sequence[Any]],
                   current: list[Any]) -> list[Any]:
    """``update(current)`` where ``condition`` holds, else ``current`` unchanged; just the
    update when there is no condition. Values of static shapes go through an ``scf.if``;
    with a dynamic size, through an ``scf.for`` of one iteration or none carrying them,
    because IREE resolves the sizes of tensors an ``scf.for`` carries but not those of an
    ``scf.if``'s results (docs/downstream.md)."""
    if condition is None:
        return list(update(current))
    if not any(isinstance(v, Tensor) and None in v.shape for v in current):
        return emit.branch(condition, lambda: update(current), lambda: current, hint="guarded")
    return emit.for_loop(0, _trips(emit, condition), 1, current, lambda _iv, values: list(update(values)),
                         hint="guarded")


def _trips(emit: Emitter, condition: str) -> Scalar:
    """1 where the ``i1`` ``condition`` holds, else 0 (``index``)."""
    return Scalar(emit.assign("trips", f"arith.select {condition}, {emit.index(1).ssa}, {emit.index(0).ssa} : index"),
                  "index")
