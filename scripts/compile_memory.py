"""Memory while compiling many configs, as an autotuner does, and the estimates the caches weigh by.

* ``measure_growth()``: one matmul (512x512 by 512x512, float32) compiled with
  ``compile_kernel`` for 96 configs of distinct block sizes (every power-of-two tiling Helion
  accepts with tiles of 16 to 128 by 16 to 512), each called once and checked
  against torch; every 25 configs, the process's resident memory after a collection, what
  the caches of compiled functions and kernels hold (entries, estimated bytes) and how many
  ExecutionEngines are alive.
* ``measure_estimates()``: the caches weigh each entry by an estimate of the memory it holds;
  here each estimate meets a measurement. An ExecutionEngine: 8 engines of one module kept
  alive, their resident memory (glibc's free memory trimmed before each reading) over 8,
  against ``engine_bytes`` of the module's LLVM-dialect op count, over a sample of the
  examples. A compiled kernel besides its engine: the Python memory (tracemalloc) it
  releases when dropped, against its estimate.

Run it in a process of its own (``python scripts/compile_memory.py`` prints the section
for docs/benchmarks.md; ``scripts/bench --only compile-memory`` writes it there). Takes a few
minutes on 2 cores.
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import json
import statistics
import sys
import time
import tracemalloc
import weakref
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import helion  # noqa: E402
import torch  # noqa: E402
from examples_util import example_names, load_example_by_name, register_cpu_matmul_dtype_overloads  # noqa: E402

from helion_mlir import compile_kernel, generate_mlir  # noqa: E402
from helion_mlir.importer.cache import IMPORT_CACHE  # noqa: E402
from helion_mlir.lowering import kernel_model  # noqa: E402
from helion_mlir.runtime.cpu import engine  # noqa: E402
from helion_mlir.runtime.kernel import compiled_kernel  # noqa: E402

__all__ = ["CONFIGS", "SUMMARY_PREFIX", "TARGET_MB", "measure_estimates", "measure_growth", "render_compile_memory",
           "summary_row"]

CONFIGS = 96
TARGET_MB = 150  # resident memory growth over CONFIGS compiled configs
SUMMARY_PREFIX = "| resident memory growth over "
_BLOCKS_MN = (16, 32, 64, 128)  # powers of two from Helion's minimum for a matmul tile
_BLOCKS_K = (16, 32, 64, 128, 256, 512)
_LIBC = ctypes.CDLL(None)


def _resident_mib(trim: bool = False) -> float:
    gc.collect()
    if trim:
        _LIBC.malloc_trim(0)
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def _matmul_configs(count: int) -> list[helion.Config]:
    sizes = itertools.product(_BLOCKS_MN, _BLOCKS_MN, _BLOCKS_K)
    return [helion.Config(block_sizes=list(s)) for s in itertools.islice(sizes, count)]


def measure_growth(count: int = CONFIGS, every: int = 25) -> dict[str, Any]:
    """Resident memory and cache contents while ``count`` configs of a matmul are compiled."""
    x, y = torch.randn(512, 512), torch.randn(512, 512)
    expected = x @ y
    bound = load_example_by_name("matmul").KERNEL.bind((x, y))
    configs = _matmul_configs(count)
    compile_kernel(bound, config=configs[0])(x, y)  # first-time costs (MLIR context, OpenMP) before the baseline
    compiled_kernel._CACHE.clear()
    engine.clear_compile_cache()
    start = _resident_mib(trim=True)  # free memory returned first, so the baseline is what is in use
    engines: list[weakref.ref] = []
    rows = []
    started = time.perf_counter()
    for index, config in enumerate(configs, 1):
        compiled = compile_kernel(bound, config=config)
        torch.testing.assert_close(compiled(x, y), expected, rtol=1e-4, atol=1e-3)
        engines.append(weakref.ref(compiled.function._engine))  # type: ignore[union-attr]
        del compiled
        if index % every == 0:
            rows.append(dict(
                configs=index,
                growth_mib=_resident_mib() - start,
                functions=len(engine._CACHE), functions_mib=engine._CACHE.weight / 2**20,
                kernels=len(compiled_kernel._CACHE), kernels_mib=compiled_kernel._CACHE.weight / 2**20,
                imports=IMPORT_CACHE.stats().entries,
                engines_alive=sum(ref() is not None for ref in engines),
            ))
    seconds = time.perf_counter() - started
    compiled_kernel._CACHE.clear()
    engine.clear_compile_cache()
    after_clear = _resident_mib() - start
    after_trim = _resident_mib(trim=True) - start
    return dict(rows=rows, start_mib=start, seconds=seconds, after_clear_mib=after_clear, after_trim_mib=after_trim,
                function_budget_mib=engine.COMPILED_FUNCTION_CACHE_BYTES / 2**20,
                kernel_budget_mib=compiled_kernel.COMPILED_KERNEL_CACHE_BYTES / 2**20)


def _engine_sample(name: str, copies: int) -> dict[str, Any] | None:
    """Resident memory per engine of one example's module, and its estimate."""
    module = load_example_by_name(name)
    try:
        bound = module.KERNEL.bind(module.make_args("ragged"))
        text = generate_mlir(bound)
        first = engine.compile_module(text, bound.host_function.name, in_place=True)
    except Exception:  # an example the JIT does not run (documented in docs/lowering.md)
        return None
    kept = []
    before = _resident_mib(trim=True)
    for _ in range(copies):
        engine.clear_compile_cache()
        kept.append(engine.compile_module(text, bound.host_function.name, in_place=True))
    measured = (_resident_mib(trim=True) - before) * 2**20 / copies
    engine.clear_compile_cache()
    return dict(name=name, measured_kib=measured / 1024, estimated_kib=first.nbytes / 1024)


