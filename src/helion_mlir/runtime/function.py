"""What the two kinds of compiled function share: the JIT's
:class:`~.cpu.engine.CompiledFunction` and IREE's :class:`~.iree.engine.IreeFunction` are
both called with CPU tensors and numbers and return a tuple of tensors, are checked
against the same signature, name an argument the same way in errors, and are weighed
by the caches the same way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from ..errors import ArgumentError
from ..output_type import OutputType
from .params import Param, TensorParam

__all__ = ["NativeFunction"]


class NativeFunction(ABC):
    """An emitted function compiled to native code: ``@func_name`` of a module written in
    ``output_type``'s dialects, with the tensor and scalar ``params`` and tensor ``results``
    read from its signature, and ``nbytes``, an estimate of the memory it holds (what the
    caches weigh it by)."""

    def __init__(self, func_name: str, output_type: OutputType, params: tuple[Param, ...],
                 results: tuple[TensorParam, ...], *, nbytes: int) -> None:
        self.func_name = func_name
        self.output_type = output_type
        self.params = params
        self.results = results
        #: Estimated bytes of memory the function holds.
        self.nbytes = nbytes

    @property
    def signature(self) -> str:
        """The tensor-level type the arguments are checked against."""
        args = ", ".join(p.mlir_type for p in self.params)
        results = ", ".join(r.mlir_type for r in self.results)
        return f"@{self.func_name}({args}) -> ({results})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.signature}, output_type='{self.output_type.value}'{self._described()})"

    def _described(self) -> str:
        """What the repr says besides the signature and output type (``, name='value'``...)."""
        return ""

    @abstractmethod
    def __call__(self, *args: torch.Tensor | int | float | bool) -> tuple[torch.Tensor, ...]:
        """Run the function on ``args`` and return its results."""

    def _check_count(self, args: Sequence[object]) -> None:
        """Raise :class:`~helion_mlir.errors.ArgumentError` unless there is one argument per parameter."""
        if len(args) != len(self.params):
            raise ArgumentError(f"{self.signature} takes {len(self.params)} argument(s), got {len(args)}")

    def _where(self, index: int) -> str:
        """How an error names argument ``index``."""
        return f"argument #{index} ({self.params[index].mlir_type}) of @{self.func_name}"
