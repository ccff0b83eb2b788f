"""Measure helion-mlir's costs and write them into docs/benchmarks.md.

* Per-node torch-mlir import cost (cold one by one, cold batched, cache hit), in a
  process of its own because it clears the import cache.
* First emission of every example in a fresh process: a process that has imported
  everything forks one child per example, which binds (not timed) and emits (timed).
* Emission of all examples one after another in one process (shared caches) against
  emitting each with every cache cleared first; the import cache's hit rate.
* Memory: a process emitting every example 20 times; its peak must not grow after the
  first round.
* CPU execution time of compiled kernels against torch eager on the examples' ragged
  inputs.
* CPU execution at realistic sizes against torch eager, the fast pipeline's targets
  (``scripts/exec_costs.py``, in a process of its own); ``--only execution`` measures just
  that and replaces its section in the existing document.
* Autotuning on CPU (``scripts/tune_costs.py``, in a process of its own): only with
  ``--only tuning``, which takes one to two hours (a full-effort search per kernel;
  ``--tuning-full KERNEL`` keeps those to the kernels named); the other runs keep the
  section the document has.
* Memory while compiling hundreds of configs of one kernel, as an autotuner does
  (``scripts/compile_memory.py``, in a process of its own); ``--only compile-memory``
  measures just that and replaces its section and its summary row.
* CPU math functions at 4096x1024 against torch eager and Inductor, and a fused residual
  add + RMS norm + GELU kernel (``scripts/math_costs.py``, in a process of its own);
  ``--only math`` measures just that and replaces its section.
* Example kernels at realistic sizes (norms, softmaxes, losses, MLP activations, rotary
  embedding, attention, matmuls with epilogues, bf16 matmul) against torch eager and
  Inductor, with the share of the copy bandwidth and the softmax block-size sweep
  (``scripts/inductor_costs.py``, in a process of its own); ``--only inductor`` measures
  just that and replaces its section.
* Model blocks end to end: a transformer MLP, an attention block and a loss head with our
  kernels between torch's matmuls, against the same blocks in eager and under
  ``torch.compile``, and each kernel's time inside its block against its time alone
  (``scripts/block_costs.py``, in a process of its own); ``--only blocks`` measures just
  that and replaces its section.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))
DOC = ROOT / "docs" / "benchmarks.md"

from compile_memory import SUMMARY_PREFIX, render_compile_memory, summary_row  # noqa: E402  (needs the paths above)
from block_costs import render_blocks  # noqa: E402
from exec_costs import render_execution  # noqa: E402
from inductor_costs import render_inductor  # noqa: E402
from math_costs import render_math  # noqa: E402
from tune_costs import SECTION as TUNING_SECTION  # noqa: E402
from tune_costs import render_tuning  # noqa: E402


def _subprocess_json(code: str) -> object:
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def import_costs() -> list[dict]:
    code = (
        "import json, helion_mlir\n"
        "import sys; sys.path.insert(0, 'scripts')\nfrom import_costs import measure_import_costs\n"
        "rows = [measure_import_costs(t, concrete_size=s, repeats=3) for t in ('linalg-on-tensors', 'stablehlo') for s in (32, None)"
        "]\n"
        "print(json.dumps(rows))"
    )
    return _subprocess_json(code)  # type: ignore[return-value]


def _measured_in_own_process(module: str, function: str, **arguments: Any) -> dict:
    """``module.function(**arguments)``'s data, measured in a process of its own (it sets
    torch's threads); ``arguments`` are plain data."""
    code = (
        "import json, sys; sys.path[:0] = ['scripts', 'tests']\n"
        f"import helion_mlir\nfrom {module} import {function}\n"
        f"print(json.dumps({function}(**json.loads({json.dumps(arguments)!r}))))"
    )
    return _subprocess_json(code)  # type: ignore[return-value]


def execution_costs() -> dict:
    return _measured_in_own_process("exec_costs", "measure_execution")


