"""Targets torch-mlir lacks or lowers poorly, and their exact rewrites: Helion ops with an
ATen form, Scalar overloads as Tensor overloads, the package's own rewrites, and torch's
reference decompositions."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._decomp import decomposition_table
from torch_mlir import ir
from torch_mlir.extras.fx_importer import SYMBOLIC_OP_TO_TORCH_OP

aten = torch.ops.aten

# --------------------------------------------------------------------------------------
# Targets: Helion ops with an exact ATen form, and exact rewrites of ops torch-mlir lacks
# --------------------------------------------------------------------------------------


def is_helion_target(target: Any) -> bool:
    return (getattr(target, "__module__", None) or "").startswith("helion")


def is_helion_full(target: Any) -> bool:
    return (
        getattr(target, "__module__", None) == "helion.language.creation_ops"
        and getattr(target, "__name__", None) == "full"
    )


def aten_call(target: Any, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
    """The ATen call a node stands for.

    Helion's ``full(shape, value, dtype, device)`` is exactly ``aten.full`` (the device
    does not show in the emitted IR). Keyword arguments outside the op's schema are
    Helion's bookkeeping (``_extra_deps`` of ``aten.max.dim``) and are dropped; their
    nodes still count as inputs, so they stay (unused) function arguments.
    """
    if is_helion_full(target):
        bound = dict(zip(("shape", "value", "dtype", "device"), args)) | dict(kwargs)
        return aten.full.default, (bound["shape"], bound["value"]), {"dtype": bound.get("dtype")}
    schema = getattr(target, "_schema", None)
    if schema is not None and kwargs:
        names = {argument.name for argument in schema.arguments}
        kwargs = {name: value for name, value in kwargs.items() if name in names}
    return target, args, kwargs


def _matmul_in_out_dtype(op: Callable[..., torch.Tensor], operand_count: int) -> Callable[..., torch.Tensor]:
    """Rewrite of ``mm/bmm/addmm/baddbmm.dtype``: multiply-accumulate in ``out_dtype``.

    Upcasting the operands first is exact: a product of two bf16/f16 values fits f32
    (and of two int8 values int32), so converting before the matmul yields the same
    products, and the accumulation happens in ``out_dtype`` as the overload specifies.
    """

    def rewrite(*args: Any, **kwargs: Any) -> torch.Tensor:
        operands, out_dtype = args[:operand_count], args[operand_count]
        return op(*(t.to(out_dtype) for t in operands), **kwargs)

    return rewrite


def _remainder_scalar_tensor(scalar: Any, other: torch.Tensor) -> torch.Tensor:
    # The scalar joins as a 0-d tensor of the promoted dtype, which leaves the promotion
    # of the Scalar_Tensor overload unchanged.
    dtype = torch.result_type(scalar, other)
    return aten.remainder.Tensor(aten.scalar_tensor.default(scalar, dtype=dtype), other.to(dtype))


def _integer_power(base: torch.Tensor, exponent: Any) -> Any:
    """``pow`` of an integer tensor by a non-negative int: square-and-multiply.

    Integer multiplication wraps the same way whatever the order, so this is exact.
    Other cases are left to the op itself (``NotImplemented``).
    """
    if base.dtype.is_floating_point or base.dtype == torch.bool or isinstance(exponent, bool):
        return NotImplemented
    if not isinstance(exponent, int) or exponent < 0:
        return NotImplemented
    result = aten.full_like.default(base, 1)
    square = base
    while exponent:
        if exponent & 1:
            result = aten.mul.Tensor(result, square)
        exponent >>= 1
        if exponent:
            square = aten.mul.Tensor(square, square)
    return result


def _numeric_operands(*operands: Any, floats: bool) -> bool:
    """One operand is a tensor, every tensor holds integers (or floats, with ``floats``), and
    every other operand is a number of that kind (Python or symbolic)."""
    tensors = [x for x in operands if isinstance(x, torch.Tensor)]
    numbers = [x for x in operands if not isinstance(x, torch.Tensor)]
    kinds = (int, torch.SymInt, float, torch.SymFloat) if floats else (int, torch.SymInt)
    tensors_fit = all(t.dtype != torch.bool and (floats or not t.dtype.is_floating_point) for t in tensors)
    numbers_fit = all(isinstance(x, kinds) and not isinstance(x, bool) for x in numbers)
    return bool(tensors) and tensors_fit and numbers_fit


def _as_tensor_beside(value: Any, other: torch.Tensor) -> torch.Tensor:
    """A Python int operand as a traced 0-d tensor that promotes as the wrapped number would."""
    if isinstance(value, torch.Tensor):
        return value
    return aten.new_full.default(other, [], value, dtype=scalar_tensor_dtype(value, [other.dtype]))


def _floor_fix(remainder: torch.Tensor, divisor: torch.Tensor) -> torch.Tensor:
    """Where a truncated quotient is one above the floored one: a remainder that is not zero
    and whose sign differs from the divisor's."""
    # logical_xor, not ne: TOSA's profiles compare no booleans (IREE refuses tosa.equal on i1).
    signs_differ = aten.logical_xor.default(aten.lt.Scalar(remainder, 0), aten.lt.Scalar(divisor, 0))
    return aten.logical_and.default(aten.ne.Scalar(remainder, 0), signs_differ)


