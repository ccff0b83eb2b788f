"""Run Helion's own test modules on CPU through helion_mlir and report conformance.

``python scripts/helion_conformance.py HELION_CHECKOUT [--modules a,b] [-k EXPR] [--report FILE]
[--markdown FILE]`` (``--from-report FILE [--merge LATER] --markdown FILE`` renders an earlier run's report,
with modules run again taken from a later one): each ``HELION_CHECKOUT/test/test_<module>.py`` runs under pytest in a process of
its own, with :mod:`conformance_plugin` loaded, once with the ``mlir`` backend and once in Helion's
reference mode (``HELION_INTERPRET=1``) as a control. A process that dies (a crash, or a test
past the per-test limit) is recorded against the test it was running and started again after
it; a module past its time limit is stopped. docs/conformance.md describes the kinds of outcome
and the reports.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import importlib.metadata
import importlib.util
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import conformance_classify as kinds  # noqa: E402
import conformance_report  # noqa: E402
from conformance_report import ModuleRun  # noqa: E402
from conformance_plugin import (  # noqa: E402
    PIPELINE_ENV, RESULTS_ENV, SKIP_IDS_ENV, TESTS_BACKEND_ENV, TIMEOUT_ENV, TIMEOUT_EXIT_CODE)

DEFAULT_MODULES = (
    "associative_scan", "atomic_ops", "autodiff", "barrier", "broadcasting", "closures", "constexpr",
    "control_flow", "custom_op", "dot", "generate_ast", "graph_module", "grid", "indexing", "int64_indexing",
    "jagged_tile", "loop_dependencies", "loops", "masking", "matmul", "misc", "persistent_kernels", "random",
    "reduce", "reductions", "register_tunable", "rng", "specialize", "stack_tensor", "unroll_tuples", "views",
    "zero_size",
)
COLUMNS = ("mlir", "ref")
MAX_RESTARTS = 40
_CRASH_MARKERS = ("Fatal Python error", "LLVM ERROR", "Segmentation fault", "terminate called", "Aborted",
                  "Assertion `", "double free", "corrupted")


@dataclass
class Options:
    checkout: Path
    modules: list[str]
    keyword: str | None
    output_type: str
    pipeline: str
    module_timeout: float
    test_timeout: float
    autotune_effort: str
    columns: tuple[str, ...]
    tests_backend: str
    memory_limit_gb: float
    work_dir: Path
    python: str
    verbose: bool = False


def _environment(options: Options, column: str, results: Path, skip_ids: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "HELION_BACKEND": "mlir",
        "HELION_MLIR_OUTPUT_TYPE": options.output_type,
        "HELION_MLIR_CHECKED": "1" if options.pipeline == "checked" else "0",
        PIPELINE_ENV: "fast" if options.pipeline == "checked" else options.pipeline,
        "HELION_AUTOTUNE_EFFORT": options.autotune_effort,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONSAFEPATH": "1",  # the checkout's own helion/ must not shadow the installed package
        RESULTS_ENV: str(results),
        SKIP_IDS_ENV: str(skip_ids),
        TIMEOUT_ENV: str(options.test_timeout),
        TESTS_BACKEND_ENV: options.tests_backend,
        "PYTHONPATH": os.pathsep.join(p for p in (str(SCRIPTS), env.get("PYTHONPATH", "")) if p),
    })
    env.pop("HELION_INTERPRET", None)
    if column == "ref":
        env["HELION_INTERPRET"] = "1"
    return env


def _command(options: Options, module: str) -> list[str]:
    cmd = [options.python, "-m", "pytest", "-p", "conformance_plugin", "-p", "no:cacheprovider",
           "-p", "no:xdist", "-p", "no:randomly", "-s", "-q", "--import-mode=importlib",
           "--rootdir", str(options.checkout), "--confcutdir", str(options.checkout),
           str(options.checkout / "test" / f"test_{module}.py")]
    if options.keyword:
        cmd += ["-k", options.keyword]
    return cmd


def _read_records(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    if not path.exists():
        return [], offset
    with path.open(encoding="utf-8") as stream:
        stream.seek(offset)
        text = stream.read()
    complete = text[: text.rfind("\n") + 1]
    records = [json.loads(line) for line in complete.splitlines() if line.strip()]
    return records, offset + len(complete.encode("utf-8"))


def _crash_reason(returncode: int | None, log_tail: str) -> str:
    if returncode is not None and returncode < 0:
        try:
            how = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
        if returncode == -signal.SIGKILL:
            how += " (by the out-of-memory killer?)"
    else:
        how = f"exited with status {returncode}"
    lines = log_tail.splitlines()
    for n, line in enumerate(lines):
        markers = [line.index(m) for m in _CRASH_MARKERS if m in line]
        if markers:
            clue = line[min(markers):].strip()
            following = lines[n + 1].strip() if n + 1 < len(lines) else ""
            if following.startswith("what():"):  # a C++ exception's message
                clue += f" ({following})"
            return f"process {how}: {clue}"
    return f"process {how}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1].removeprefix("INTERNALERROR>").strip() if lines else ""


def _limit_memory(gigabytes: float) -> None:
    """Cap the module process's address space: a test allocating past it gets an allocation error
    instead of the machine's out-of-memory killer (which may pick another process)."""
    if gigabytes > 0:
        limit = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _run_once(options: Options, run: ModuleRun, results: Path, skip_ids: Path, log_path: Path,
              deadline: float) -> int | None:
    skip_ids.write_text("\n".join(run.outcomes))
    with log_path.open("a", encoding="utf-8") as log:
        proc = subprocess.Popen(_command(options, run.module), cwd=options.work_dir, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=_environment(options, run.column, results, skip_ids), start_new_session=True,
                                preexec_fn=functools.partial(_limit_memory, options.memory_limit_gb))
        try:
            return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