# Sections measured in processes of their own, each also alone with --only <key>.
SECTIONS = {
    "math": ("math functions against Inductor",
             lambda: render_math(_measured_in_own_process("math_costs", "measure_math"))),
    "inductor": ("examples at realistic sizes against Inductor",
                 lambda: render_inductor(_measured_in_own_process("inductor_costs", "measure_against_inductor"))),
    "blocks": ("model blocks with kernels among torch ops",
               lambda: render_blocks(_measured_in_own_process("block_costs", "measure_blocks"))),
}


def compile_memory() -> dict:
    return _measured_in_own_process("compile_memory", "measure_compile_memory")


def with_compile_memory(document: str, measured: dict) -> str:
    """``document`` with the compile-memory section and its summary row from ``measured``."""
    document = replace_section(document, render_compile_memory(measured["growth"], measured["estimates"]))
    return replace_summary_row(document, summary_row(measured["growth"]), SUMMARY_PREFIX)


def replace_summary_row(document: str, row: str, prefix: str) -> str:
    """``document`` with the summary row that starts with ``prefix`` replaced by ``row``, or
    ``row`` added at the end of the summary table."""
    lines = document.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(prefix):
            lines[index] = row
            return "\n".join(lines) + "\n"
    title = lines.index("## Summary against the targets")
    end = next(i for i in range(title + 3, len(lines)) if not lines[i].startswith("|"))
    lines.insert(end, row)
    return "\n".join(lines) + "\n"


def tuning_costs(full_names: list[str] | None = None) -> dict:
    return _measured_in_own_process("tune_costs", "measure_tuning", full_names=full_names)


def section_of(document: str, title: str) -> str | None:
    """The section of ``document`` titled ``title`` (up to the next ``## ``), or None."""
    if title not in document:
        return None
    after = document.split(title, 1)[1]
    return title + after.split("\n## ", 1)[0].rstrip("\n") + "\n"


def replace_section(document: str, section: str) -> str:
    """``document`` with the section titled like ``section``'s first line replaced (or appended)."""
    title = section.splitlines()[0]
    if title not in document:
        return document.rstrip("\n") + "\n\n" + section
    before, after = document.split(title, 1)
    rest = after.split("\n## ", 1)
    return before + section + ("\n## " + rest[1] if len(rest) > 1 else "")


def first_emissions(repeats: int = 3) -> dict[str, float]:
    """Seconds of the first ``generate_mlir`` call per example, each in a fresh process
    (the median of ``repeats`` processes).

    Importing torch, Helion and torch-mlir takes seconds, so one process imports them and
    forks a child per example: the child starts with nothing emitted and no MLIR context,
    as a new process would after its imports.
    """
    import gc

    import helion_mlir
    from examples_util import example_names, load_example_by_name

    modules = {name: load_example_by_name(name) for name in example_names()}
    # Each child starts right after a full collection, so that a collection pause (see
    # the note in docs/benchmarks.md) does not fall into one example's timed call by chance.
    gc.collect()
    samples: dict[str, list[float]] = {name: [] for name in modules}
    for _ in range(repeats):
        for name, module in modules.items():
            samples[name].append(_first_emission_in_child(helion_mlir, name, module))
    return {name: statistics.median(times) for name, times in samples.items()}


def _first_emission_in_child(helion_mlir: Any, name: str, module: Any) -> float:
    """Fork; the child binds the example (not timed), emits it (timed) and reports."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        bound = module.KERNEL.bind(module.make_args("ragged"))
        started = time.perf_counter()
        helion_mlir.generate_mlir(bound)
        os.write(write, json.dumps(time.perf_counter() - started).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        reported = pipe.read()
    _, status = os.waitpid(child, 0)
    if status != 0 or not reported:
        raise RuntimeError(f"the first emission of {name} failed in its child process")
    return float(reported)


def shared_against_cleared_caches() -> dict:
    """All examples emitted one after another with shared caches, then each with the import
    cache cleared first (the cost without sharing); also the import cache's hit rate."""
    import helion_mlir
    from examples_util import example_names, load_example_by_name
    from helion_mlir.importer.node_importer import clear_import_cache, import_stats

    modules = [load_example_by_name(n) for n in example_names()]
    bound = [m.KERNEL.bind(m.make_args("ragged")) for m in modules]
    for kernel in bound:  # warm-up, so that neither pass pays for first-time costs the other does not
        helion_mlir.generate_mlir(kernel)
    clear_import_cache()
    started = time.perf_counter()
    for kernel in bound:
        helion_mlir.generate_mlir(kernel)
    shared = time.perf_counter() - started
    stats = import_stats()
    cleared = 0.0
    for kernel in bound:
        clear_import_cache()
        started = time.perf_counter()
        helion_mlir.generate_mlir(kernel)
        cleared += time.perf_counter() - started
    return dict(kernels=len(bound), shared_s=shared, cleared_s=cleared, hits=stats.hits, misses=stats.misses,
                lowering_runs=stats.lowering_runs)


