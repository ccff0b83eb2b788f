"""The conformance runner's reports: the JSON report, its markdown tables and the console summary."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import conformance_classify as kinds

BEGIN, END = "<!-- conformance-results:begin -->", "<!-- conformance-results:end -->"
_TITLES = {
    kinds.PASSED: "passed", kinds.WRONG_NUMBERS: "wrong numbers", kinds.ASSERTION_FAILED: "assertion failed",
    kinds.TYPED_REFUSAL: "typed refusal", kinds.OTHER_ERROR: "other error",
    kinds.ACCELERATOR_ONLY: "accelerator only", kinds.VERSION_SKEW: "version skew", kinds.CRASH: "crash",
    kinds.TIMEOUT: "timeout", kinds.NOT_RUN: "not run", kinds.SKIPPED: "skipped",
}
_MAX_MARKDOWN_REASON = 220


@dataclass
class ModuleRun:
    """One module in one column: its tests' outcomes and what happened to its processes."""

    module: str
    column: str
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    collect_errors: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    elapsed_s: float = 0.0
    log: str = ""


def _counts(outcomes: list[dict[str, Any]]) -> dict[str, int]:
    counter = collections.Counter(outcome["kind"] for outcome in outcomes)
    return {kind: counter.get(kind, 0) for kind in kinds.KINDS}


def build_report(runs: list[ModuleRun], modules: list[str], columns: tuple[str, ...],
                 environment: dict[str, Any]) -> dict[str, Any]:
    """The JSON report: environment, totals per column, per-module counts and every test's outcomes."""
    by_key = {(run.module, run.column): run for run in runs}
    tests: list[dict[str, Any]] = []
    module_rows = []
    for module in modules:
        module_runs = {column: by_key[(module, column)] for column in columns if (module, column) in by_key}
        ids: list[str] = []
        for run in module_runs.values():
            ids.extend(i for i in [*run.order, *run.outcomes] if i not in ids)
        for nodeid in ids:
            entry = {"id": nodeid, "module": module}
            for column, run in module_runs.items():
                entry[column] = run.outcomes.get(nodeid, {"kind": kinds.NOT_RUN, "reason": "not collected",
                                                          "error_type": None, "origin": None})
            tests.append(entry)
        rows = [t for t in tests if t["module"] == module]
        module_rows.append({
            "module": module, "tests": len(rows),
            "counts": {c: _counts([t[c] for t in rows]) for c in module_runs},
            "neutralized": {c: sum(t[c].get("neutralized", 0) for t in rows) for c in module_runs},
            "elapsed_s": {c: run.elapsed_s for c, run in module_runs.items()},
            "restarts": {c: run.restarts for c, run in module_runs.items()},
            "collect_errors": {c: run.collect_errors for c, run in module_runs.items() if run.collect_errors},
            "logs": {c: run.log for c, run in module_runs.items()},
        })
    totals = {}
    for column in columns:
        outcomes = [t[column] for t in tests if column in t]
        totals[column] = {"tests": len(outcomes), **_counts(outcomes),
                          "neutralized": sum(o.get("neutralized", 0) for o in outcomes),
                          "collect_errors": sum(len(r["collect_errors"].get(column, [])) for r in module_rows)}
    return {"environment": environment, "columns": list(columns), "kinds": list(kinds.KINDS),
            "totals": totals, "modules": module_rows, "tests": tests}


