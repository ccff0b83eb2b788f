"""The steps a CPU pipeline is made of: upstream passes and the package's own rewrites.

A pipeline is a tuple of :class:`Step`. A pass step is one upstream (MLIR or torch-mlir)
pass in MLIR's textual pipeline form, anchored on the module: ``canonicalize`` on each
function is ``func.func(canonicalize)``; a pass option taken from the pipeline's options
is written ``$threads``, the function's name ``$func``. A rewrite step runs a Python function of the package
(:mod:`helion_mlir.runtime.cpu.rewrites`) on the module, or, for the steps that read or change
the function's boundary, on the :class:`~.module_lowering.ModuleLowering` itself. A step
given a :class:`Condition` runs only when its options satisfy it and, for a condition on
the module (``found_in``), when the module holds what it needs. An ``optional`` rewrite
is an optimization the numbers do not depend on: when it fails (a transform that does not
apply, a pattern it did not foresee), the runner puts the module back as it was before it
and goes on.
"""

from __future__ import annotations

import enum
import string
from collections.abc import Callable
from dataclasses import dataclass

from torch_mlir import ir

from ....output_type import OutputType
from .module_lowering import ModuleLowering
from .options import PipelineOptions

__all__ = [
    "CHECKED",
    "IN_PLACE",
    "PARALLEL",
    "Condition",
    "Step",
    "StepKind",
    "boundary",
    "check",
    "input_is",
    "optimization",
    "passes",
    "rewrite",
]


def _always(options: PipelineOptions) -> bool:
    return True


@dataclass(frozen=True)
class Condition:
    """When a step runs: a named property of the pipeline options, or of the module right
    before the step (``found_in``: a pass needed only by some modules is listed all the
    same, and skipped where the module has nothing for it)."""

    name: str
    holds: Callable[[PipelineOptions], bool] = _always
    found_in: Callable[[ir.Module], bool] | None = None


PARALLEL = Condition("parallel", lambda options: options.parallel)
IN_PLACE = Condition("in place", lambda options: options.in_place)
CHECKED = Condition("checked", lambda options: options.checked)


def input_is(output_type: OutputType) -> Condition:
    """The module is written in ``output_type``'s dialects."""
    return Condition(f"from {output_type.value}", lambda options: options.output_type is output_type)


class StepKind(str, enum.Enum):
    PASS = "pass"  # an upstream pass, run through a pass manager
    REWRITE = "rewrite"  # a rewrite of the package's own
    CHECK = "check"  # reads the module and fails with a clear error; changes nothing


@dataclass(frozen=True)
class Step:
    """One named step. ``name`` is the pass's textual form for a pass step, the rewrite's
    name (its function's, with hyphens) otherwise; ``action`` runs a rewrite or a check."""

    name: str
    kind: StepKind
    summary: str = ""
    action: Callable[[ModuleLowering], object] | None = None
    when: Condition | None = None
    optional: bool = False  # an optimization: skipped, the module left as it was, when it fails

    def runs_with(self, options: PipelineOptions) -> bool:
        return self.when is None or self.when.holds(options)

    @property
    def depends_on_the_module(self) -> bool:
        return self.when is not None and self.when.found_in is not None

    def applies_to(self, module: ir.Module) -> bool:
        """Whether the module holds what the step needs (always, without a module condition)."""
        return self.when is None or self.when.found_in is None or self.when.found_in(module)

    def pass_text(self, options: PipelineOptions, func_name: str | None = None) -> str:
        """A pass step's pipeline element with the options (``$threads``) and, when given,
        the function's name (``$func``) filled in."""
        names: dict[str, object] = {"threads": options.threads}
        if func_name is not None:
            names["func"] = func_name
        return string.Template(self.name).safe_substitute(names)


def passes(*texts: str, when: Condition | None = None) -> tuple[Step, ...]:
    """One step per upstream pass, e.g. ``passes("func.func(canonicalize)", "convert-scf-to-cf")``."""
    return tuple(Step(text, StepKind.PASS, when=when) for text in texts)


def _summary(function: Callable[..., object]) -> str:
    """The first line of the function's docstring, as plain text."""
    first = (function.__doc__ or "").strip().split("\n", 1)[0]
    return first.split("; returns", 1)[0].rstrip(".").replace("``", "") + "."


def _name(function: Callable[..., object]) -> str:
    return function.__name__.strip("_").replace("_", "-")


def rewrite(function: Callable[[ir.Module], object], *, when: Condition | None = None,
            optional: bool = False) -> Step:
    """A step that runs ``function(module)``, named after the function; ``optional`` for an
    optimization the pipeline may skip when it fails."""
    return Step(_name(function), StepKind.REWRITE, _summary(function),
                lambda lowering: function(lowering.module), when, optional)


def optimization(function: Callable[[ir.Module], object], *, when: Condition | None = None) -> Step:
    """``rewrite(function, optional=True)``: an optimization, skipped when it fails."""
    return rewrite(function, when=when, optional=True)


def boundary(function: Callable[[ModuleLowering], object], *, when: Condition | None = None,
             optional: bool = False) -> Step:
    """A step that runs ``function(lowering)``: it reads or changes the function's boundary
    (its signature, which arguments hold which results), which the lowering records."""
    return Step(_name(function), StepKind.REWRITE, _summary(function), function, when, optional)


def check(function: Callable[[ModuleLowering], object], *, when: Condition | None = None) -> Step:
    """A step that runs ``function(lowering)`` to raise a clear error; it changes nothing."""
    return Step(_name(function), StepKind.CHECK, _summary(function), function, when)