def _integer_floor_division(a: Any, b: Any, *, rounding_mode: str | None = None) -> Any:
    """``a // b`` on integers from the truncated quotient, in integers throughout.

    torch-mlir's linalg and stablehlo forms divide in f64, which is inexact past 2**53
    (and puts f64 into modules of integer kernels); truncating division is exact in every
    output type, and the floored quotient is one less where the remainder's sign differs
    from the divisor's (Python's and torch's definition).
    """
    if rounding_mode != "floor" or not _numeric_operands(a, b, floats=False):
        return NotImplemented
    tensor = a if isinstance(a, torch.Tensor) else b
    a, b = _as_tensor_beside(a, tensor), _as_tensor_beside(b, tensor)
    quotient = aten.div.Tensor_mode(a, b, rounding_mode="trunc")
    remainder = aten.sub.Tensor(a, aten.mul.Tensor(quotient, b))
    return aten.where.self(_floor_fix(remainder, b), aten.sub.Scalar(quotient, 1), quotient)


def _remainder(a: Any, b: Any) -> Any:
    """``a % b`` (the divisor's sign), as torch computes it: the truncated remainder plus the
    divisor where their signs differ. torch-mlir's stablehlo form is the truncated remainder
    alone (``stablehlo.remainder``), and its tosa form of an integer one was wrong for large
    operands; the truncated remainder is ``fmod`` for floats and ``a - trunc(a / b) * b`` for
    integers."""
    if not _numeric_operands(a, b, floats=True):
        return NotImplemented
    tensor = a if isinstance(a, torch.Tensor) else b
    a, b = _as_tensor_beside(a, tensor), _as_tensor_beside(b, tensor)
    if a.dtype.is_floating_point or b.dtype.is_floating_point:
        truncated = aten.fmod.Tensor(a, b)
    else:
        truncated = aten.sub.Tensor(a, aten.mul.Tensor(aten.div.Tensor_mode(a, b, rounding_mode="trunc"), b))
    return aten.where.self(_floor_fix(truncated, b), aten.add.Tensor(truncated, b), truncated)


def _integer_fmod(a: Any, b: Any) -> Any:
    """``torch.fmod`` of integers (the dividend's sign), ``a - trunc(a / b) * b``: the
    bundled MLIR cannot legalize raw ``aten.fmod.Scalar`` with a run-time divisor."""
    if not _numeric_operands(a, b, floats=False):
        return NotImplemented
    tensor = a if isinstance(a, torch.Tensor) else b
    a, b = _as_tensor_beside(a, tensor), _as_tensor_beside(b, tensor)
    return aten.sub.Tensor(a, aten.mul.Tensor(aten.div.Tensor_mode(a, b, rounding_mode="trunc"), b))


def _iota_as_arange(
    length: Any, *, start: Any, step: Any, dtype: torch.dtype, device: Any, requires_grad: bool
) -> torch.Tensor:
    # prims.iota is integer-only, and arange over integers yields exactly
    # start, start + step, ... (length values); torch-mlir lowers arange with a
    # symbolic end where it fails on iota with a symbolic length.
    return aten.arange.start_step(start, start + length * step, step, dtype=dtype, device=device)


_EXACT_REWRITES: dict[Any, Callable[..., Any]] = {
    torch.ops.prims.iota.default: _iota_as_arange,
    aten.mm.dtype: _matmul_in_out_dtype(aten.mm.default, 2),
    aten.bmm.dtype: _matmul_in_out_dtype(aten.bmm.default, 2),
    aten.addmm.dtype: _matmul_in_out_dtype(aten.addmm.default, 3),
    aten.baddbmm.dtype: _matmul_in_out_dtype(aten.baddbmm.default, 3),
    aten.remainder.Scalar_Tensor: _remainder_scalar_tensor,
    aten.pow.Tensor_Scalar: _integer_power,
    aten.div.Tensor_mode: _integer_floor_division,
    aten.remainder.Tensor: _remainder,
    aten.remainder.Scalar: _remainder,
    aten.fmod.Tensor: _integer_fmod,
    aten.fmod.Scalar: _integer_fmod,
}