def merge_reports(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` with the modules ``update`` ran replaced by ``update``'s (a module run again after a
    change); totals recounted, and the environment records which modules came from which run."""
    replaced = {row["module"] for row in update["modules"]}
    modules = [next(r for r in update["modules"] if r["module"] == row["module"]) if row["module"] in replaced
               else row for row in base["modules"]]
    modules += [row for row in update["modules"] if row["module"] not in {r["module"] for r in base["modules"]}]
    order = [row["module"] for row in modules]
    tests = [t for t in base["tests"] if t["module"] not in replaced] + update["tests"]
    tests.sort(key=lambda t: order.index(t["module"]))
    totals = {}
    for column in base["columns"]:
        outcomes = [t[column] for t in tests if column in t]
        totals[column] = {"tests": len(outcomes), **_counts(outcomes),
                          "neutralized": sum(o.get("neutralized", 0) for o in outcomes),
                          "collect_errors": sum(len(r["collect_errors"].get(column, [])) for r in modules)}
    environment = dict(base["environment"])
    environment["rerun"] = [*environment.get("rerun", []),
                            {"modules": sorted(replaced), "started": update["environment"]["started"],
                             "elapsed_s": update["environment"]["elapsed_s"],
                             "memory_limit_gb": update["environment"].get("memory_limit_gb")}]
    return {**base, "environment": environment, "totals": totals, "modules": modules, "tests": tests}


def progress_line(run: ModuleRun) -> str:
    counts = _counts(list(run.outcomes.values()))
    shown = ", ".join(f"{n} {_TITLES[k]}" for k, n in counts.items() if n)
    errors = f", module error: {run.collect_errors[0]['reason']}" if run.collect_errors else ""
    return f"[{run.column}] test_{run.module}: {shown or 'no tests'}{errors} ({run.elapsed_s:.0f} s)"


def summary_text(report: dict[str, Any]) -> str:
    lines = []
    for column, total in report["totals"].items():
        shown = ", ".join(f"{total[k]} {_TITLES[k]}" for k in kinds.KINDS if total[k])
        lines.append(f"{column}: {total['tests']} tests: {shown}; {total['neutralized']} code assertions "
                     f"neutralized; {total['collect_errors']} modules not importable")
    lines.append(f"wall time {report['environment']['elapsed_s'] / 60:.1f} min")
    return "\n".join(lines)


def _cell(text: str) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")
    return text if len(text) <= _MAX_MARKDOWN_REASON else text[: _MAX_MARKDOWN_REASON - 3] + "..."


def _shown_kinds(report: dict[str, Any]) -> list[str]:
    """Every kind some column counts, and always passed, the failures' main kinds and skipped."""
    always = {kinds.PASSED, kinds.WRONG_NUMBERS, kinds.TYPED_REFUSAL, kinds.OTHER_ERROR, kinds.CRASH, kinds.SKIPPED}
    return [k for k in kinds.KINDS if k in always or any(t[k] for t in report["totals"].values())]


def markdown(report: dict[str, Any]) -> str:
    """The results section: totals, a table per module, skip reasons and one line per failing test."""
    env, columns = report["environment"], report["columns"]
    shown = _shown_kinds(report)
    head = (f"Run of {env['started']}: Helion checkout `{env['helion_commit'] or 'unknown commit'}`, installed "
            f"helion {env['helion_installed']}, output type `{env['output_type']}`, pipeline `{env['pipeline']}`, "
            f"autotune effort `{env['autotune_effort']}`, test helpers see backend `{env['tests_backend']}`"
            + (f", `-k {env['keyword']}`" if env.get("keyword") else "")
            + f"; wall time {env['elapsed_s'] / 60:.1f} min with {env['jobs']} module process(es) at a time."
            + "".join(f" Modules {', '.join(r['modules'])} run again at {r['started']} ({r['elapsed_s'] / 60:.1f} min)"
                      + (f" with a {r['memory_limit_gb']:g} GiB memory limit." if r.get("memory_limit_gb") else ".")
                      for r in env.get("rerun", [])))
    out = [BEGIN, head, "", "### Totals", "",
           "| column | tests | " + " | ".join(_TITLES[k] for k in shown) + " | code assertions neutralized |",
           "|---" * (len(shown) + 3) + "|"]
    for column in columns:
        total = report["totals"][column]
        name = "mlir backend" if column == "mlir" else "Helion ref mode (control)"
        out.append(f"| {name} | {total['tests']} | " + " | ".join(str(total[k]) for k in shown)
                   + f" | {total['neutralized']} |")
    out += ["", "### Per module", "",
            "mlir backend; the last columns are Helion's reference mode on the same tests.", "",
            "| module | tests | " + " | ".join(_TITLES[k] for k in shown) + " | neutralized | time (s) |"
            + ("" if "ref" not in columns else " ref passed | ref failed | ref skipped |"),
            "|---" * (len(shown) + 4 + (3 if "ref" in columns else 0)) + "|"]
    for row in report["modules"]:
        counts = row["counts"].get("mlir") or {k: 0 for k in kinds.KINDS}
        line = (f"| {row['module']} | {row['tests']} | " + " | ".join(str(counts[k]) for k in shown)
                + f" | {row['neutralized'].get('mlir', 0)} | {row['elapsed_s'].get('mlir', 0):.0f} |")
        if "ref" in columns:
            ref = row["counts"].get("ref") or {k: 0 for k in kinds.KINDS}
            failed = sum(ref[k] for k in kinds.FAILURE_KINDS)
            line += f" {ref[kinds.PASSED]} | {failed} | {ref[kinds.SKIPPED]} |"
        out.append(line)
    out += _module_errors(report) + _skip_reasons(report) + _failures(report) + [END]
    return "\n".join(out) + "\n"


def _module_errors(report: dict[str, Any]) -> list[str]:
    lines = []
    for row in report["modules"]:
        for column, errors in row["collect_errors"].items():
            for error in errors:
                lines.append(f"- test_{row['module']} ({column}): {error['kind']}: {_cell(error['reason'])}")
    return ["", "### Modules that could not be imported", "", *lines] if lines else []


def _skip_reasons(report: dict[str, Any]) -> list[str]:
    reasons = collections.Counter(_cell(t["mlir"]["reason"]) for t in report["tests"]
                                  if t.get("mlir", {}).get("kind") == kinds.SKIPPED)
    if not reasons:
        return []
    return ["", "### Why tests were skipped (mlir backend)", "",
            *(f"- {n} x {reason}" for reason, n in reasons.most_common())]


def _failures(report: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    module = None
    for test in report["tests"]:
        outcome = test.get("mlir")
        if outcome is None or outcome["kind"] not in kinds.FAILURE_KINDS:
            continue
        if test["module"] != module:
            module = test["module"]
            lines += ["", f"#### test_{module}", ""]
        where = ", ".join(x for x in (outcome.get("origin"), outcome.get("error_type")) if x)
        ref = test.get("ref", {}).get("kind")
        name = test["id"].split("::", 1)[-1]
        lines.append(f"- `{name}`: {_TITLES[outcome['kind']]}" + (f" ({where})" if where else "")
                     + f": {_cell(outcome['reason'])}" + (f" [ref: {_TITLES[ref]}]" if ref else ""))
    return ["", "### Failing tests (mlir backend)", "",
            "One line each: kind (where the exception came from, its type): the error's first line "
            "[the same test in ref mode].", *lines] if lines else []


def write_markdown(report: dict[str, Any], path: Path) -> None:
    """Write the results section to ``path``, replacing the text between the markers if it has them."""
    section = markdown(report)
    if path.exists():
        text = path.read_text()
        if BEGIN in text and END in text:
            before, rest = text.split(BEGIN, 1)
            after = rest.split(END, 1)[1]
            path.write_text(before + section.rstrip("\n") + after)
            return
    path.write_text(section)
