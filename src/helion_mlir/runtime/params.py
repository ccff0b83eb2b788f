"""What crosses the boundary of a compiled function: tensor and scalar parameters, how
each scalar type is passed through ctypes, and the checks every runtime applies to the
arguments before anything runs."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field

import torch
from helion.language.constexpr import ConstExpr

from ..errors import ArgumentError
from ..mlir_types import PACKED_PAIR_DTYPES, SIGNED_OF_UNSIGNED

# MLIR scalar type -> (ctypes type it is passed as, Python types accepted for it).
SCALAR_KINDS: dict[str, tuple[type, tuple[type, ...]]] = {
    "i1": (ctypes.c_bool, (bool,)),
    "i8": (ctypes.c_int8, (int,)),
    "i16": (ctypes.c_int16, (int,)),
    "i32": (ctypes.c_int32, (int,)),
    "i64": (ctypes.c_int64, (int,)),
    "index": (ctypes.c_int64, (int,)),
    "f32": (ctypes.c_float, (int, float)),
    "f64": (ctypes.c_double, (int, float)),
}


@dataclass(frozen=True)
class TensorParam:
    """A ranked-tensor argument or result; ``None`` in ``dims`` is a dynamic (``?``) size."""

    mlir_type: str
    dims: tuple[int | None, ...]
    dtype: torch.dtype
    rank: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rank", len(self.dims))


@dataclass(frozen=True)
class ScalarParam:
    """A scalar argument, passed by value as ``ctype``."""

    mlir_type: str
    ctype: type
    accepted: tuple[type, ...]


Param = TensorParam | ScalarParam


def accepts_dtype(expected: torch.dtype, given: torch.dtype) -> bool:
    """Whether a tensor of ``given`` dtype may stand for a parameter of ``expected`` dtype:
    the same, an unsigned dtype for the signless integer of its width (uint64 for i64), or
    uint8 bytes for a packed parameter (Helion's host code passes float4_e2m1fn_x2 tensors
    as ``.view(torch.uint8)``)."""
    return (given == expected or SIGNED_OF_UNSIGNED.get(given) == expected
            or (given == torch.uint8 and expected in PACKED_PAIR_DTYPES))


def check_tensor(where: str, param: TensorParam, value: object, position: int | None = None) -> torch.Tensor:
    """``value`` as a dense row-major CPU tensor of ``param``'s type (a contiguous copy
    when it is not), or :class:`~helion_mlir.errors.ArgumentError` naming ``where`` (the
    argument at ``position``)."""
    if not isinstance(value, torch.Tensor):
        problem = f"expected a torch.Tensor, got {type(value).__name__}"
        raise ArgumentError(f"{where}: {problem}", position=position, problem=problem)
    problem = None
    if value.device.type != "cpu":
        problem = f"expected a CPU tensor, got one on {value.device}"
    elif value.layout != torch.strided:
        problem = f"expected a dense tensor, got layout {value.layout}"
    elif not accepts_dtype(param.dtype, value.dtype):
        problem = f"expected dtype {param.dtype}, got {value.dtype}"
    elif value.dim() != param.rank - (param.dtype in PACKED_PAIR_DTYPES):
        problem = f"expected rank {param.rank}, got shape {tuple(value.shape)}"
    else:
        for dim, (expected, actual) in enumerate(zip(param.dims, value.shape)):
            if expected is not None and expected != actual:
                problem = f"dimension {dim} must be {expected}, got shape {tuple(value.shape)}"
                break
    if problem is None and not value.is_contiguous():
        problem = _copy_refused(value)
    if problem is not None:
        raise ArgumentError(f"{where}: {problem}", position=position, problem=problem)
    return value if value.is_contiguous() else value.contiguous()


#: The environment variable that sets :func:`copy_limit` (bytes).
COPY_LIMIT_VARIABLE = "HELION_MLIR_MAX_COPY_BYTES"
_DEFAULT_COPY_LIMIT = 4 << 30


def copy_limit() -> int:
    """The most bytes a contiguous copy of a non-contiguous tensor argument may take: 4 GiB,
    or :data:`COPY_LIMIT_VARIABLE` (read at each copy). Compiled code takes dense row-major
    tensors; a view is copied, and the copy of an expanded view is as large as its shape
    (``torch.zeros(8, 1).expand(8, 2**31)``: 64 GiB from 32 bytes)."""
    given = os.environ.get(COPY_LIMIT_VARIABLE)
    return int(given) if given else _DEFAULT_COPY_LIMIT


def _copy_refused(value: torch.Tensor) -> str | None:
    """Why the contiguous copy of ``value`` is refused, or None."""
    size, limit = value.numel() * value.element_size(), copy_limit()
    if size <= limit:
        return None
    return (f"a non-contiguous tensor (strides {tuple(value.stride())}) is passed as a contiguous copy, "
            f"which would take {size} bytes, more than the {limit} allowed; pass a contiguous tensor, "
            f"or raise the limit with {COPY_LIMIT_VARIABLE}=<bytes>")


def check_writable(where: str, value: torch.Tensor, position: int | None = None) -> None:
    """Refuse a tensor the code writes whose elements share memory (an expanded or otherwise
    self-overlapping view), before anything runs: torch refuses to write into one (its
    ``copy_`` raises), and the elements it would hold are not what the kernel stores."""
    if value.is_contiguous() or torch._debug_has_internal_overlap(value) != 1:  # 1: MemOverlap::Yes
        return
    problem = (f"the kernel writes it, but several of its elements share memory (strides "
               f"{tuple(value.stride())}: an expanded or otherwise overlapping view); pass a tensor of its own "
               "(.clone() or .contiguous())")
    raise ArgumentError(f"{where}: {problem}", position=position, problem=problem)


def check_scalar(where: str, param: ScalarParam, value: object, position: int | None = None) -> int | float | bool:
    """``value`` if it is a number ``param`` can take, or
    :class:`~helion_mlir.errors.ArgumentError` naming ``where`` (the argument at ``position``).
    An ``hl.constexpr(v)`` (a caller's argument, or a host value such as
    ``flag = hl.constexpr(block < 64)``) is its value ``v``."""
    if isinstance(value, ConstExpr):
        value = value.value
    problem = None
    # bool is an int to Python; an integer parameter must not silently take a flag.
    if not isinstance(value, param.accepted) or (isinstance(value, bool) and bool not in param.accepted):
        problem = f"expected {' or '.join(t.__name__ for t in param.accepted)}, got {type(value).__name__}"
    elif param.accepted == (int,):
        bits = ctypes.sizeof(param.ctype) * 8
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):  # type: ignore[operator]
            problem = f"{value} does not fit in {param.mlir_type}"
    if problem is not None:
        raise ArgumentError(f"{where}: {problem}", position=position, problem=problem)
    return value  # type: ignore[return-value]
