"""Explore configs from Helion's own generator over the example kernels, at length.

For each example, ``--configs`` random configs (``ConfigGeneration.random_config()``,
seeded) are compiled, run on CPU and compared with Helion's reference mode; each config
runs with a shape kind, static or dynamic shapes, an output type, a pipeline and (fast
pipeline) a thread count drawn from ``--shapes``, ``--shape-modes``, ``--output-types``,
``--pipelines`` and ``--threads``. Prints every config that is refused, computes wrong
numbers or crashes, with a snippet that reproduces it, then a summary by status and
example, the time taken and the peak memory. Exits 1 when a config failed.

    scripts/fuzz_configs --configs 300                      # every example, 300 configs each
    scripts/fuzz_configs --configs 300 --minutes 60 --shard 0/2   # as many rounds as an hour allows, half the examples
    scripts/fuzz_configs --examples layer_norm,matmul --seed 3 --output-types linalg-on-tensors,stablehlo
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import resource
import sys
import time
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from config_fuzz import (  # noqa: E402
    CRASH,
    KNOWN_GAP,
    MATCH,
    OUT_OF_BOUNDS,
    REFUSED,
    WRONG,
    FuzzCase,
    Outcome,
    bound_kernel,
    case_seed,
    random_configs,
    run_config,
)
from examples_util import HELION_NEEDS_STATIC_SHAPES, example_names  # noqa: E402

from helion_mlir.runtime.cpu.rewrites.tensor import tile_parallel  # noqa: E402


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def variant(args: argparse.Namespace, example: str, index: int) -> FuzzCase:
    """The case config ``index`` runs in: each field drawn from its option's values, seeded
    like the config (dynamic shapes only where Helion binds them)."""
    rng = random.Random(f"variant {case_seed(example, index, args.seed)}")  # independent of the config's draws
    pipeline = rng.choice(_csv(args.pipelines))
    threads = int(rng.choice(_csv(args.threads))) if pipeline == "fast" else None
    static = rng.choice(_csv(args.shape_modes)) == "static" or example in HELION_NEEDS_STATIC_SHAPES
    checked = pipeline == "checked"  # the plain pipeline with every memory access checked
    return FuzzCase(example, rng.choice(_csv(args.shapes)), static, rng.choice(_csv(args.output_types)),
                    "plain" if checked else pipeline, threads, checked)


def _write(report: TextIO | None, o: Outcome) -> None:
    """One JSON line per outcome, flushed at once: if a config kills the process, the report
    ends just before it (the next index of that example reproduces it)."""
    if report is not None:
        report.write(json.dumps(dict(case=o.case.label(), config=dict(o.config.config), status=o.status,
                                     seconds=round(o.seconds, 3), detail=o.detail[:2000])) + "\n")
        report.flush()


def fuzz_one(args: argparse.Namespace, example: str, index: int, report: TextIO | None) -> Outcome | None:
    """Config ``index`` of ``example``: drawn, compiled, run and compared (None when Helion
    itself cannot bind the case or draw a config, which is printed)."""
    case = variant(args, example, index)
    try:
        [config] = random_configs(bound_kernel(case), case_seed(example, index, args.seed), 1)
    except Exception as err:  # noqa: BLE001  (Helion's own bind or generator failing is reported)
        print(f"[no config] {case.label()}: {type(err).__name__}: {err}", flush=True)
        return None
    outcome = run_config(case, config)
    _write(report, outcome)
    if outcome.failed:
        print(f"{outcome.summary()}\nreproduce with:\n{outcome.reproduction()}\n", flush=True)
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=200, help="configs per example (default 200)")
    parser.add_argument("--minutes", type=float, help="stop after the round running when this time is up")
    parser.add_argument("--seed", type=int, default=1, help="base seed (default 1; CI's tests use 0)")
    parser.add_argument("--examples", default="", help="comma-separated example names (default: all)")
    parser.add_argument("--shard", default="0/1", help="I/N: every N-th example from the I-th (parallel runs)")
    parser.add_argument("--shapes", default="ragged,divisible")
    parser.add_argument("--shape-modes", default="static,dynamic", help="static and/or dynamic (static_shapes=False)")
    parser.add_argument("--output-types", default="linalg-on-tensors,stablehlo,tosa,raw")
    parser.add_argument("--pipelines", default="fast,plain,checked", help="fast, plain and/or checked (plain, "
                        "every memory access checked at run time)")
    parser.add_argument("--threads", default="1,2,4", help="fast pipeline thread counts (default 1,2,4)")
    parser.add_argument("--report", type=Path, help="write every outcome as a JSON line here")
    args = parser.parse_args(argv)
    tile_parallel.MIN_PARALLEL_WORK = 0  # small inputs still take the parallel code
    shard, shards = (int(part) for part in args.shard.split("/"))
    examples = (_csv(args.examples) or example_names())[shard::shards]
    start = time.perf_counter()
    per_example: dict[str, collections.Counter[str]] = {example: collections.Counter() for example in examples}
    report = args.report.open("w") if args.report else None
    rounds = 0
    # Round by round (config i of every example, then i + 1), so a run cut short by
    # --minutes has drawn as many configs of each example.
    while rounds < args.configs and (args.minutes is None or time.perf_counter() - start < args.minutes * 60):
        for example in examples:
            outcome = fuzz_one(args, example, rounds, report)
            per_example[example][outcome.status if outcome else "no config"] += 1
        rounds += 1
        print(f"round {rounds}: {dict(sum(per_example.values(), collections.Counter()))} "
              f"after {time.perf_counter() - start:.0f} s", flush=True)
    total = sum(per_example.values(), collections.Counter())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"\n{sum(total.values())} configs ({rounds} per example) over {len(examples)} examples in "
          f"{time.perf_counter() - start:.0f} s (peak RSS {peak} MB): {dict(total)}")
    for example, counts in per_example.items():
        print(f"  {example}: {dict(counts)}")
    return 1 if any(total[s] for s in (WRONG, CRASH, REFUSED, OUT_OF_BOUNDS)) else 0


if __name__ == "__main__":
    sys.exit(main())
