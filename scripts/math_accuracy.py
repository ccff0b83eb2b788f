"""Every float32 through each math function of the CPU pipelines: the largest error in ulps.

For each function of ``tests/math_sweep.UNARY``: the fast pipeline (libmvec calls and the
exp/exp2 polynomials), the plain pipeline (scalar libm calls) and torch eager on float32,
each against the float64 result rounded nowhere (torch's float64 functions). Inputs are
all 2^32 float32 bit patterns by default (``--step N`` takes every Nth), in chunks of
2^22, then the edge cases of tests/math_sweep.py; pow and atan2 over a grid of every sign
and magnitude. Prints the markdown table of docs/cpu-math.md (``--write`` replaces it there).
Takes about an hour on 2 cores for every float32.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from math_sweep import UNARY, float32_sweep, ulp_errors, unary_module  # noqa: E402

from helion_mlir.runtime.cpu.engine import compile_module  # noqa: E402

DOC = ROOT / "docs" / "cpu-math.md"
SECTION = "## Measured accuracy"
CHUNK = 1 << 22
CONTENDERS = ("fast", "plain", "torch")


class Worst:
    """The largest error seen per function and contender, and its argument."""

    def __init__(self) -> None:
        self.error = {(f, c): 0.0 for f in UNARY for c in CONTENDERS}
        self.argument = {(f, c): math.nan for f in UNARY for c in CONTENDERS}

    def update(self, function: str, contender: str, x: torch.Tensor, got: torch.Tensor, want: torch.Tensor) -> None:
        errors = ulp_errors(got, want)
        index = int(errors.argmax())
        if errors[index] > self.error[function, contender]:
            self.error[function, contender] = float(errors[index])
            self.argument[function, contender] = float(x[index])


def sweep(step: int) -> Worst:
    names = list(UNARY)
    worst = Worst()
    compiled: dict[tuple[str, int], object] = {}
    started = time.perf_counter()
    chunks = list(range(0, 1 << 32, CHUNK * step))
    for number, start in enumerate(chunks):
        x = float32_sweep(step, start, min(start + CHUNK * step, 1 << 32))
        for pipeline in ("fast", "plain"):
            key = (pipeline, x.numel())
            if key not in compiled:
                compiled[key] = compile_module(unary_module(x.numel(), names), "unary", pipeline=pipeline)
            outputs = compiled[key](x, *[torch.empty_like(x) for _ in names])
            for name, got in zip(names, outputs):
                worst.update(name, pipeline, x, got, UNARY[name][1](x.double()))
        for name in names:
            worst.update(name, "torch", x, UNARY[name][1](x), UNARY[name][1](x.double()))
        if number % 64 == 0:
            print(f"{number + 1}/{len(chunks)} chunks, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return worst


BINARY = """
#id = affine_map<(d0) -> (d0)>
func.func @binary(%x: tensor<{n}xf32>, %y: tensor<{n}xf32>, %p: tensor<{n}xf32>, %a: tensor<{n}xf32>)
    -> (tensor<{n}xf32>, tensor<{n}xf32>) {{
  %r:2 = linalg.generic {{indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}}
      ins(%x, %y : tensor<{n}xf32>, tensor<{n}xf32>) outs(%p, %a : tensor<{n}xf32>, tensor<{n}xf32>) {{
  ^bb0(%u: f32, %v: f32, %o1: f32, %o2: f32):
    %pow = math.powf %u, %v : f32
    %atan2 = math.atan2 %u, %v : f32
    linalg.yield %pow, %atan2 : f32, f32
  }} -> (tensor<{n}xf32>, tensor<{n}xf32>)
  return %r#0, %r#1 : tensor<{n}xf32>, tensor<{n}xf32>
}}
"""


def binary_grid() -> dict[tuple[str, str], float]:
    """pow and atan2 over every pair of 2000 values of both signs spread over all magnitudes."""
    magnitudes = torch.logspace(-44, 38, 1000, dtype=torch.float64).float()
    values = torch.cat([magnitudes, -magnitudes, torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0])])
    x, y = (t.reshape(-1).contiguous() for t in torch.meshgrid(values, values, indexing="ij"))
    found = {}
    for pipeline in ("fast", "plain"):
        power, angle = compile_module(BINARY.format(n=x.numel()), "binary", pipeline=pipeline)(
            x, y, torch.empty_like(x), torch.empty_like(x))
        found["pow", pipeline] = float(ulp_errors(power, torch.pow(x.double(), y.double())).max())
        found["atan2", pipeline] = float(ulp_errors(angle, torch.atan2(x.double(), y.double())).max())
    found["pow", "torch"] = float(ulp_errors(torch.pow(x, y), torch.pow(x.double(), y.double())).max())
    found["atan2", "torch"] = float(ulp_errors(torch.atan2(x, y), torch.atan2(x.double(), y.double())).max())
    return found


def render(worst: Worst, binary: dict[tuple[str, str], float], step: int) -> str:
    command = "scripts/math_accuracy.py" + ("" if step == 1 else f" --step {step}")
    inputs = "every float32" if step == 1 else f"one float32 bit pattern in {step}"
    lines = [
        SECTION,
        "",
        f"`{command}`, {inputs} (and the edge cases of tests/math_sweep.py); pow and",
        "atan2 over every pair of 2006 values of both signs and all magnitudes, zeros, infinities and",
        "NaN included. The largest error in float32 ulps of the exact result (torch's float64",
        "functions); a NaN or infinity where the exact result is neither, or the reverse, counts as an",
        "infinite error.",
        "`fast`: the fast pipeline (`compile_kernel`'s default); `plain`: the plain pipeline (one scalar",
        "libm call per element); `torch`: torch eager on float32.",
        "",
        "| function | fast (ulp) | worst argument | plain (ulp) | torch eager (ulp) |",
        "|---|---|---|---|---|",
    ]
    for name in UNARY:
        lines.append(f"| {name} | {worst.error[name, 'fast']:.2f} | {worst.argument[name, 'fast']:.9g} | "
                     f"{worst.error[name, 'plain']:.2f} | {worst.error[name, 'torch']:.2f} |")
    for name in ("pow", "atan2"):
        lines.append(f"| {name} (grid) | {binary[name, 'fast']:.2f} | | {binary[name, 'plain']:.2f} | "
                     f"{binary[name, 'torch']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--step", type=int, default=1, help="take every STEP-th float32 bit pattern")
    parser.add_argument("--write", action="store_true", help=f"replace the table in {DOC.relative_to(ROOT)}")
    options = parser.parse_args()
    table = render(sweep(options.step), binary_grid(), options.step)
    print(table)
    if options.write:
        document = DOC.read_text()
        before, _, after = document.partition(SECTION)
        rest = after.split("\n## ", 1)
        DOC.write_text(before + table + ("\n## " + rest[1] if len(rest) > 1 else ""))


if __name__ == "__main__":
    main()
