"""Lower every example through both CPU pipelines and write the LLVM-dialect text, to diff.

A change to a pipeline that should not change its output is checked by running this
before and after and diffing the two output folders; lowering times are printed too:

    python scripts/lower_examples.py emit MODULES        # each example's emitted modules
    python scripts/lower_examples.py lower MODULES OUT   # OUT/<module>.<pipeline>.mlir
    diff -r OUT_BEFORE OUT_AFTER

``emit`` writes the emitted module of each example in every output type (ragged shapes,
and linalg-on-tensors with static_shapes=False), so that ``lower`` runs on fixed inputs
whatever emission does meanwhile. ``lower`` lowers each with the plain pipeline, the fast
one on one thread, and the fast one on two threads in place (tile loops made parallel
however small, as the example tests do), and prints the total lowering time per pipeline
(``--rounds`` repeats it and prints the median of the rounds).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import helion

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from examples_util import bound_args, example_call, example_names, load_example_by_name  # noqa: E402

from helion_mlir import OutputType, generate_mlir  # noqa: E402
from helion_mlir.errors import HelionMLIRError  # noqa: E402
from helion_mlir.generate import kernel_model  # noqa: E402
from helion_mlir.runtime.cpu.rewrites.tensor import tile_parallel  # noqa: E402
from helion_mlir.runtime.cpu.engine import lower_module  # noqa: E402

# name -> lower_module options
PIPELINES = {
    "plain": {"pipeline": "plain"},
    "fast1": {"pipeline": "fast", "threads": 1},
    "fast2": {"pipeline": "fast", "threads": 2, "in_place": True},
}
NEEDS_STATIC_SHAPES = {"group_norm"}


def emit(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in example_names():
        module = load_example_by_name(name)
        args, kwargs = example_call(module, "ragged")
        kernels = [("", module.KERNEL)]
        if name not in NEEDS_STATIC_SHAPES:
            kernels.append(("dynamic.", helion.kernel(
                module.KERNEL.fn, config=module.KERNEL.configs[0], static_shapes=False,
                ignore_warnings=module.KERNEL.settings.ignore_warnings)))
        for prefix, kernel in kernels:
            bound = kernel.bind(bound_args(kernel, args, kwargs))
            func = kernel_model(bound).name
            types = list(OutputType) if not prefix else [OutputType.LINALG_ON_TENSORS]
            for output_type in types:
                text = generate_mlir(bound, output_type=output_type)
                (folder / f"{name}.{prefix}{output_type.value}.mlir").write_text(f"// func: {func}\n{text}")
        print(name, flush=True)


def lower(modules: Path, out: Path | None, rounds: int) -> None:
    tile_parallel.MIN_PARALLEL_WORK = 0
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    inputs = sorted(modules.glob("*.mlir"))
    totals: dict[str, list[float]] = {p: [] for p in PIPELINES}
    for round_ in range(rounds):
        for pipeline, options in PIPELINES.items():
            seconds = 0.0
            for path in inputs:
                text = path.read_text()
                func = text.split("\n", 1)[0].removeprefix("// func: ")
                output_type = path.name.split(".")[-2]
                started = time.perf_counter()
                try:
                    lowered = lower_module(text, func, output_type=output_type, **options)
                except HelionMLIRError as err:
                    lowered = f"error: {type(err).__name__}: {err}"
                seconds += time.perf_counter() - started
                if out is not None and round_ == 0:
                    (out / f"{path.stem}.{pipeline}.mlir").write_text(lowered)
            totals[pipeline].append(seconds)
    for pipeline, times in totals.items():
        shown = ", ".join(f"{t:.2f}" for t in times)
        print(f"{pipeline}: {len(inputs)} modules in {statistics.median(times):.2f} s (median of {shown})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    emit_parser = commands.add_parser("emit")
    emit_parser.add_argument("modules", type=Path)
    lower_parser = commands.add_parser("lower")
    lower_parser.add_argument("modules", type=Path)
    lower_parser.add_argument("out", type=Path, nargs="?")
    lower_parser.add_argument("--rounds", type=int, default=1)
    options = parser.parse_args()
    if options.command == "emit":
        emit(options.modules)
    else:
        lower(options.modules, options.out, options.rounds)


if __name__ == "__main__":
    main()
