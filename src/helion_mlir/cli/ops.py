"""``helion-mlir ops``: the node targets with lowering rules, those refused on purpose, and the ATen support table."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from ..importer.op_catalog import CATALOG
from ..importer.op_support import DOC_PATH, measure_op_support, table_cells
from ..lowering.registry import registered_targets, rejected_targets
from ..output_type import OutputType
from .common import EXIT_OK


def ops_command(options: argparse.Namespace) -> int:
    groups: dict[str, list[str]] = {}
    for target in registered_targets():
        module, _, name = target.partition(".")
        groups.setdefault(module, []).append(name)
    print("Node targets with a registered lowering rule:")
    for module, names in groups.items():
        print(f"  {module}: {', '.join(names)}")
    print("  ATen/prims ops: via torch-mlir (support per output type below)")
    print("Node targets refused on purpose (UnsupportedNodeError):")
    for target, reason in rejected_targets().items():
        print(f"  {target}: {reason}")
    columns, rows, notes, source = _op_table(options.measure)
    print(f"\nATen/prims ops per output type ({source}):")
    print(table(["target", *columns], [[name, *(c.replace("<br>", "; ") for c in cells)] for name, cells in rows]))
    if notes:
        print("\nReasons:")
        for number, note in enumerate(notes, start=1):
            print(f"  [{number}] {_unescape_markdown(note)}")
    return EXIT_OK


def _unescape_markdown(text: str) -> str:
    """A reason as op_support writes it into the document, back to plain text."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("\\|", "|")


def _op_table(measure: bool) -> tuple[list[str], list[tuple[str, list[str]]], list[str], str]:
    """(columns, [(target, cells)], reasons, where it came from) of the op support table."""
    if not measure and DOC_PATH.is_file():
        text = DOC_PATH.read_text()
        lines = text.splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("| target |"))
        columns = [c.strip() for c in lines[header].strip("|").split("|")][1:]
        rows = []
        for line in lines[header + 2:]:
            if not line.startswith("|"):
                break
            name, *cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows.append((name.strip("`"), cells))
        notes = re.findall(r"^\d+\. (.*)$", text, re.MULTILINE)
        return columns, rows, notes, f"from {DOC_PATH.name}"
    print("measuring op support (about a minute)...", file=sys.stderr)
    cells, notes = table_cells(measure_op_support())
    columns = [t.value for t in OutputType]
    rows = [(case.name, [cells[(case.name, column)] for column in columns]) for case in CATALOG]
    return columns, rows, notes, "measured now"


# ----------------------------------------------------------------------- tables


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns; the last column is not padded."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = []
    for cells in [header, *rows]:
        padded = [str(cell).ljust(width) for cell, width in zip(cells[:-1], widths)]
        lines.append("  ".join([*padded, str(cells[-1])]).rstrip())
    return "\n".join(lines)