def rewritten_before_import(target: Any, operands: Sequence[Any]) -> bool:
    """Whether ``target`` on these operand values goes through its exact rewrite above even
    though torch-mlir has the op: floor division and ``fmod`` of integers, remainder of numbers."""
    if target in (aten.div.Tensor_mode, aten.fmod.Tensor, aten.fmod.Scalar):
        return _numeric_operands(*operands[:2], floats=False)
    return target in (aten.remainder.Tensor, aten.remainder.Scalar) and _numeric_operands(*operands[:2], floats=True)


_REGISTERED: dict[Any, bool] = {}


def torch_mlir_has_op(target: Any, ctx: ir.Context) -> bool:
    """Whether torch-mlir defines the op the importer would emit for ``target``.

    Unknown ops are imported as an opaque ``torch.operator`` that never lowers, so those
    are decomposed before import.
    """
    known = _REGISTERED.get(target)
    if known is None:
        schema = getattr(SYMBOLIC_OP_TO_TORCH_OP.get(target, target), "_schema", None)
        if schema is None:
            known = True  # Python operators on SymInts: the importer maps them itself.
        else:
            namespace, _, name = schema.name.partition("::")
            overload = f".{schema.overload_name}" if schema.overload_name else ""
            known = ctx.is_registered_operation(f"torch.{namespace}.{name}{overload}")
        _REGISTERED[target] = known
    return known


def _scalar_overload_as_tensor_overload(target: Any) -> Callable[..., Any] | None:
    """For ``op.Scalar`` with a matching ``op.Tensor`` overload: call the latter with the
    scalar operands as 0-d tensors (exact, see scalar_tensor_dtype). torch-mlir often
    lowers only the Tensor form (``fmod.Scalar`` on integers fails, ``fmod.Tensor`` works)."""
    if not isinstance(target, torch._ops.OpOverload) or target._overloadname != "Scalar":
        return None
    tensor_op = getattr(target.overloadpacket, "Tensor", None)
    if tensor_op is None:
        return None
    scalar_arguments, tensor_arguments = target._schema.arguments, tensor_op._schema.arguments
    if [a.name for a in scalar_arguments] != [a.name for a in tensor_arguments]:
        return None
    wrapped_positions = []
    for position, (mine, theirs) in enumerate(zip(scalar_arguments, tensor_arguments)):
        if str(mine.type) == str(theirs.type):
            continue
        if not isinstance(mine.type, torch.NumberType) or not isinstance(theirs.type, torch.TensorType):
            return None
        wrapped_positions.append(position)

    def rewrite(*args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        new_args = list(args)
        for position in wrapped_positions:
            if position < len(new_args) and not isinstance(new_args[position], torch.Tensor):
                scalar = new_args[position]
                dtype = scalar_tensor_dtype(scalar, [t.dtype for t in tensors])
                # new_full on an input rather than scalar_tensor: a tensor made from
                # constants only would be evaluated eagerly while tracing, not traced.
                new_args[position] = aten.new_full.default(tensors[0], [], scalar, dtype=dtype)
        return tensor_op(*new_args, **kwargs)

    return rewrite


def decomposition_for(target: Any) -> Callable[..., Any] | None:
    """An exact rewrite of ``target`` into ops torch-mlir may lower better: the package's
    own, the Tensor form of a Scalar overload, else torch's reference decomposition."""
    if target in _EXACT_REWRITES:
        return _EXACT_REWRITES[target]
    rewrite = _scalar_overload_as_tensor_overload(target)
    if rewrite is not None:
        return rewrite

    return decomposition_table.get(target)


def scalar_tensor_dtype(scalar: Any, tensor_dtypes: Sequence[torch.dtype]) -> torch.dtype:
    """The dtype of a 0-d tensor that stands for a Python or symbolic scalar operand
    (a "wrapped number") and gives the same result dtype and the same values.

    A 0-d tensor never wins type promotion over a tensor of its own kind, and torch reads
    a 0-d operand straight into the operation's compute type (f32 for half-precision
    tensors). So a bool is carried as bool; an int beside integer tensors in their promoted
    integer type (the type torch computes in; tosa also wants shift operands of one
    type), beside floating tensors in their compute type like a float (no int64 to
    convert: TOSA's profiles have no int64 cast), otherwise as int64; a float beside
    floating tensors as float32 (float64 only beside float64 tensors: tosa has no f64),
    and beside integer tensors in the default dtype, which is then the result dtype.
    """
    if isinstance(scalar, (bool, torch.SymBool)):
        return torch.bool
    if isinstance(scalar, (int, torch.SymInt)):
        ints = [d for d in tensor_dtypes if not d.is_floating_point and d != torch.bool]
        if ints and len(ints) == len(tensor_dtypes):
            return functools.reduce(torch.promote_types, ints)
        if not any(dtype.is_floating_point for dtype in tensor_dtypes):
            return torch.int64
    if torch.float64 in tensor_dtypes:
        return torch.float64
    if any(dtype.is_floating_point for dtype in tensor_dtypes):
        return torch.float32
    return torch.get_default_dtype()
