"""What the native cache saves: the first call of an example kernel in a fresh process, its
steps timed, with the cache off, on a miss (empty cache) and on a hit.

Each round runs three fresh processes per kernel, one per mode, against a new cache directory,
and each process times ``bind``, then the steps of ``compile_kernel`` (config, kernel model,
emission, ``compile_module``, Helion's host code), then the first call. Prints the lowest time
of each step over the rounds as a markdown table for docs/benchmarks.md.

    .venv/bin/python scripts/native_cache_costs.py [--rounds 3] [matmul softmax_two_pass ...]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from examples_util import load_example_by_name  # noqa: E402

from helion_mlir.generate import bind_kernel  # noqa: E402
from helion_mlir.runtime.kernel import compiled_kernel, host_code  # noqa: E402

STEPS = ("bind", "config", "model", "emit", "compile_module", "host_code", "after_bind", "call")
MODES = ("off", "miss", "hit")


def _timed(owner: Any, name: str, label: str, times: dict[str, float]) -> None:
    """Replace ``owner.name`` by a function that adds its time to ``times[label]``."""
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times[label] = times.get(label, 0.0) + time.perf_counter() - started

    setattr(owner, name, wrapper)


def measure(name: str) -> dict[str, float]:
    """In this process: the first call of example ``name``, step by step (ms)."""
    times: dict[str, float] = {}
    for owner, attribute, label in ((compiled_kernel, "_resolved", "config"), (compiled_kernel, "KernelModel", "model"),
                                    (compiled_kernel, "emit_module", "emit"),
                                    (compiled_kernel, "compile_module", "compile_module"),
                                    (host_code.HostCode, "from_bound", "host_code")):
        _timed(owner, attribute, label, times)
    example = load_example_by_name(name)
    args = example.make_args("divisible")
    started = time.perf_counter()
    bound = bind_kernel(example.KERNEL, args)
    bound_at = time.perf_counter()
    compiled = compiled_kernel.compile_kernel(bound)
    compiled_at = time.perf_counter()
    compiled(*args)
    called_at = time.perf_counter()
    times.update(bind=bound_at - started, after_bind=compiled_at - bound_at, call=called_at - compiled_at)
    mode = os.environ.get("NATIVE_CACHE_COSTS_MODE")
    if compiled.function.from_disk != (mode == "hit"):
        raise SystemExit(f"{name}, {mode}: the code came {'from disk' if compiled.function.from_disk else 'from the JIT'}")
    return {step: seconds * 1e3 for step, seconds in times.items()}


def _run(name: str, mode: str, directory: str) -> dict[str, float]:
    env = {**os.environ, "HELION_CACHE_DIR": directory, "NATIVE_CACHE_COSTS_MODE": mode,
           "HELION_MLIR_CACHE": "0" if mode == "off" else "1"}
    done = subprocess.run([sys.executable, __file__, "--measure", name], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="*", default=["matmul", "softmax_two_pass"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.measure:
        print(json.dumps(measure(options.measure)))
        return
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    print(f"| kernel | cache | {' | '.join(STEPS)} |\n|---|---|{'---|' * len(STEPS)}")
    for name in options.kernels:
        best: dict[str, dict[str, float]] = {mode: {} for mode in MODES}
        for _ in range(options.rounds):
            with tempfile.TemporaryDirectory(prefix="native-cache-costs-") as directory:
                for mode in MODES:  # the miss writes what the hit loads
                    for step, ms in _run(name, mode, directory).items():
                        best[mode][step] = min(ms, best[mode].get(step, ms))
        for mode in MODES:
            print(f"| {name} | {mode} | {' | '.join(f'{best[mode][s]:.1f}' for s in STEPS)} |")
    print(f"load average after: {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