def _kernel_sample(name: str) -> dict[str, Any] | None:
    """Python memory a compiled kernel releases besides its engine, and its estimate."""
    module = load_example_by_name(name)
    try:
        bound = module.KERNEL.bind(module.make_args("ragged"))
        compile_kernel(bound)  # its engine stays in the compiled-function cache
    except Exception:
        return None
    compiled_kernel._CACHE.clear()
    kernel_model._CODEGEN_GRAPHS.clear()
    tracemalloc.start()
    try:
        compiled = compile_kernel(bound)
        estimated = compiled.nbytes - compiled.function.nbytes
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        compiled_kernel._CACHE.clear()
        kernel_model._CODEGEN_GRAPHS.clear()
        del compiled
        gc.collect()
        released = held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return dict(name=name, measured_kib=released / 1024, estimated_kib=estimated / 1024)


def measure_estimates(every: int = 4, copies: int = 8) -> dict[str, Any]:
    """Estimated against measured memory of engines and compiled kernels, for every ``every``-th example."""
    register_cpu_matmul_dtype_overloads()
    names = example_names()[::every]
    engines = [s for s in (_engine_sample(n, copies) for n in names) if s is not None]
    kernels = [s for s in (_kernel_sample(n) for n in names) if s is not None]
    return dict(engines=engines, kernels=kernels)


def _ratios(samples: list[dict[str, Any]]) -> tuple[float, float, float]:
    ratios = [s["measured_kib"] / s["estimated_kib"] for s in samples]
    return min(ratios), statistics.median(ratios), max(ratios)


def summary_row(growth: dict[str, Any]) -> str:
    """The row of the benchmarks' summary table."""
    final = growth["rows"][-1]
    megabytes = final["growth_mib"] * 2**20 / 1e6
    return (f"{SUMMARY_PREFIX}{final['configs']} compiled configs of a matmul < {TARGET_MB} MB "
            f"| {megabytes:.0f} MB | {'met' if megabytes < TARGET_MB else 'missed'} |")


