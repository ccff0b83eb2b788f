"""``helion-mlir ops``: the node targets with lowering rules, those refused on purpose, and
the ATen support table; or, for one kernel, the ops it uses and their support per output type."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import HelionMLIRError, describe_target, node_source_location
from ..generate import emit_module, kernel_model
from ..importer.op_catalog import CATALOG
from ..importer.op_support import DOC_PATH, measure_op_support, table_cells
from ..lowering.aten_calls import lower_aten_op
from ..lowering.registry import registered_targets, rejected_targets, target_rule
from ..output_type import OutputType
from .common import EXIT_OK, CommandError, StageError, bind, first_line, stage
from .targets import load_target, stage_failure


def ops_command(options: argparse.Namespace) -> int:
    if options.target is not None:
        if options.measure:
            raise CommandError("--measure measures the table of every op; it takes no FILE",
                               next_step="helion-mlir ops --measure")
        return kernel_ops_command(options)
    if options.args is not None or options.config is not None:
        raise CommandError("--args and --config describe a kernel: name its file, helion-mlir ops FILE.py[:KERNEL]",
                           next_step="e.g. helion-mlir ops examples/add.py --args 'f32[64,64], f32[64,64]'")
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


# ------------------------------------------------------------------ one kernel's ops


@dataclasses.dataclass
class _OpUse:
    """A node target of a kernel: how many nodes use it, where first, and how it lowers."""

    target: object
    nodes: int
    first_at: str


def kernel_ops_command(options: argparse.Namespace) -> int:
    """The node targets of one kernel's device IR, how each is lowered, and per output type
    whether the kernel lowers (the op where it stops, and the table's entry for ATen ops
    past that point)."""
    target = load_target(options)
    try:
        bound = bind(target.kernel, target.args)
        with stage("lower"):
            model = kernel_model(bound, config=target.config)
    except StageError as err:
        raise stage_failure(err, target, OutputType.LINALG_ON_TENSORS) from err.error
    uses: dict[str, _OpUse] = {}
    for graph_id in sorted(model.reachable_graph_ids):
        for node in model.graphs[graph_id].graph.nodes:
            if node.op != "call_function":
                continue
            name = describe_target(node.target)
            if name not in uses:
                where = node_source_location(node) or ""
                uses[name] = _OpUse(node.target, 0, f"{Path(where).name}" if where else "-")
            uses[name].nodes += 1
    failures: dict[OutputType, HelionMLIRError | None] = {}
    for output_type in OutputType:
        try:
            emit_module(model, output_type)
            failures[output_type] = None
        except HelionMLIRError as err:
            failures[output_type] = err
    documented = _documented_support()
    notes: dict[str, list[OutputType]] = {}  # failure message -> the output types it stopped
    rows = []
    for name, use in uses.items():
        cells = [_support_cell(name, failures[t], documented.get(name) if documented else None, t, notes,
                               is_rule=_lowered_by(use.target) != "torch-mlir")
                 for t in OutputType]
        rows.append([name, str(use.nodes), use.first_at, _lowered_by(use.target), *cells])
    kernel_cells = ["yes" if failures[t] is None else "no" if getattr(failures[t], "target", None) in uses
                    else _note(notes, failures[t], t) for t in OutputType]
    rows.append(["(whole kernel)", "", "", "", *kernel_cells])
    print(f"kernel {target.name} ({target.path}), args: {target.describe_args()}")
    print(table(["op", "nodes", "first at", "lowered by", *(t.value for t in OutputType)], rows))
    print("\nyes: the kernel lowers to that output type; no [n]: its lowering stops at that op;")
    print("(...): not reached, the support table's entry (docs/op-support.md) for ATen ops, ? for the others")
    for number, (message, output_types) in enumerate(notes.items(), start=1):
        print(f"[{number}] {', '.join(t.value for t in output_types)}: {message}")
    return EXIT_OK


def _lowered_by(target: object) -> str:
    """``rules.load_store`` for a target with its own rule, ``torch-mlir`` for ATen/prims ops."""
    if describe_target(target) in rejected_targets():
        return "refused"
    rule = target_rule(target)
    if rule is None:
        return "none"
    return "torch-mlir" if rule is lower_aten_op else rule.__module__.removeprefix("helion_mlir.lowering.")


def _support_cell(name: str, failure: HelionMLIRError | None, documented: dict[str, str] | None,
                  output_type: OutputType, notes: dict[str, list[OutputType]], *, is_rule: bool) -> str:
    if failure is None:
        return "yes"
    if getattr(failure, "target", None) == name:
        return _note(notes, failure, output_type)
    if is_rule or documented is None:
        return "?"
    return f"({documented.get(output_type.value, '?')})"


def _note(notes: dict[str, list[OutputType]], failure: HelionMLIRError, output_type: OutputType) -> str:
    """``no [n]``, with the failure's message as note n (shared by the output types it stopped)."""
    message = first_line(str(failure))
    notes.setdefault(message, []).append(output_type)
    return f"no [{list(notes).index(message) + 1}]"


def _documented_support() -> dict[str, dict[str, str]] | None:
    """{target: {output type: cell}} from docs/op-support.md (variants such as
    ``aten.div.Tensor_mode[floor]`` under their target when they agree), None without it."""
    if not DOC_PATH.is_file():
        return None
    columns, rows, _notes, _source = _op_table(measure=False)
    by_target: dict[str, dict[str, str]] = {}
    for name, cells in rows:
        base = name.split("[", 1)[0]
        entry = dict(zip(columns, (re.sub(r" \[\d+\]", "", c).replace("<br>", "; ") for c in cells)))
        seen = by_target.setdefault(base, entry)
        for column, cell in entry.items():
            if seen[column] != cell:
                seen[column] = "varies"
    return by_target


# ----------------------------------------------------------------------- tables


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns; the last column is not padded."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = []
    for cells in [header, *rows]:
        padded = [str(cell).ljust(width) for cell, width in zip(cells[:-1], widths)]
        lines.append("  ".join([*padded, str(cells[-1])]).rstrip())
    return "\n".join(lines)