def run_module(options: Options, module: str, column: str) -> ModuleRun:
    """Run one test module in one column until every test has an outcome or its time is up."""
    run = ModuleRun(module, column)
    stem = options.work_dir / f"{column}-{module}"
    results, skip_ids, log_path = (stem.with_suffix(s) for s in (".jsonl", ".skip", ".log"))
    for path in (results, log_path):
        path.unlink(missing_ok=True)
    start = time.monotonic()
    deadline, offset = start + options.module_timeout, 0
    while True:
        log_start = log_path.stat().st_size if log_path.exists() else 0
        returncode = _run_once(options, run, results, skip_ids, log_path, deadline)
        records, offset = _read_records(results, offset)
        running = _absorb(run, records)
        if returncode is None:
            _finish_after_time_limit(run, running, options.module_timeout)
            break
        with log_path.open(encoding="utf-8", errors="replace") as stream:  # this process's output
            stream.seek(log_start)
            tail = stream.read()[-20000:]
        if running is not None:
            run.outcomes[running] = {"kind": kinds.CRASH, "reason": _crash_reason(returncode, tail),
                                     "error_type": None, "origin": None}
        if running is None and returncode != TIMEOUT_EXIT_CODE:
            if returncode not in (0, 1, 5) and not run.outcomes and not run.collect_errors:
                run.collect_errors.append({"path": module, "kind": kinds.OTHER_ERROR, "error_type": None,
                                           "origin": "pytest", "reason": f"pytest exited with {returncode}: "
                                           + _last_line(tail)})
            break
        run.restarts += 1
        if run.restarts > MAX_RESTARTS:
            _finish_after_time_limit(run, None, options.module_timeout, why="too many restarts")
            break
    run.elapsed_s = round(time.monotonic() - start, 1)
    run.log = str(log_path)
    return run


def _absorb(run: ModuleRun, records: list[dict[str, Any]]) -> str | None:
    """Take a process's records into ``run``; the test it was running when it stopped, if any."""
    running = None
    for record in records:
        event = record.pop("event")
        if event == "collected":
            run.order.extend(n for n in record["nodeids"] if n not in run.order)
        elif event == "collect_error":
            run.collect_errors.append(record)
        elif event == "start":
            running = record["nodeid"]
        elif event == "result":
            run.outcomes[record.pop("nodeid")] = record
            running = None
    return running


def _finish_after_time_limit(run: ModuleRun, running: str | None, limit: float, why: str = "") -> None:
    why = why or f"module time limit ({limit:g} s)"
    if running is not None:
        run.outcomes[running] = {"kind": kinds.TIMEOUT, "reason": f"still running at the {why}",
                                 "error_type": None, "origin": None}
    for nodeid in run.order:
        run.outcomes.setdefault(nodeid, {"kind": kinds.NOT_RUN, "reason": f"not reached: {why}",
                                         "error_type": None, "origin": None})


def _describe_environment(options: Options, commit: str | None) -> dict[str, Any]:
    spec = importlib.util.find_spec("helion_mlir")
    try:
        helion_version = importlib.metadata.version("helion")
    except importlib.metadata.PackageNotFoundError:
        helion_version = None
    if commit is None:
        probe = subprocess.run(["git", "-C", str(options.checkout), "rev-parse", "HEAD"], capture_output=True,
                               text=True, check=False)
        commit = probe.stdout.strip() if probe.returncode == 0 else None
    return {"helion_checkout": str(options.checkout), "helion_commit": commit,
            "helion_installed": helion_version,
            "helion_mlir": str(Path(spec.origin).parent) if spec and spec.origin else None,
            "output_type": options.output_type, "pipeline": options.pipeline,
            "autotune_effort": options.autotune_effort, "keyword": options.keyword,
            "tests_backend": options.tests_backend, "memory_limit_gb": options.memory_limit_gb,
            "module_timeout_s": options.module_timeout, "test_timeout_s": options.test_timeout}


