"""The ``helion-mlir`` command: lower, run and check Helion kernels from the shell.

Expected failures (bad usage, a kernel that does not lower) print one ``error:`` line, the
helion_mlir message (which names the node and kernel source line) and what to do next;
``--debug`` adds the Python traceback. Exit codes: 0 success, 1 a kernel failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from ..output_type import OutputType
from ..runtime.compiled_kernel import RUNTIMES
from .check import check_command
from .common import EXIT_OK, EXIT_USAGE, CommandError, output_type, tolerance_value
from .emit import emit_command
from .kernel_loading import DTYPES, INT_RANGE
from .ops import ops_command
from .pipeline import PIPELINE_EPILOG, pipeline_command
from .run import run_command

__all__ = ["main", "build_parser"]


ARGS_HELP = f"""\
--args SPEC: one item per kernel parameter, separated by commas. A tensor is
DTYPE[size,...] (DTYPE one of {' '.join(DTYPES)}; f32[] is 0-d), filled with
seeded random values: floats standard normal, integers in [{INT_RANGE[0]}, {INT_RANGE[1]}), bools either.
A scalar is a number: 2, 1e-5, true. Without --args, the arguments come from the
file's make_args() when it defines one.
--config JSON: helion.Config fields, e.g. '{{"block_sizes": [32, 32]}}' (default: the
kernel's own config).
"""

EMIT_EPILOG = f"""\
examples:
  helion-mlir emit examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir emit kernels.py:rms_norm --args 'f32[64,512], f32[512], 1e-5' -t tosa -o rms_norm.mlir
  helion-mlir emit examples/matmul.py --config '{{"block_sizes": [32, 32, 32]}}'

{ARGS_HELP}"""

RUN_EPILOG = f"""\
examples:
  helion-mlir run examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir run examples/matmul_bf16.py -t stablehlo --atol 0.05
  helion-mlir run examples/softmax_one_pass.py --runtime iree

Default tolerance per output dtype: f32/f64 1e-4, bf16/f16 2e-2 (rtol and atol), integers
and bools exact. Arguments the kernel writes are compared too.

{ARGS_HELP}"""

CHECK_EPILOG = """\
examples:
  helion-mlir check examples/
  helion-mlir check examples/ -t linalg -t tosa --run --shape ragged
  helion-mlir check examples/ -t linalg -t stablehlo -t raw -t tosa --iree

Every *.py file under the given folders is imported (folders starting with '.' and
__pycache__ are left out). A kernel's arguments come from its module's make_args(SHAPE);
kernels in modules without make_args are skipped. A file that fails to import is a failure.
--iree adds a column per output type: whether IREE compiles the module (llvm-cpu, this CPU),
runs it, and agrees with the in-process JIT on every output (see docs/downstream.md).
"""

OPS_EPILOG = """\
example:
  helion-mlir ops

The table comes from docs/op-support.md (kept current by the test suite) when it is there;
--measure (or its absence) measures it afresh, which takes about a minute.
"""

MAIN_EPILOG = """\
examples:
  helion-mlir emit examples/add.py --args 'f32[128,256], f32[128,256]' -t tosa
  helion-mlir run examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir check examples/ --run
  helion-mlir ops
  helion-mlir pipeline

exit codes: 0 success, 1 a kernel failed, 2 bad usage.
Run 'helion-mlir COMMAND --help' for a command's options.
"""

def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (each ``--help`` ends with examples)."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="helion-mlir", description="Lower Helion kernels to verified MLIR and run them on CPU.",
        epilog=MAIN_EPILOG, formatter_class=raw,
    )
    # -v/--debug are accepted before and after the command. The commands' copies default to
    # SUPPRESS so that they keep what was given before the command (separate action objects:
    # a parser's defaults live on its actions, which `parents` would share).
    common = argparse.ArgumentParser(add_help=False)
    for owner, default in ((parser, False), (common, argparse.SUPPRESS)):
        owner.add_argument("-v", "--verbose", action="store_true", default=default,
                           help="log progress of helion_mlir (INFO) to stderr")
        owner.add_argument("--debug", action="store_true", default=default, help="show Python tracebacks of errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    output_help = f"output type: {', '.join(t.value for t in OutputType)} (linalg for short)"

    def add_kernel_arguments(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("target", metavar="FILE.py[:KERNEL]",
                         help="a Python file and the name of a kernel in it (optional if it defines one)")
        sub.add_argument("--args", metavar="SPEC", help="the kernel's arguments, e.g. 'f32[128,256], 1e-5' (below)")
        sub.add_argument("--config", metavar="JSON", help="helion.Config fields as a JSON object")
        sub.add_argument("-t", "--output-type", type=output_type, default=OutputType.LINALG_ON_TENSORS,
                         metavar="T", help=output_help + " (default: linalg-on-tensors)")
        sub.add_argument("--seed", type=int, default=0, help="seed of the random tensors (default: 0)")

    def add_tolerance_arguments(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--rtol", type=tolerance_value, help="relative tolerance for every output")
        sub.add_argument("--atol", type=tolerance_value, help="absolute tolerance for every output")

    emit = commands.add_parser("emit", help="print the verified MLIR module of a kernel", parents=[common],
                               description="Lower one kernel and print (or write) its verified MLIR module.",
                               epilog=EMIT_EPILOG, formatter_class=raw)
    add_kernel_arguments(emit)
    emit.add_argument("-o", "--output", metavar="OUT", type=Path, help="write the module here instead of stdout")
    emit.add_argument("--debug-info", action="store_true",
                      help="print each op's loc(\"file.py\":line:col) in the kernel source (MLIR's "
                           "--mlir-print-debuginfo)")
    emit.set_defaults(handler=emit_command)

    run = commands.add_parser("run", help="run a kernel on CPU and compare with Helion's reference mode",
                              parents=[common], epilog=RUN_EPILOG, formatter_class=raw,
                              description="Compile one kernel through MLIR, run it on CPU, and compare its "
                                          "results with Helion's reference mode on the same arguments.")
    add_kernel_arguments(run)
    add_tolerance_arguments(run)
    run.add_argument("--runtime", choices=RUNTIMES, default="jit",
                     help="jit: torch-mlir's ExecutionEngine in-process (default); iree: iree-compile for "
                          "llvm-cpu and IREE's runtime (needs iree-base-compiler and iree-base-runtime)")
    run.set_defaults(handler=run_command)

    check = commands.add_parser("check", help="lower every kernel in files or folders and summarize",
                                parents=[common], epilog=CHECK_EPILOG, formatter_class=raw,
                                description="Lower (and with --run, run) every kernel found and print a table.")
    check.add_argument("paths", nargs="+", metavar="PATH", help="Python files or folders (searched recursively)")
    check.add_argument("-t", "--output-type", type=output_type, action="append", metavar="T",
                       help=output_help + "; repeat for several (default: linalg-on-tensors)")
    check.add_argument("--run", action="store_true", help="also run each verified kernel and compare with ref mode")
    check.add_argument("--iree", action="store_true",
                       help="also compile each verified kernel with IREE, run it and compare with the JIT's numbers")
    check.add_argument("--shape", choices=("divisible", "ragged"), default="divisible",
                       help="the shape kind passed to make_args (default: divisible)")
    add_tolerance_arguments(check)
    check.set_defaults(handler=check_command)

    ops = commands.add_parser("ops", help="list the node targets and ops that lower, per output type",
                              parents=[common], epilog=OPS_EPILOG, formatter_class=raw,
                              description="Print the node targets with lowering rules and the ATen/prims "
                                          "op x output-type support table.")
    ops.add_argument("--measure", action="store_true", help="measure the table instead of reading the document")
    ops.set_defaults(handler=ops_command)

    pipeline = commands.add_parser("pipeline", help="print the steps of a CPU pipeline", parents=[common],
                                   epilog=PIPELINE_EPILOG, formatter_class=raw,
                                   description="Print the steps (upstream passes and the package's rewrites) "
                                               "that lower a module to LLVM on CPU, one a line.")
    pipeline.add_argument("--plain", action="store_true", help="the plain pipeline instead of the fast one")
    pipeline.add_argument("-t", "--output-type", type=output_type, default=OutputType.LINALG_ON_TENSORS,
                          metavar="T", help=output_help + " (default: linalg-on-tensors)")
    pipeline.add_argument("--threads", type=int, help="OpenMP workers (default: torch's thread count)")
    pipeline.set_defaults(handler=pipeline_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as stop:  # argparse has printed the help or the usage error
        return stop.code if isinstance(stop.code, int) else EXIT_OK if stop.code is None else EXIT_USAGE
    _configure_logging(options.verbose)
    try:
        return options.handler(options)
    except CommandError as err:
        cause = err.__cause__
        if options.debug and cause is not None:
            traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)
        print(f"helion-mlir: error: {err.message}", file=sys.stderr)
        for line in err.details.splitlines():
            print(f"  {line}", file=sys.stderr)
        if err.next_step:
            print(f"  next: {err.next_step}", file=sys.stderr)
        return err.code


_LOG_HANDLER = logging.StreamHandler()
_LOG_HANDLER.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))


def _configure_logging(verbose: bool) -> None:
    logger = logging.getLogger("helion_mlir")
    if verbose:
        _LOG_HANDLER.setStream(sys.stderr)
        logger.addHandler(_LOG_HANDLER)
        logger.setLevel(logging.INFO)
    else:
        logger.removeHandler(_LOG_HANDLER)
        logger.setLevel(logging.NOTSET)


# ---------------------------------------------------------------------- one kernel
