"""The CPU pipelines as data: lists of named steps, one runner, a printed form.

:data:`~.cpu.PIPELINES` holds the step list of each :class:`Pipeline`; :func:`lower_to_llvm`
runs one on a module's text; :func:`describe_pipeline` prints the steps that run with
some options (``helion-mlir pipeline`` shows it).
"""

from __future__ import annotations

from .cpu import PIPELINES
from .module_lowering import ModuleLowering
from .options import Pipeline, PipelineOptions
from .runner import DUMP_ENVIRONMENT_VARIABLE, describe_steps, lower_to_llvm
from .steps import Step

__all__ = [
    "DUMP_ENVIRONMENT_VARIABLE",
    "PIPELINES",
    "ModuleLowering",
    "Pipeline",
    "PipelineOptions",
    "Step",
    "describe_pipeline",
    "lower_to_llvm",
]


def describe_pipeline(pipeline: Pipeline | str, options: PipelineOptions | None = None) -> str:
    """The steps ``pipeline`` runs with ``options`` (default: linalg-on-tensors input, one
    thread, not in place), one a line."""
    pipeline = Pipeline.parse(pipeline)
    return describe_steps(pipeline, PIPELINES[pipeline], options or PipelineOptions())
