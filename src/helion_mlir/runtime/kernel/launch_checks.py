"""Checks before a launch of the relations between host values that the emitted code
assumes about the accesses of its tiles.

A tile of a loop over a range the host computes (``hl.tile(x.size(0))``, ``hl.tile(n)``)
that indexes another tensor (``y[tile]``) is only in range when ``y`` is long enough; with
dynamic shapes or scalar arguments that is known only at the call. Clipping every such
slice in the emitted code costs each tile a dynamic size (a dynamic-shape matmul ran 35%
slower), so a compiled kernel's main code assumes the relation, which the lowering
records (:class:`~helion_mlir.lowering.kernel_model.LaunchCheck`), and each launch
checks it with the launch's values; a launch for which one is false runs the kernel's
guarded form instead (docs/abi.md, "Indices out of range").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import sympy
from torch.utils._sympy.printers import PythonPrinter

from ...lowering.host_values import HostValue
from ...lowering.kernel_parts import LaunchCheck

__all__ = ["HostCondition", "LaunchChecks"]

_FILE_LINE = re.compile(r'"([^"]+)":(\d+):\d+')


class HostCondition:
    """A sympy condition on a kernel's symbols, evaluated with a launch's host values."""

    def __init__(self, model: Any, condition: sympy.Basic) -> None:
        symbols = sorted(condition.free_symbols, key=str)
        found = [HostValue.of(model, symbol) for symbol in symbols]
        #: How the condition reads (``x.size(0) <= y.size(0)``), with None for a symbol the host code does not name.
        self.text = PythonPrinter().doprint(condition.xreplace(
            {s: sympy.Symbol(v.text) for s, v in zip(symbols, found) if v is not None}))
        self.complete = all(v is not None for v in found)
        self.values: list[HostValue] = [v for v in found if v is not None]
        params = [f"_v{i}" for i in range(len(symbols))]
        expr = PythonPrinter().doprint(condition.xreplace({s: sympy.Symbol(p) for s, p in zip(symbols, params)}))
        self._test: Callable[..., bool] = eval(  # noqa: S307 (printed by torch)
            f"lambda {', '.join(params)}: bool({expr})", {"math": math})

    def holds(self, values: Mapping[str, Any]) -> tuple[bool, str]:
        """Whether the condition holds for a launch's ``values``, and the values it read (``n = 3, ...``)."""
        current = [v.read(values) for v in self.values]
        return self._test(*current), ", ".join(f"{v.text} = {value}" for v, value in zip(self.values, current))


class LaunchChecks:
    """The relations a kernel's emitted code assumes (:attr:`KernelModel.launch_checks`),
    checked before each launch."""

    def __init__(self, model: Any) -> None:
        self.checks: list[tuple[HostCondition, LaunchCheck]] = [
            (HostCondition(model, check.condition), check) for check in model.launch_checks]

    @property
    def names(self) -> set[str]:
        """The host variables the checks read."""
        return {v.key for condition, _check in self.checks for v in condition.values if v.key is not None}

    def failure(self, values: Mapping[str, Any]) -> str | None:
        """What the first relation false for a launch's ``values`` says (None: all hold). A
        relation whose values the launch lacks counts as false."""
        for condition, check in self.checks:
            try:
                holds, shown = condition.holds(values)
            except KeyError as missing:
                holds, shown = False, f"the launch has no value for {missing}"
            if not holds:
                found = _FILE_LINE.search(check.location or "")
                where = f" at {found.group(1)}:{found.group(2)}" if found else ""
                return f"{check.what}{where}: `{condition.text}` is false ({shown})"
        return None