def memory_over_rounds(rounds: int = 20, collect: bool = False) -> list[float]:
    """Peak resident memory (MiB) after each round of emitting every example, in a
    process of its own; with ``collect``, a full garbage collection ends each round."""
    code = (
        "import json, resource, sys; sys.path.insert(0, 'tests')\n"
        "import helion_mlir\n"
        "from examples_util import example_names, load_example_by_name\n"
        "mods = [load_example_by_name(n) for n in example_names()]\n"
        "bound = [m.KERNEL.bind(m.make_args('ragged')) for m in mods]\n"
        "peaks = []\n"
        f"for _ in range({rounds}):\n"
        "    for b in bound: helion_mlir.generate_mlir(b)\n"
        + ("    import gc; gc.collect()\n" if collect else "")
        + "    peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
        "print(json.dumps(peaks))"
    )
    return _subprocess_json(code)  # type: ignore[return-value]


def emission_and_execution() -> tuple[list[dict], float]:
    import torch

    import helion_mlir
    from examples_util import example_names, load_example_by_name, register_cpu_matmul_dtype_overloads
    from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel

    register_cpu_matmul_dtype_overloads()
    rows = []
    started_all = time.perf_counter()
    for name in example_names():
        mod = load_example_by_name(name)
        args = mod.make_args("ragged")
        bound = mod.KERNEL.bind(args)
        nodes = sum(1 for g in bound.host_function.device_ir.graphs for n in g.graph.nodes if n.op == "call_function")
        started = time.perf_counter()
        helion_mlir.generate_mlir(bound)
        emit = time.perf_counter() - started
        compiled = compile_kernel(bound)

        mlir = _median_call_seconds(compiled, args)
        eager = _median_call_seconds(mod.reference, args)
        shapes = ", ".join("x".join(map(str, a.shape)) + f" {str(a.dtype).replace('torch.', '')}"
                           for a in args if isinstance(a, torch.Tensor))
        rows.append(dict(name=name, nodes=nodes, emit_ms=emit * 1e3, compile_ms=compiled.compile_seconds * 1e3,
                         mlir_ms=mlir * 1e3, eager_ms=eager * 1e3, shapes=shapes))
    return rows, time.perf_counter() - started_all