def render_compile_memory(growth: dict[str, Any], estimates: dict[str, Any]) -> str:
    """The "Memory while compiling many configs" section of docs/benchmarks.md."""
    final = growth["rows"][-1]
    engine_low, engine_mid, engine_high = _ratios(estimates["engines"])
    kernel_low, kernel_mid, kernel_high = _ratios(estimates["kernels"])
    lines = [
        "## Memory while compiling many configs",
        "",
        f"What an autotuner does (`scripts/compile_memory.py`): one matmul (512x512 by 512x512, float32)",
        f"compiled with `compile_kernel` for {final['configs']} configs of distinct block sizes, each called once and",
        f"checked against torch ({growth['seconds']:.0f} s). Resident memory after a collection, against the",
        f"process after its first compilation ({growth['start_mib']:.0f} MiB); the caches of compiled functions and",
        f"of compiled kernels weigh their entries by estimated bytes ({growth['function_budget_mib']:.0f} MiB each).",
        "",
        "| configs | growth (MiB) | compiled functions cached | their estimate (MiB) | compiled kernels cached "
        "| their estimate (MiB) | ExecutionEngines alive | import cache entries |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in growth["rows"]:
        lines.append(f"| {r['configs']} | {r['growth_mib']:.0f} | {r['functions']} | {r['functions_mib']:.1f} | "
                     f"{r['kernels']} | {r['kernels_mib']:.1f} | {r['engines_alive']} | {r['imports']} |")
    lines += [
        "",
        f"After both caches are cleared the process holds {growth['after_clear_mib']:.0f} MiB more than at the start, "
        f"{growth['after_trim_mib']:.0f} MiB",
        "once the allocator has returned its free memory to the system (`malloc_trim`): what is left",
        "is mostly the import cache and the inliner's scans of the imported texts (about 40 KiB per",
        "text; one new text per config here, both caches bounded at 16 MiB), the graphs of the last",
        "configs and memory the allocator keeps in pieces.",
        "Only the engines the caches hold stay alive: an ExecutionEngine is freed, with its",
        "machine code, as soon as nothing holds its compiled function (`tests/test_caches.py`",
        "pins this with weak references). Each engine costs about 0.7 MiB whatever its size, most of",
        "it LLVM's JIT and target machine; handing libiomp5 to each engine as a shared library (it is",
        "loaded into the process once, with global symbols, which is where the JIT finds it) cost",
        "another 0.7 MiB per engine and is no longer done.",
        "",
        "The estimates the caches weigh entries by, against measurements over every fourth example",
        "(measured / estimated, min / median / max):",
        "",
        "| entry | estimate | measured / estimated | examples |",
        "|---|---|---|---|",
        f"| ExecutionEngine (resident memory of 8 copies, over 8) | {engine.ENGINE_BASE_BYTES // 1024} KiB + "
        f"{engine.ENGINE_BYTES_PER_LLVM_OP} B per LLVM-dialect op | {engine_low:.2f} / {engine_mid:.2f} / "
        f"{engine_high:.2f} | {len(estimates['engines'])} |",
        f"| compiled kernel besides its engine (Python memory it releases, tracemalloc) | "
        f"{compiled_kernel.KERNEL_BASE_BYTES // 1024} KiB + {compiled_kernel.KERNEL_BYTES_PER_NODE} B per graph node "
        f"+ the module text | {kernel_low:.2f} / {kernel_mid:.2f} / {kernel_high:.2f} | {len(estimates['kernels'])} |",
        "",
    ]
    return "\n".join(lines)


def measure_compile_memory() -> dict[str, Any]:
    """Both measurements, as ``scripts/bench --only compile-memory`` renders them."""
    return dict(growth=measure_growth(), estimates=measure_estimates())


def main() -> None:
    measured = measure_compile_memory()
    growth, estimates = measured["growth"], measured["estimates"]
    print(json.dumps(measured), file=sys.stderr)
    print(summary_row(growth))
    print()
    print(render_compile_memory(growth, estimates))


if __name__ == "__main__":
    main()
