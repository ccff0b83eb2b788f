"""What checked mode costs: checked against plain and fast pipelines, same kernels, one process.

Compiles a few example kernels at realistic sizes (4096x1024 row kernels, a 512^3 matmul,
attention with 8 heads of 512 positions) three ways: ``checked=True`` (the plain pipeline
with every memory access checked at run time), the plain pipeline, and the fast pipeline
(on ``--threads`` workers). Times each in alternating rounds (a burst of load on a shared
machine hits every side of a round alike) and prints the medians, the per-round ratios and
the compile times (emission excluded) as a markdown section for docs/benchmarks.md.

    .venv/bin/python scripts/checked_costs.py [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

import helion  # noqa: E402
import torch  # noqa: E402
from examples_util import load_example_by_name  # noqa: E402
from exec_costs import _per_call  # noqa: E402

from helion_mlir import OutputType  # noqa: E402
from helion_mlir.generate import kernel_model  # noqa: E402
from helion_mlir.runtime.cpu.engine import clear_compile_cache  # noqa: E402
from helion_mlir.runtime.cpu.pipelines import Pipeline  # noqa: E402
from helion_mlir.runtime.kernel.compiled_kernel import CompiledKernel  # noqa: E402

MODES = {"checked": dict(pipeline=Pipeline.PLAIN, checked=True), "plain": dict(pipeline=Pipeline.PLAIN),
         "fast": dict(pipeline=Pipeline.FAST)}


def _cases() -> list[tuple[str, Any, helion.Config, tuple[Any, ...]]]:
    example = load_example_by_name
    x = torch.randn(4096, 1024)
    weight, bias = torch.randn(1024), torch.randn(1024)
    q, k, v = (torch.randn(8, 512, 64) for _ in range(3))
    return [
        ("softmax 4096x1024", example("softmax_one_pass").KERNEL, helion.Config(block_sizes=[16]), (x,)),
        ("layer norm 4096x1024", example("layer_norm").KERNEL, helion.Config(block_sizes=[16]), (x, weight, bias, 1e-5)),
        ("row scan (cumsum) 4096x1024", example("cumsum").KERNEL, helion.Config(block_sizes=[16]), (x,)),
        ("matmul f32 512^3", example("matmul").KERNEL, helion.Config(block_sizes=[64, 64, 64]),
         (torch.randn(512, 512), torch.randn(512, 512))),
        ("attention 8x512x64", example("attention").KERNEL, helion.Config(block_sizes=[1, 64, 64]),
         (q, k, v, 1 / math.sqrt(64))),
    ]


def measure(rounds: int, threads: int, budget: float) -> list[dict[str, Any]]:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    rows = []
    for name, kernel, config, args in _cases():
        model = kernel_model(kernel, args, config)
        compiled, compile_s = {}, {}
        for mode, options in MODES.items():
            clear_compile_cache()
            compiled[mode] = CompiledKernel(model, output_type=OutputType.LINALG_ON_TENSORS,
                                            threads=threads if mode == "fast" else None, **options)
            compile_s[mode] = compiled[mode].compile_seconds
        reference = compiled["plain"](*args)
        error = max((compiled[m](*args) - reference).abs().max().item() for m in ("checked", "fast"))
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        for _ in range(rounds):
            for mode in MODES:
                times[mode].append(_per_call(lambda: compiled[mode](*args), budget))
        ratio = {pair: statistics.median(times[pair[0]][i] / times[pair[1]][i] for i in range(rounds))
                 for pair in (("checked", "plain"), ("checked", "fast"))}
        rows.append(dict(name=name, ms={m: statistics.median(t) * 1e3 for m, t in times.items()}, ratio=ratio,
                         compile_ms={m: s * 1e3 for m, s in compile_s.items()}, error=error,
                         checks=len(compiled["checked"].function.check_failures.checks)))  # type: ignore[union-attr]
    return rows


def render(rows: list[dict[str, Any]], threads: int, rounds: int) -> str:
    lines = [
        "## Checked mode",
        "",
        f"`scripts/checked_costs.py` ({rounds} alternating rounds; fast pipeline on {threads} threads, plain and "
        "checked sequential): one call of each, medians, and the median per-round ratios. `checks` counts the "
        "`cf.assert`s `generate-runtime-verification` put into the kernel; compile times exclude emission. "
        "`max diff` is the largest difference of checked and fast from plain.",
        "",
        "| kernel | checked (ms) | plain (ms) | fast (ms) | checked / plain | checked / fast | checks | "
        "compile checked / plain / fast (ms) | max diff |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ms, c = r["ms"], r["compile_ms"]
        lines.append(
            f"| {r['name']} | {ms['checked']:.1f} | {ms['plain']:.1f} | {ms['fast']:.2f} | "
            f"{r['ratio'][('checked', 'plain')]:.2f} | {r['ratio'][('checked', 'fast')]:.1f} | {r['checks']} | "
            f"{c['checked']:.0f} / {c['plain']:.0f} / {c['fast']:.0f} | {r['error']:.1e} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of calls per mode per round")
    args = parser.parse_args()
    started = time.perf_counter()
    print(render(measure(args.rounds, args.threads, args.budget), args.threads, args.rounds))
    print(f"\n(measured in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
