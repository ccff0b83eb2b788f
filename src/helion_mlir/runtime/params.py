"""What crosses the boundary of a compiled function: tensor and scalar parameters and
how each scalar type is passed through ctypes."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import torch

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
