"""Integer divisions and remainders that never trap, in both CPU pipelines.

x86's ``idiv`` and ``div`` raise SIGFPE for a zero divisor, and ``idiv`` also for
``INT_MIN / -1``, whose quotient does not fit; LLVM's ``sdiv``/``udiv``/``srem``/``urem``
leave both undefined, and a vectorized division is scalarized into the same instructions.
A kernel dividing by a zero it read from a tensor would kill the calling process, where
torch raises ``ZeroDivisionError`` and Helion's Triton code gives an undefined value.

Upstream MLIR has no pass that guards divisions (``arith-unsigned-when-equivalent`` and
``int-range-optimizations`` only use ranges the IR already proves; ``arith-expand`` turns
``floordivsi``/``ceildivsi`` into ``divsi`` sequences that would give different values for a
guarded zero divisor). Hence :func:`guard_integer_divisions`, run once the module is
linalg on tensors and before vectorization and ``arith-expand``, so that every output type
is guarded alike and the vectorizer vectorizes the guard with the division: each
``arith.divsi``/``divui``/``remsi``/``remui``/``floordivsi``/``ceildivsi``/``ceildivui``
whose divisor is not a constant known to be safe divides by 1 instead of 0 (and, signed,
of -1), and then gives what RISC-V's division instructions and StableHLO's ``divide`` and
``remainder`` give (the stablehlo output type's conversion already computes those), so that
every output type agrees:

- a division **by zero gives -1** (all ones), a remainder by zero **the dividend**; the floor
  division torch decomposes into ``divsi`` then gives -1 for a non-negative dividend and -2
  for a negative one, and ``floordivsi`` is guarded to give the same;
- a signed division **by -1 gives** ``0 - x``, which wraps ``INT_MIN`` to ``INT_MIN`` as
  torch does, and a signed remainder by -1 gives 0 (``remsi(x, 1)``), as torch does.

:func:`assert_nonzero_divisors` (checked mode) first asserts each scalar divisor that may be
0 outside linalg bodies (device scalars: ``i // k`` in a grid) non-zero, so that the call
raises naming the kernel line (:mod:`..llvm.failed_checks`). Divisions in a linalg body are not
asserted here: the lanes of a ragged tile past the tensor's end divide too (their padding holds
zeros), which the body does not tell from the others; the lowering, which knows the lanes,
emits the same assert for them in checked mode (``lowering/rules/division_checks.py``).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, cf

from .....errors import DIVISION_BY_ZERO_CHECK
from ..ir_walk import defining_op, ops_where

__all__ = ["assert_nonzero_divisors", "guard_integer_divisions"]

_SIGNED = frozenset({"arith.divsi", "arith.remsi", "arith.floordivsi", "arith.ceildivsi"})
_UNSIGNED = frozenset({"arith.divui", "arith.remui", "arith.ceildivui"})
_REMAINDERS = frozenset({"arith.remsi", "arith.remui"})
_EQ, _NE, _SLT = 0, 1, 2  # arith.cmpi predicates


def _constant_values(value: ir.Value) -> list[int] | None:
    """The integers of a scalar or dense ``arith.constant``; None for any other value."""
    owner = defining_op(value)
    if owner is None or owner.name != "arith.constant":
        return None
    attr = owner.attributes["value"]
    if isinstance(attr, ir.IntegerAttr):
        return [attr.value]
    if isinstance(attr, ir.DenseIntElementsAttr):
        return [ir.IntegerAttr(attr.get_splat_value()).value] if attr.is_splat else list(attr)
    return None


def _needs_guard(op: ir.Operation) -> bool:
    """A division or remainder whose divisor may be 0 (or, signed, -1) at run time."""
    if op.name not in _SIGNED | _UNSIGNED:
        return False
    divisor_type = op.operands[1].type
    if isinstance(divisor_type, ir.ShapedType) and not isinstance(divisor_type, ir.VectorType):
        return False  # on tensors (none reach here: torch-mlir and the conversions divide in linalg bodies)
    values = _constant_values(op.operands[1])
    if values is None:
        return True
    return any(v == 0 or (op.name in _SIGNED and v == -1) for v in values)


def _constant(type_: ir.Type, value: int) -> ir.Value:
    if isinstance(type_, ir.VectorType):
        element = ir.IntegerAttr.get(type_.element_type, value)
        return arith.constant(type_, ir.DenseElementsAttr.get_splat(type_, element))
    return arith.constant(type_, ir.IntegerAttr.get(type_, value))


def _is(value: ir.Value, constant: int) -> ir.Value:
    return arith.cmpi(_EQ, value, _constant(value.type, constant))


def _by_zero(name: str, dividend: ir.Value) -> ir.Value:
    """What ``name`` gives for a zero divisor: the dividend for a remainder, -1 (all ones) for a
    division, rounded down for a negative dividend by ``floordivsi``, as the floor division torch
    decomposes into ``divsi`` then gives."""
    if name in _REMAINDERS:
        return dividend
    minus_one = _constant(dividend.type, -1)
    if name != "arith.floordivsi":
        return minus_one
    negative = arith.cmpi(_SLT, dividend, _constant(dividend.type, 0))
    return arith.select(negative, _constant(dividend.type, -2), minus_one)


def guard_integer_divisions(module: ir.Module) -> int:
    """Every integer division or remainder whose divisor may be 0 (or -1, signed) gives a defined
    value instead of trapping (:func:`_by_zero`; ``INT_MIN / -1`` wraps); returns how many were guarded."""
    found = ops_where(module, _needs_guard)
    for op in found:
        dividend, divisor = op.operands
        type_ = divisor.type
        with ir.InsertionPoint(op), op.location:
            is_zero = _is(divisor, 0)
            replaced = is_zero
            if op.name in _SIGNED:
                is_minus_one = _is(divisor, -1)
                replaced = arith.ori(is_zero, is_minus_one)
            safe_divisor = arith.select(replaced, _constant(type_, 1), divisor)
            result = ir.Operation.create(op.name, results=[op.results[0].type], operands=[dividend, safe_divisor],
                                         attributes={named.name: named.attr for named in op.attributes}).result
            if op.name in _SIGNED and op.name not in _REMAINDERS:  # a remainder by -1 (by 1) is already 0
                result = arith.select(is_minus_one, arith.subi(_constant(type_, 0), dividend), result)
            result = arith.select(is_zero, _by_zero(op.name, dividend), result)
        op.results[0].replace_all_uses_with(result)
        op.erase()
    return len(found)


def _in_linalg_body(op: ir.Operation) -> bool:
    node = op.parent
    while node.name != "builtin.module":
        if node.name.startswith("linalg."):
            return True
        node = node.parent
    return False


def assert_nonzero_divisors(module: ir.Module) -> int:
    """Checked mode: a ``cf.assert`` that each scalar divisor outside linalg bodies that may be
    0 is not, before its division (the pipeline turns it into an error naming the kernel line)."""
    found = [op for op in ops_where(module, _needs_guard)
             if not isinstance(op.operands[1].type, ir.ShapedType) and not _in_linalg_body(op)]
    for op in found:
        with ir.InsertionPoint(op), op.location:
            divisor = op.operands[1]
            cf.assert_(arith.cmpi(_NE, divisor, _constant(divisor.type, 0)), DIVISION_BY_ZERO_CHECK)
    return len(found)
