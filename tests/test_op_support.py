"""docs/op-support.md states what the importer lowers: recompute the table and compare."""

from __future__ import annotations

import re

import pytest

from helion_mlir.importer.op_catalog import CATALOG
from helion_mlir.importer.op_support import (
    DOC_PATH,
    measure_op_support,
    render_op_support,
    table_cells,
)
from helion_mlir.output_type import OutputType

# One worker runs the module: the measurement takes seconds.
pytestmark = pytest.mark.xdist_group("op-support")
REGENERATE = "the importer's op support changed: run scripts/op-support and commit docs/op-support.md"


def _document_cells(text: str) -> tuple[dict[tuple[str, str], str], list[str]]:
    """Cells {(case name, output type): text} and the numbered reasons of the document."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| target |"))
    columns = [c.strip() for c in lines[header].strip("|").split("|")][1:]
    cells: dict[tuple[str, str], str] = {}
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        name, *values = [c.strip() for c in line.strip("|").split(" | ")]
        for column, value in zip(columns, values):
            cells[(name.strip("`"), column)] = value
    reasons = [m.group(1) for m in re.finditer(r"^\d+\. (.*)$", text, re.MULTILINE)]
    return cells, reasons


@pytest.fixture(scope="module")
def measured():
    return measure_op_support()


def test_document_lists_every_catalogued_case_and_output_type() -> None:
    cells, _ = _document_cells(DOC_PATH.read_text())
    expected = {(case.name, ot.value) for case in CATALOG for ot in OutputType}
    assert set(cells) == expected, REGENERATE


def test_every_cell_matches_a_fresh_measurement(measured) -> None:
    document_cells, document_reasons = _document_cells(DOC_PATH.read_text())
    cells, reasons = table_cells(measured)

    def cited(cell: str, notes: list[str]) -> str:
        # Compare what a cell says, with its footnote numbers replaced by the reasons.
        return re.sub(r"\[(\d+)\]", lambda m: f"[{notes[int(m.group(1)) - 1]}]", cell)

    differences = [
        f"  {name} / {column}: document says {cited(document_cells.get((name, column), '(missing)'), document_reasons)!r}, "
        f"measured {cited(cells[(name, column)], reasons)!r}"
        for (name, column) in cells
        if cited(document_cells.get((name, column), ""), document_reasons) != cited(cells[(name, column)], reasons)
    ]
    assert not differences, REGENERATE + ":\n" + "\n".join(differences)


def test_document_is_exactly_what_the_script_writes(measured) -> None:
    assert DOC_PATH.read_text() == render_op_support(measured), REGENERATE


def test_linalg_supports_every_catalogued_case(measured) -> None:
    # The package's default output type must lower everything Helion kernels produce.
    failing = {name: failures for (name, ot), failures in measured.failures.items() if ot is OutputType.LINALG_ON_TENSORS and failures}
    assert not failing
