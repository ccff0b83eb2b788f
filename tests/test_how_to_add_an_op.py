"""docs/architecture.md's "Adding an op" works as written: its rule, registered as the
page says, lowers a kernel's abs to ``math.absf`` and computes torch's numbers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import helion
import helion.language as hl
import pytest
import torch
from filecheck_util import run_filecheck
from torch import fx

from helion_mlir import generate_mlir
from helion_mlir.lowering import registry
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel

HOW_TO = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _how_to_rule() -> str:
    """The Python block of the how-to, its imports made absolute (it is written as a rules module)."""
    section = HOW_TO.read_text().split("### Adding an op", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the how-to has no Python example"
    lines = [line[3:] if line.startswith("   ") else line for line in code.group(1).splitlines()]
    text = "\n".join(lines)
    return text.replace("from ...", "from helion_mlir.").replace("from ..", "from helion_mlir.lowering.")


@pytest.fixture
def how_to_rule(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The how-to's rule, registered in a copy of the rule table that the test drops again."""
    monkeypatch.setattr(registry, "_LOWERINGS", dict(registry._LOWERINGS))
    namespace: dict[str, Any] = {}
    exec(compile(_how_to_rule(), str(HOW_TO), "exec"), namespace)  # noqa: S102  (the documented code)
    return namespace


@helion.kernel(config=helion.Config(block_sizes=[16, 32]))
def abs_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = torch.abs(x[tile])
    return out


def test_the_documented_rule_lowers_abs_to_absf_and_matches_torch(how_to_rule: dict[str, Any]) -> None:
    assert registry.rule_for(_abs_node(), lambda graph_id: type) is how_to_rule["lower_abs"]
    x = torch.randn(37, 100)  # ragged against 16x32 tiles
    x[0, :4] = torch.tensor([float("nan"), -0.0, float("inf"), -float("inf")])
    bound = abs_kernel.bind((x,))
    for output_type in ("linalg-on-tensors", "tosa", "stablehlo", "raw"):
        text = generate_mlir(bound, output_type=output_type)
        run_filecheck(text, """
            // CHECK: %{{abs[0-9]+}} = linalg.generic
            // CHECK-NEXT: ^bb0(%[[IN:[A-Za-z0-9_]+]]: f32
            // CHECK-NEXT: math.absf %[[IN]] : f32
            // CHECK-NOT: torch.aten.abs
        """)
        compiled = compile_kernel(bound, output_type=output_type)
        torch.testing.assert_close(compiled(x.clone()), torch.abs(x), equal_nan=True)


def _abs_node() -> fx.Node:
    graph = fx.Graph()
    return graph.call_function(torch.ops.aten.abs.default, (graph.placeholder("x"),))
