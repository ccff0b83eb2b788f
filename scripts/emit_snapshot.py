"""Emit every example kernel into a directory of module texts, to compare two trees.

``scripts/emit_snapshot OUT_DIR`` writes one file per example, variant and output type
(``OUT_DIR/<example>.<variant>.<output type>.mlir``, with source locations): the example's
own config on its divisible and ragged arguments, with ``static_shapes=False`` on the
ragged ones, and the examples whose reductions Helion rolls with ``reduction_loops`` of 16
and 32 columns. An
emission that fails writes its error (class and message) instead of a module. Run it on
two checkouts and ``diff -r`` the directories: a change that should not alter the emitted
code must leave them identical. ``--only NAME`` (repeatable) limits it to some examples.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import helion  # noqa: E402

import helion_mlir  # noqa: E402,F401  (prepares Helion: import before binding kernels)
from examples_util import bound_args, example_call, example_names, load_example_by_name  # noqa: E402
from test_rolled_reductions import ROLLED_EXAMPLES  # noqa: E402  (the examples Helion rolls)

from helion_mlir import OutputType, generate_mlir  # noqa: E402
from helion_mlir.errors import HelionMLIRError  # noqa: E402

ROLLED_CHUNKS = (16, 32)
# Kernels Helion refuses to bind with static_shapes=False.
STATIC_ONLY = ("group_norm",)


def _variants(name: str) -> Iterator[tuple[str, Any, Any]]:
    """(variant name, bound kernel, config or None) of one example."""
    module = load_example_by_name(name)
    kernel = module.KERNEL
    for shape in ("divisible", "ragged"):
        yield shape, kernel.bind(bound_args(kernel, *example_call(module, shape))), None
    if name not in STATIC_ONLY:
        dynamic = helion.kernel(kernel.fn, config=kernel.configs[0], static_shapes=False,
                                ignore_warnings=kernel.settings.ignore_warnings)
        yield "dynamic", dynamic.bind(bound_args(dynamic, *example_call(module, "ragged"))), None
    if name in ROLLED_EXAMPLES:
        bound = kernel.bind(bound_args(kernel, *example_call(module, "ragged")))
        for chunk in ROLLED_CHUNKS:
            yield f"rolled{chunk}", bound, helion.Config(**(dict(kernel.configs[0].config) | {"reduction_loops": [chunk]}))


def _emit(bound: Any, output_type: str, config: Any) -> str:
    try:
        return generate_mlir(bound, output_type=output_type, config=config, debug_info=True)
    except HelionMLIRError as err:
        return f"// {type(err).__name__}: {err}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", action="append", default=None, help="an example name (repeatable)")
    options = parser.parse_args()
    options.out_dir.mkdir(parents=True, exist_ok=True)
    started, count = time.perf_counter(), 0
    for name in options.only or example_names():
        for variant, bound, config in _variants(name):
            for output_type in OutputType:
                text = _emit(bound, output_type.value, config)
                (options.out_dir / f"{name}.{variant}.{output_type.value}.mlir").write_text(text)
                count += 1
    print(f"{count} modules in {options.out_dir} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