def run_all(options: Options, jobs: int, commit: str | None = None) -> dict[str, Any]:
    """Every module in every column; the JSON report (conformance_report.build_report)."""
    options.work_dir.mkdir(parents=True, exist_ok=True)
    started, start = time.strftime("%Y-%m-%d %H:%M:%S"), time.monotonic()
    tasks = [(module, column) for module in options.modules for column in options.columns]
    runs: list[ModuleRun] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run_module, options, m, c): (m, c) for m, c in tasks}
        for future in concurrent.futures.as_completed(futures):
            run = future.result()
            runs.append(run)
            print(conformance_report.progress_line(run), flush=True)
    environment = _describe_environment(options, commit)
    environment.update(started=started, elapsed_s=round(time.monotonic() - start, 1), jobs=jobs)
    return conformance_report.build_report(runs, options.modules, options.columns, environment)


def _parse(argv: list[str]) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="a pytorch/helion checkout (its test/ is run)")
    parser.add_argument("--modules", action="append",
                        help="comma-separated module names (test_<name>.py); default: the semantic modules")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression, passed through")
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    parser.add_argument("--markdown", type=Path,
                        help="write the results as markdown here (between the result markers if the file has them)")
    parser.add_argument("--output-type", default="linalg-on-tensors",
                        choices=("linalg-on-tensors", "tosa", "stablehlo", "raw"))
    parser.add_argument("--pipeline", default="fast", choices=("fast", "plain", "checked"))
    parser.add_argument("--no-ref", action="store_true", help="leave out the reference-mode control column")
    parser.add_argument("--jobs", type=int, default=1, help="module processes side by side (default 1)")
    parser.add_argument("--module-timeout", type=float, default=1800.0, help="seconds per module (default 1800)")
    parser.add_argument("--test-timeout", type=float, default=300.0, help="seconds per test (default 300)")
    parser.add_argument("--autotune-effort", default="none", choices=("none", "quick", "full"),
                        help="HELION_AUTOTUNE_EFFORT for kernels the tests call without a config (default none)")
    parser.add_argument("--tests-backend", default="triton", choices=("triton", "mlir"),
                        help="the backend Helion's test helpers (skip conditions, onlyBackends) see (default triton)")
    parser.add_argument("--memory-limit", type=float, default=16.0,
                        help="address space of a module process, in GiB (default 16; 0: none)")
    parser.add_argument("--helion-commit", help="the checkout's commit, when it is not a git work tree")
    parser.add_argument("--work-dir", type=Path, help="keep each module's records and log here")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the module processes")
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    if not (checkout / "test").is_dir():
        parser.error(f"{checkout} has no test/ directory: not a pytorch/helion checkout")
    modules = [m.strip().removeprefix("test_").removesuffix(".py") for group in (args.modules or [])
               for m in group.split(",") if m.strip()] or list(DEFAULT_MODULES)
    missing = [m for m in modules if not (checkout / "test" / f"test_{m}.py").exists()]
    if missing:
        parser.error(f"no test module for: {', '.join(missing)}")
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="helion-conformance-"))
    options = Options(checkout, modules, args.keyword, args.output_type, args.pipeline, args.module_timeout,
                      args.test_timeout, args.autotune_effort, ("mlir",) if args.no_ref else COLUMNS,
                      args.tests_backend, args.memory_limit, work_dir.resolve(), args.python)
    return options, args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--from-report"]:
        return _render(argv[1:])
    options, args = _parse(argv)
    print(f"records and logs in {options.work_dir}", flush=True)
    report = run_all(options, args.jobs, args.helion_commit)
    if args.report:
        args.report.write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        conformance_report.write_markdown(report, args.markdown)
    print(conformance_report.summary_text(report))
    return 0


def _render(argv: list[str]) -> int:
    """``--from-report REPORT.json [--merge LATER.json] [--output FILE] [--markdown FILE]``: the summary
    and markdown of an earlier run, with the modules a later run covered taken from it."""
    parser = argparse.ArgumentParser(prog="helion_conformance --from-report")
    parser.add_argument("report", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--merge", type=Path, help="a later report whose modules replace the report's")
    parser.add_argument("--output", type=Path, help="write the (merged) report here")
    args = parser.parse_args(argv)
    report = json.loads(args.report.read_text())
    if args.merge:
        report = conformance_report.merge_reports(report, json.loads(args.merge.read_text()))
    if args.output:
        args.output.write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        conformance_report.write_markdown(report, args.markdown)
    print(conformance_report.summary_text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