def _median_call_seconds(fn, args, repeats: int = 20) -> float:
    """Median time of ``fn`` on fresh copies of ``args`` (kernels may write their inputs)."""
    import torch

    def fresh():
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    fn(*fresh())
    samples = []
    for _ in range(repeats):
        copies = fresh()
        started = time.perf_counter()
        fn(*copies)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def render(imports: list[dict], rows: list[dict], all_seconds: float, first: dict[str, float], sharing: dict,
           memory: dict[str, list[float]]) -> str:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    worst_hit = max(r["cache_hit_ms_per_node"] for r in imports)
    best_batched = min(r["cold_batched_best_ms_per_node"] for r in imports)
    attention = first["attention"] * 1e3
    firsts = sorted(first.values())
    ratio = sharing["cleared_s"] / sharing["shared_s"]
    hit_rate = sharing["hits"] / (sharing["hits"] + sharing["misses"])
    plain, collected = memory["plain"], memory["collected"]
    growth = plain[-1] - plain[0]
    collected_growth = collected[-1] - collected[0]
    lines = [
        "# Benchmarks",
        "",
        f"Measured by `scripts/bench` on {machine} (torch 2.13.0 CPU, torch-mlir 20261001, helion 1.5.1),",
        f"{time.strftime('%Y-%m-%d')}. Medians unless said otherwise; the machine is shared, so read ratios",
        "rather than absolutes.",
        "",
        "## Summary against the targets",
        "",
        "| target | measured | |",
        "|---|---|---|",
        f"| first emission of a flash-attention kernel (16 ATen nodes) in a fresh process <= 100 ms "
        f"| {attention:.0f} ms | {'met' if attention <= 100 else 'missed'} |",
        f"| all examples with shared caches >= 5x faster than each with the import cache cleared "
        f"| {ratio:.1f}x | {'met' if ratio >= 5 else 'missed'} |",
        f"| cold batched import <= 1 ms per node | {best_batched:.2f} ms | {'met' if best_batched <= 1 else 'missed'} |",
        f"| cache hit <= 0.05 ms per node | {worst_hit:.3f} ms | {'met' if worst_hit <= 0.05 else 'missed'} |",
        f"| peak memory over 20 rounds of every example does not grow after the first (tolerance 1 MiB) "
        f"| +{growth:.1f} MiB (+{collected_growth:.1f} MiB with a collection per round) "
        f"| {'met' if growth <= 1.0 else 'missed'} |",
        "",
        "## Per-node import cost (torch-mlir import + pipelines)",
        "",
        "Realistic ATen nodes from four kernels (`scripts/import_costs.py`), import cache cleared before",
        "each cold round.",
        "",
        "| output type | sizes | nodes | distinct | cold, one by one (ms/node) | cold, batched (ms/node) | cache hit (ms/node) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in imports:
        lines.append(
            f"| {r['output_type']} | {r['sizes']} | {r['nodes']} | {r['distinct_signatures']} | "
            f"{r['cold_single_ms_per_node']:.2f} | {r['cold_batched_ms_per_node']:.2f} (best {r['cold_batched_best_ms_per_node']:.2f}) | "
            f"{r['cache_hit_ms_per_node']:.3f} |"
        )
    lines += [
        "",
        "A batch costs about 1.2 ms per distinct function in torch-mlir's pipelines alone (the",
        "backend-contract pipeline, then the backend's), plus building, importing and printing each",
        "node's graph; that is why the cold batched cost stays above 1 ms per node. `generate_mlir`",
        "queues every ATen node of a kernel and lowers them all with one pipeline run.",
        "",
        "## Emission (`generate_mlir`, linalg-on-tensors)",
        "",
        f"First emission in a fresh process (after imports, excluding `bind`; median of 3 processes), over the {len(first)} examples:",
        f"median {statistics.median(firsts) * 1e3:.0f} ms, slowest {firsts[-1] * 1e3:.0f} ms "
        f"({max(first, key=first.get)}); per kernel in the table below.",
        "A first call also creates the process's MLIR context, parses the pass pipelines and pays",
        "torch's first-time costs of fake-tensor dispatch (reductions over the in-bounds lanes of a",
        "ragged tile have a dynamic size), none of which later calls pay.",
        "",
        f"All {sharing['kernels']} examples one after another in one process, shared caches: "
        f"{sharing['shared_s']:.2f} s; each with the import cache cleared first: {sharing['cleared_s']:.2f} s "
        f"({ratio:.1f}x).",
        f"Import cache across the examples: {sharing['hits']} hits, {sharing['misses']} misses "
        f"(hit rate {hit_rate:.0%}), {sharing['lowering_runs']} pipeline runs.",
        "Sharing pays little because a kernel's cold emission is already cheap: its ATen nodes",
        "take one pipeline run together, and what remains (visiting the graphs, inlining,",
        "verifying the module) is paid with or without the cache.",
        "",
        "Garbage collection: with torch, Helion and torch-mlir loaded a process holds about half a",
        "million objects, and a full collection of them takes about 0.3 s here; it falls into",
        "whichever call happens to allocate at the time. Calling `gc.freeze()` after the imports",
        "takes those objects out of collection and removes the pause.",
        "",
        "## Memory",
        "",
        f"Peak resident memory of one process emitting every example 20 times: {plain[0]:.1f} MiB after",
        f"the first round, {plain[-1]:.1f} MiB after the last (rounds 2-20 add {growth:.1f} MiB). With a full",
        f"garbage collection at the end of each round: {collected[0]:.1f} MiB, then {collected[-1]:.1f} MiB",
        f"(+{collected_growth:.1f} MiB). Caches are bounded by what they key on (distinct node signatures,",
        "kernels and configs), and an emission leaves no long-lived cyclic garbage (stand-in nodes live",
        "in short-lived scratch graphs that young-generation collections free).",
        "",
        "## CPU execution of the examples against torch eager",
        "",
        "Compiled with `compile_kernel` (linalg-on-tensors, fast pipeline, LLVM JIT at O2); the examples'",
        "small ragged inputs, so this measures per-call costs more than throughput (realistic sizes are in",
        "the next section); time per call including the kernel's host code. `ratio` = MLIR time / eager",
        "time. `first emit` is the fresh-process emission above; `emit` the emission in the shared process.",
        "",
        "| kernel | inputs | nodes | first emit (ms) | emit (ms) | compile (ms) | MLIR (ms) | eager (ms) | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['shapes']} | {r['nodes']} | {first[r['name']] * 1e3:.0f} | {r['emit_ms']:.0f} | "
            f"{r['compile_ms']:.0f} | {r['mlir_ms']:.3f} | {r['eager_ms']:.3f} | {r['mlir_ms'] / r['eager_ms']:.1f} |"
        )
    lines += ["", f"Emitting, compiling and running all {len(rows)} examples in one process took {all_seconds:.1f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=DOC)
    parser.add_argument("--only", choices=["execution", "tuning", "compile-memory", *SECTIONS],
                        help="measure only this section and replace it in the existing output")
    parser.add_argument("--tuning-full", action="append", metavar="KERNEL",
                        help="with --only tuning: tune only this kernel (a row name of scripts/tune_costs.py) at "
                             "full effort as well; repeatable; default: every kernel (minutes each)")
    options = parser.parse_args()
    if options.only == "compile-memory":
        print("measuring memory while compiling many configs...", file=sys.stderr)
        options.output.write_text(with_compile_memory(options.output.read_text(), compile_memory()))
        print(f"updated {options.output}", file=sys.stderr)
        return
    if options.only in SECTIONS:
        what, measure = SECTIONS[options.only]
        print(f"measuring {what}...", file=sys.stderr)
        options.output.write_text(replace_section(options.output.read_text(), measure()))
        print(f"updated {options.output}", file=sys.stderr)
        return
    if options.only == "tuning":
        print("measuring autotuning (quick, full and a sweep per kernel: one to two hours)...", file=sys.stderr)
        tuning = render_tuning(tuning_costs(options.tuning_full))
        options.output.write_text(replace_section(options.output.read_text(), tuning))
        print(f"updated {options.output}", file=sys.stderr)
        return
    print("measuring execution at realistic sizes...", file=sys.stderr)
    execution = render_execution(execution_costs())
    if options.only == "execution":
        options.output.write_text(replace_section(options.output.read_text(), execution))
        print(f"updated {options.output}", file=sys.stderr)
        return
    print("measuring import costs...", file=sys.stderr)
    imports = import_costs()
    print("measuring memory over 20 rounds...", file=sys.stderr)
    memory = {"plain": memory_over_rounds(), "collected": memory_over_rounds(collect=True)}
    print("measuring first emissions (one fresh process per example)...", file=sys.stderr)
    first = first_emissions()
    print("measuring shared against cleared caches...", file=sys.stderr)
    sharing = shared_against_cleared_caches()
    print("measuring emission and execution of every example...", file=sys.stderr)
    rows, all_seconds = emission_and_execution()
    document = replace_section(render(imports, rows, all_seconds, first, sharing, memory), execution)
    for what, measure in SECTIONS.values():
        print(f"measuring {what}...", file=sys.stderr)
        document = replace_section(document, measure())
    kept = section_of(options.output.read_text(), TUNING_SECTION) if options.output.exists() else None
    if kept is not None:
        document = replace_section(document, kept)
    print("measuring memory while compiling many configs...", file=sys.stderr)
    options.output.write_text(with_compile_memory(document, compile_memory()))
    print(f"wrote {options.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
