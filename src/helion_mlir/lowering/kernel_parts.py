"""The parts a :class:`~.kernel_model.KernelModel` is made of: the arguments of the
emitted function (docs/abi.md), the dimensions of the kernel's top-level tile loops, and
the relations between host values a launch checks."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import sympy
import torch

from ..mlir_types import storage_shape

__all__ = ["ArgKind", "FunctionArg", "LaunchCheck", "LoopDim", "RootLoop", "static_shape"]


class ArgKind(enum.Enum):
    """What an argument of the emitted function carries."""

    TENSOR = "tensor"
    SCALAR = "scalar"


@dataclasses.dataclass(frozen=True)
class FunctionArg:
    """One argument of the emitted function."""

    name: str  # host variable name (for host tensors, Helion's host expression)
    kind: ArgKind
    mlir_type: str
    fake: Any  # FakeTensor for tensors; SymInt/SymFloat/int/float for scalars; a per-call value's symbol
    written: bool = False
    is_kernel_param: bool = True
    origin: Any = None  # Helion's origin of a value that is not a kernel parameter
    ssa_name: str = ""  # the SSA name is ``%<ssa_name>`` (``name`` when it is a valid one)
    aliases: tuple[str, ...] = ()  # other names the host code passes it under

    @property
    def ssa(self) -> str:
        return "%" + (self.ssa_name or self.name)

    @property
    def shape(self) -> tuple[int | None, ...]:
        """The MLIR shape (a packed dtype's pair dimension included)."""
        return static_shape(self.fake)

    @property
    def dtype(self) -> torch.dtype:
        return self.fake.dtype


@dataclasses.dataclass(frozen=True)
class LoopDim:
    """One dimension of a top-level tile loop: ``for off in range(begin, end, block_size)``,
    or ``range(begin, end, step)`` for ``hl.grid(begin, end, step)`` (whose block size is 1)."""

    block_id: int
    begin: Any  # int, SymInt or sympy expression
    end: Any
    block_size: Any  # int, or a sympy expression of per-call values (a runtime tile size)
    step: Any = None  # int, SymInt or sympy expression; None: the block size


@dataclasses.dataclass(frozen=True)
class TensorBound:
    """A loop bound that is the value of a 0-d integer host tensor (``hl.tile(n)`` of a
    tensor ``n``): the function reads it when it runs, as Helion's device code loads it."""

    name: str
    fake: Any = dataclasses.field(compare=False)


@dataclasses.dataclass(frozen=True)
class LaunchCheck:
    """A relation between host values (sizes, scalars, block sizes) that the emitted code
    assumes about an access, checked before each launch (docs/abi.md, "Indices out of
    range"): ``condition`` over the kernel's symbols, ``what`` it protects
    (``dimension 0 of 'y'``) and the MLIR location body of the access."""

    condition: sympy.Basic
    what: str
    location: str | None


@dataclasses.dataclass(frozen=True)
class RootLoop:
    graph_id: int
    phase: int
    dims: tuple[LoopDim, ...]
    location: Any = None  # Helion SourceLocation of the ``for`` statement


def static_shape(fake: torch.Tensor) -> tuple[int | None, ...]:
    """``fake``'s MLIR shape: ``None`` for a symbolic size, plus a packed dtype's pair dimension."""
    return storage_shape([d if isinstance(d, int) else None for d in fake.shape], fake.dtype)
