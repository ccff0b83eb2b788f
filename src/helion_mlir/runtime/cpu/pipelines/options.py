"""Which CPU pipeline runs, and the options that choose and shape its steps."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ....kinds import Kind
from ....output_type import OutputType

__all__ = ["Pipeline", "PipelineOptions"]


class Pipeline(Kind):
    """``fast``: parallel, vectorized tiles; ``plain``: the straightforward lowering
    (sequential scalar loops), kept as the reference the fast one is tested against.
    Plain strings are accepted wherever a ``Pipeline`` is, through :meth:`Pipeline.parse`."""

    FAST = "fast"
    PLAIN = "plain"

    def thread_count(self, threads: int | None) -> int:
        """The workers parallel loops run on: one with the plain pipeline (its loops are
        sequential), else ``threads``, by default torch's thread count."""
        return 1 if self is Pipeline.PLAIN else max(1, threads or torch.get_num_threads())


@dataclass(frozen=True)
class PipelineOptions:
    """What a pipeline's steps depend on besides the module: the dialects the module is
    written in (the first stage), the OpenMP workers, whether results are written into
    their destination arguments, and whether every memory access is checked at run time
    (``checked``). Part of the compiled-function cache key."""

    output_type: OutputType = OutputType.LINALG_ON_TENSORS
    threads: int = 1
    in_place: bool = False
    checked: bool = False

    @classmethod
    def of(cls, pipeline: Pipeline, output_type: OutputType | str = OutputType.LINALG_ON_TENSORS,
           threads: int | None = None, in_place: bool = False, checked: bool = False) -> "PipelineOptions":
        """Check the options against ``pipeline`` and settle the thread count."""
        if in_place and pipeline is not Pipeline.FAST:
            raise ValueError("in_place needs the fast pipeline")
        if checked and pipeline is not Pipeline.PLAIN:
            raise ValueError("checked mode runs the plain pipeline (its loops are sequential, so a failed "
                             "check can return from the function); pass pipeline='plain' or leave it unset")
        return cls(OutputType.parse(output_type), pipeline.thread_count(threads), in_place, checked)

    @property
    def parallel(self) -> bool:
        """Parallel loops run on OpenMP workers (more than one thread)."""
        return self.threads > 1

    def describe(self) -> str:
        workers = f"{self.threads} thread{'s' if self.threads > 1 else ''}"
        return (f"{self.output_type.value}, {workers}{', in place' if self.in_place else ''}"
                f"{', checked' if self.checked else ''}")
