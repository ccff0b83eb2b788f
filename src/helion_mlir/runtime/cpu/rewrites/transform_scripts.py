"""Running transform-dialect scripts on a module, for the rewrites that plan in Python and
leave the rewriting to upstream transform ops."""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects.transform import interpreter

__all__ = ["match_attribute", "run_transform_script"]


def run_transform_script(module: ir.Module, body: str) -> None:
    """Apply ``body`` (transform ops on ``%root``, the module) with the bundled interpreter.

    Raises ``ValueError`` (the interpreter's) when a transform op fails outright.
    """
    script = ir.Module.parse(
        "module attributes {transform.with_named_sequence} {\n"
        "  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {\n"
        f"{body}\n    transform.yield\n  }}\n}}"
    )
    interpreter.apply_named_sequence(module.operation, script.body.operations[0], script)


def match_attribute(attribute: str) -> str:
    """A transform op matching the ops that carry ``attribute`` (``name`` or ``name = value``)."""
    return f"transform.structured.match attributes{{{attribute}}} in %root : (!transform.any_op) -> !transform.any_op"
