"""Powers with a constant non-negative integral exponent (``x ** 3``) as ``math.fpowi``, in
the fast pipeline.

torch-mlir lowers ``torch.pow(x, 3)`` to ``math.powf`` with the float exponent ``3.0``, which
the fast pipeline would make a call of glibc's vector ``powf`` per register-wide piece
(:mod:`.vector_math`): several times the cost of ``x * x * x``, which is what torch itself
computes for a scalar exponent of 2 or 3.

Upstream ``math-expand-ops{ops=powf}`` turns constant exponents into multiplications, but
it also rewrites every other power as ``exp(y * log(x))``, NaN for a negative base where
``torch.pow`` gives a finite value (an integral exponent not known at compile time), so it
cannot run on the kernel. :func:`integral_powers_as_fpowi` turns only the ``math.powf`` ops
whose exponent is a constant integer in ``[0, MAX_EXPONENT]`` (scalar or splat) into
``math.fpowi``, and the pipeline then runs upstream ``math-expand-ops{ops=fpowi}``, which
expands constant integer powers by repeated squaring; other powers are left as they are.
Negative exponents stay ``powf``: the bundled expansion of ``1 / x^n`` tests ``x^n`` against
``-0.0`` with an ordered equality that ``+0.0`` also meets, and so gives ``-inf`` for
``0 ** -2``.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith
from torch_mlir.dialects import math as mmath

from ..ir_walk import defining_op, ops_where

__all__ = ["MAX_EXPONENT", "integral_powers_as_fpowi"]

MAX_EXPONENT = 16  # at most 4 squarings and 4 multiplications: a few roundings, as torch's own


def _integral_exponent(op: ir.Operation) -> int | None:
    """The exponent of a ``math.powf`` when it is a constant integer in ``[0, MAX_EXPONENT]``, else None."""
    constant = defining_op(op.operands[1])
    if constant is None or constant.name != "arith.constant":
        return None
    attr = constant.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        value = attr.value
    elif isinstance(attr, ir.DenseFPElementsAttr) and attr.is_splat:
        value = ir.FloatAttr(attr.get_splat_value()).value
    else:
        return None
    if value != value or not value.is_integer() or not 0 <= value <= MAX_EXPONENT:
        return None
    return int(value)


def integral_powers_as_fpowi(module: ir.Module) -> int:
    """Every ``math.powf`` with a constant exponent in ``0, 1, .., MAX_EXPONENT`` -> ``math.fpowi`` of the same
    integer (i32, splat for vectors); returns how many ops were replaced."""
    found = [(op, n) for op in ops_where(module, lambda op: op.name == "math.powf")
             if (n := _integral_exponent(op)) is not None]
    i32 = ir.IntegerType.get_signless(32)
    for op, n in found:
        type_ = op.results[0].type
        with ir.InsertionPoint(op), op.location:
            if isinstance(type_, ir.VectorType):
                int_type = ir.VectorType.get(type_.shape, i32)
                exponent = arith.constant(int_type, ir.DenseElementsAttr.get_splat(int_type, ir.IntegerAttr.get(i32, n)))
            else:
                exponent = arith.constant(i32, n)
            power = mmath.fpowi(op.operands[0], exponent)
        op.results[0].replace_all_uses_with(power)
        op.erase()
    return len(found)
