"""ATen and prims ops: every such node without a rule of its own is lowered through
torch-mlir, one node at a time, and its body inlined (:func:`~..aten_calls.lower_aten_op`,
which the rules that fall back on torch-mlir call too)."""

from __future__ import annotations

from ..aten_calls import is_aten_op, lower_aten_op
from ..registry import register_family

register_family(is_aten_op)(lower_aten_op)
