"""The values the lowering associates with device-IR nodes while it emits MLIR."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..mlir_types import tensor_type

__all__ = ["Tensor", "Scalar", "Value", "HostRef", "HostTensor", "JaggedEnds", "Tile", "results_named"]


@dataclasses.dataclass(frozen=True)
class Tensor:
    """An SSA value of ranked tensor type; ``None`` in ``shape`` is a dynamic dimension."""

    ssa: str
    shape: tuple[int | None, ...]
    dtype: torch.dtype
    # The size of every dimension as values read at function entry (ints for static ones),
    # when known: versions of a host tensor (loop-carried, stored into) keep the sizes of
    # the argument they came from, so no size is ever read from a loop-carried value.
    sizes: "tuple[Scalar | int, ...] | None" = None

    @property
    def type(self) -> str:
        return tensor_type(self.shape, self.dtype)

    def renamed(self, ssa: str) -> "Tensor":
        """The same tensor (shape, dtype, known sizes) under another SSA name."""
        return dataclasses.replace(self, ssa=ssa)

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclasses.dataclass(frozen=True)
class Scalar:
    """An SSA value of scalar type (``index``, ``i64``, ``f32``, ``i1`` ...)."""

    ssa: str
    type: str

    def renamed(self, ssa: str) -> "Scalar":
        """The same scalar type under another SSA name."""
        return Scalar(ssa, self.type)


Value = Tensor | Scalar


def results_named(result: str, templates: Sequence[Value]) -> list[Value]:
    """The results of an op named ``result`` (``%r``, or ``%r#i`` of several), typed as ``templates``."""
    if len(templates) == 1:
        return [templates[0].renamed(result)]
    return [t.renamed(f"{result}#{i}") for i, t in enumerate(templates)]


@dataclasses.dataclass(frozen=True)
class HostRef:
    """A host tensor (kernel argument or host local) named in device code; its current
    value lives in the kernel state, because stores replace it (a rule's context resolves it)."""

    name: str


class HostTensor(NamedTuple):
    """A host tensor's name and its current value."""

    name: str
    value: Tensor


@dataclasses.dataclass(frozen=True)
class JaggedEnds:
    """Where a jagged tile's loop ends for each lane of its parent tiles
    (``hl.jagged_tile(ends)``): ``ends`` is shaped like the parent tiles of ``parent_blocks``."""

    ends: Tensor
    parent_blocks: tuple[int | None, ...]


@dataclasses.dataclass(frozen=True)
class Tile:
    """The active iteration of a tile loop over one block id.

    ``size`` is the static tile size every tile-shaped value has along this dimension;
    ``extent`` is how many of those lanes are in bounds (an int when known statically).
    Lanes at and beyond ``extent`` are padding: loads fill them, stores skip them.
    A whole dimension (a reduction dimension) is a tile with ``size`` equal to its extent,
    or ``None`` when that is only known at run time (the dimension is dynamic, unpadded).
    A tile of a runtime block size (one the host computes) also has ``size`` ``None``: its
    values hold exactly its ``extent`` lanes, and ``step`` is the runtime block size.
    A jagged tile (``hl.jagged_tile``) runs to the largest of its ``jagged`` ends; each lane
    of its parent tiles has its own end, past which its lanes are masked as padding is.
    """

    block_id: int
    offset: "Scalar | int"
    size: int | None
    extent: "Scalar | int"
    begin: "Scalar | int" = 0  # the loop's range, for tile.count
    end: "Scalar | int | None" = None
    step: "Scalar | int | None" = None  # the block size when it is not ``size``
    jagged: JaggedEnds | None = None

    @property
    def block_size(self) -> "Scalar | int":
        """The loop's stride: ``tile.block_size`` (ids and counts divide by it)."""
        if self.step is not None:
            return self.step
        return self.size if self.size is not None else self.extent

    @property
    def ragged(self) -> bool:
        if self.size is None:
            return False
        return not (isinstance(self.extent, int) and self.extent == self.size)
