"""Run every example through the fast and plain CPU pipelines on the same inputs and report
where they differ or where only one of them compiles.

    python scripts/differential_pipelines.py [NAME ...] [--shapes ragged divisible]

Each example runs with static and dynamic shapes (except those Helion needs static), the
fast pipeline on 2 threads with tile loops parallel however small the inputs (the code
large inputs get). Exits 1 when any example differs.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from examples_util import HELION_NEEDS_STATIC_SHAPES, example_names, load_example_by_name  # noqa: E402
from pipeline_differential import assert_pipelines_agree  # noqa: E402

from helion_mlir.runtime.cpu.rewrites.tensor import tile_parallel  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="examples (default: all)")
    parser.add_argument("--shapes", nargs="+", default=["ragged", "divisible"])
    options = parser.parse_args()
    tile_parallel.MIN_PARALLEL_WORK = 0
    failed = 0
    for name in options.names or example_names():
        module = load_example_by_name(name)
        for shape in options.shapes:
            for dynamic in (False, True) if name not in HELION_NEEDS_STATIC_SHAPES else (False,):
                where = f"{name} [{shape}, {'dynamic' if dynamic else 'static'}]"
                try:
                    assert_pipelines_agree(module, name, shape, dynamic)
                except AssertionError as err:
                    failed += 1
                    print(f"DIFFERS {where}: {str(err)[:400]}", flush=True)
                except Exception as err:  # noqa: BLE001 - a report of every example, whatever fails
                    failed += 1
                    last = traceback.format_exception_only(err)[-1].strip()
                    print(f"ERROR {where}: {last[:400]}", flush=True)
                else:
                    print(f"ok {where}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
