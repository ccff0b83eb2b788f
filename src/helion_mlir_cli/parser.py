"""The argument parser of every ``helion-mlir`` subcommand, with help texts and examples.

Only the standard library is imported here (see :mod:`helion_mlir_cli`). The names of
output types and runtimes are spelled out below; a test checks that they are the
package's own (``helion_mlir.OutputType``, ``helion_mlir.runtime.kernel.compiled_kernel.RUNTIMES``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .call_syntax import DTYPE_NAMES, INT_RANGE, CallArguments, CallSyntaxError, parse_call

__all__ = ["DEVICE_KINDS", "DUMP_PIPELINE_VARIABLE", "OUTPUT_TYPES", "RUNTIMES", "build_parser",
           "check_arguments_options"]

OUTPUT_TYPES = ("raw", "linalg-on-tensors", "tosa", "stablehlo")
RUNTIMES = ("jit", "iree")
DEVICE_KINDS = ("cpu", "cuda", "rocm", "vulkan")
DEVICE_HELP = ("with --runtime iree, what IREE compiles for: cpu (this CPU, the default), cpu:MODEL (an LLVM CPU "
               "model, e.g. cpu:skylake-avx512), cuda[:sm_80], rocm[:gfx942] or vulkan[:rdna3]; a GPU module "
               "compiles anywhere and runs where that GPU is")
DUMP_PIPELINE_VARIABLE = "HELION_MLIR_DUMP_PIPELINE"

ARGS_HELP = f"""\
--args: the kernel's arguments, written as the inside of a Python call: positional ones,
then NAME=VALUE; parameters left out take their defaults. Each value is one of
  DTYPE[size,...]            a tensor of seeded random values (--seed): floats standard
                             normal, integers in [{INT_RANGE[0]}, {INT_RANGE[1]}), bools either; DTYPE is one of
                             {' '.join(DTYPE_NAMES)}; f32[] is 0-d
  30  1e-5  True  None  "sum"  (1, 2)  [f32[8], f32[8]]  bf16
                             numbers, booleans, None, strings, tuples, lists and
                             dtypes; a parameter annotated float takes 30 as 30.0
  torch.arange(16)  torch.full((4, 4), 0.5)  torch.load("x.pt")
                             any Python expression: torch, math and the names the
                             kernel's file defines are in scope
Quote the whole --args for the shell, and strings inside it with the other quote:
  --args 'f32[64,512], f32[512], eps=1e-5, mode="mean"'
For a file with several kernels, name the kernel before a colon, once per kernel:
  --args 'rms_norm: f32[64,512], f32[512]' --args 'swiglu: bf16[64,512], bf16[64,512]'
Without --args, a kernel's arguments come from its file's make_args_KERNEL() and
make_kwargs_KERNEL() (one pair per kernel, for a file with several), else from the
file's make_args() and make_kwargs().
"""

CONFIG_HELP = """\
--config: helion.Config fields as JSON, e.g. '{"block_sizes": [32, 32]}' (default: the
kernel's own config), normalized as Helion normalizes configs: aliases such as
'{"block_size": 32}' work, omitted fields take Helion's defaults, and a config Helion
refuses exits with status 2 naming the field.
"""

EMIT_EPILOG = f"""\
examples:
  helion-mlir emit examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir emit examples/rms_norm.py:rms_norm --args 'f32[64,512], f32[512], eps=1e-5' -t tosa -o rms_norm.mlir
  helion-mlir emit examples/matmul.py --config '{{"block_sizes": [32, 32, 32]}}' --debug-info

{ARGS_HELP}
{CONFIG_HELP}"""

RUN_EPILOG = f"""\
examples:
  helion-mlir run examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir run examples/matmul_bf16.py -t stablehlo --atol 0.05
  helion-mlir run examples/softmax_one_pass.py --runtime iree
  helion-mlir run examples/matmul_bf16.py --runtime iree --device cpu:x86-64
  helion-mlir run examples/rope.py --checked

The kernel runs twice on copies of the same arguments: compiled through MLIR, and in
Helion's reference mode (eager PyTorch). Default tolerance per output dtype: f32/f64 1e-4,
bf16/f16 2e-2 (rtol and atol), integers and bools exact. Arguments the kernel writes are
compared too.

{ARGS_HELP}
{CONFIG_HELP}"""

CHECK_EPILOG = f"""\
examples:
  helion-mlir check examples/
  helion-mlir check examples/ -t linalg -t tosa --run --shape ragged
  helion-mlir check examples/rms_norm.py --args 'f32[64,512], f32[512], 1e-5' --run
  helion-mlir check examples/ -t linalg -t stablehlo -t raw -t tosa --iree
  helion-mlir check examples/ -t linalg --iree --device cuda:sm_89

Every *.py file under the given folders is imported (folders starting with '.',
__pycache__, build output and virtual environments are left out). The kernels of a file
are those it defines, or if it defines none, those it imports. A kernel's arguments come
from --args when given ('KERNEL: ...' for one kernel, without a name for every other),
otherwise from its file's make_args_KERNEL(SHAPE) and make_kwargs_KERNEL(SHAPE), else
make_args(SHAPE) and make_kwargs(SHAPE); a kernel without them is skipped. A file that fails to import is a failure.
Exit status: 0 when every kernel checked passed, 1 when one failed or when nothing
could be checked (every kernel skipped), 2 for bad usage.
--iree adds a column per output type: whether IREE compiles the module (llvm-cpu, this CPU,
or --device), runs it, and agrees with the in-process JIT on every output (see
docs/downstream.md); "compiles" for a GPU module where that GPU is missing.

{ARGS_HELP}"""

OPS_EPILOG = f"""\
examples:
  helion-mlir ops                               # every op, per output type
  helion-mlir ops examples/softmax_two_pass.py  # the ops one kernel uses
  helion-mlir ops examples/rms_norm.py:rms_norm --args 'f32[64,512], bf16[512], eps=1e-5'

Without a file: the node targets with lowering rules, those refused on purpose, and the
table of ATen/prims ops per output type from docs/op-support.md (--measure measures it
afresh, about a minute). With a file: the kernel's node targets, how each is lowered and
its support per output type from that table, and whether the whole kernel lowers to each
output type (it is lowered four times).

{ARGS_HELP}"""

TUNE_EPILOG = f"""\
examples:
  helion-mlir tune examples/matmul.py --args 'f32[1024,1024], f32[1024,1024]'
  helion-mlir tune examples/softmax_two_pass.py --args 'f32[4096,1024]' --effort full
  helion-mlir tune kernels.py:rms_norm --args 'f32[2048,4096], f32[4096], 1e-5' --force

The search is Helion's (HELION_AUTOTUNER, HELION_AUTOTUNE_* variables apply); its result
is cached where Helion caches results (HELION_CACHE_DIR), for this CPU, these argument
shapes and the thread count (torch.get_num_threads(), e.g. OMP_NUM_THREADS). A kernel
without a config of its own then runs the tuned config under backend="mlir" and in
compile_kernel, without tuning again.

The times printed are medians of calls made as a user makes them (compiled in this
process, host code included, outputs allocated by each call), interleaved round-robin:
the tuned config, Helion's default config, --config (another config to time beside them)
and torch eager, when the kernel's file defines reference(...): a plain-torch function
that takes the kernel's arguments (every parameter in order, defaults applied) and
returns what the kernel returns. That measurement chose the config cached: when a call of
the default config is faster than one of the search's best, the default is cached.

{ARGS_HELP}"""

PIPELINE_EPILOG = f"""\
examples:
  helion-mlir pipeline
  helion-mlir pipeline --plain -t tosa
  helion-mlir pipeline --threads 1
  helion-mlir pipeline --checked

Without options: the fast pipeline as 'helion-mlir run' and compile_kernel use it (results
in place, torch's thread count). {DUMP_PIPELINE_VARIABLE}=DIR writes the IR after every
step of each lowering into DIR/<function>.<pipeline>/.
"""

MAIN_EPILOG = """\
examples:
  helion-mlir emit examples/add.py --args 'f32[128,256], f32[128,256]' -t tosa
  helion-mlir run examples/add.py --args 'f32[128,256], f32[128,256]'
  helion-mlir check examples/ --run
  helion-mlir tune examples/matmul.py --args 'f32[1024,1024], f32[1024,1024]'
  helion-mlir ops examples/add.py
  helion-mlir pipeline
  helion-mlir cache

exit status: 0 success, 1 a kernel failed, 2 bad usage.
Run 'helion-mlir COMMAND --help' for a command's options and the --args syntax.
"""


def output_type_name(text: str) -> str:
    """An output type's name; ``linalg`` is short for linalg-on-tensors, case and ``_`` are free."""
    spelled = text.strip().lower().replace("_", "-")
    spelled = "linalg-on-tensors" if spelled == "linalg" else spelled
    if spelled not in OUTPUT_TYPES:
        raise argparse.ArgumentTypeError(f"unknown output type {text!r}; choose one of: {', '.join(OUTPUT_TYPES)}")
    return spelled


def device_name(text: str) -> str:
    """``KIND[:TARGET]`` with a kind IREE compiles for (the target is checked by iree-compile)."""
    kind, _, target = text.strip().partition(":")
    if kind.lower() not in DEVICE_KINDS or ":" in target or (text.count(":") == 1 and not target):
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; write KIND[:TARGET] with KIND one of: "
                                         f"{', '.join(DEVICE_KINDS)} (e.g. cuda:sm_80, cpu:skylake-avx512)")
    return text.strip()


def tolerance_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a non-negative number")
    return value


def call_arguments(text: str) -> CallArguments:
    try:
        return parse_call(text)
    except CallSyntaxError as err:
        raise argparse.ArgumentTypeError(f"{err}\n(see --help for the syntax)") from None


def check_arguments_options(parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
    """Refuse ``--args`` given twice for one kernel, or twice without a kernel name
    (argparse's usage error: exit status 2)."""
    seen: set[str | None] = set()
    for call in getattr(options, "args", None) or ():
        if call.kernel in seen:
            twice = f"for kernel '{call.kernel}'" if call.kernel else "without a kernel name"
            parser.error(f"--args given twice {twice}; name each kernel once: --args 'KERNEL: ...'")
        seen.add(call.kernel)


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
    output_help = f"output type: {', '.join(OUTPUT_TYPES)} (linalg for short)"

    def add_arguments_options(sub: argparse.ArgumentParser, what: str) -> None:
        sub.add_argument("--args", metavar="[KERNEL:]ARGS", type=call_arguments, action="append",
                         help=f"the arguments of {what} as in a Python call, e.g. 'f32[128,256], eps=1e-5'; "
                              "'KERNEL: ...' for one kernel of a file with several, repeated per kernel (below)")
        sub.add_argument("--seed", type=int, default=0, help="seed of the random tensors (default: 0)")

    def add_kernel_arguments(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("target", metavar="FILE.py[:KERNEL]",
                         help="a Python file and the name of a kernel in it (optional if it has one)")
        add_arguments_options(sub, "the kernel")
        sub.add_argument("--config", metavar="JSON", help="helion.Config fields as a JSON object (below)")

    def add_output_type(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("-t", "--output-type", type=output_type_name, default="linalg-on-tensors",
                         metavar="T", help=output_help + " (default: linalg-on-tensors)")

    def add_tolerance_arguments(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--rtol", type=tolerance_value, help="relative tolerance for every output")
        sub.add_argument("--atol", type=tolerance_value, help="absolute tolerance for every output")

    emit = commands.add_parser("emit", help="print the verified MLIR module of a kernel", parents=[common],
                               description="Lower one kernel and print (or write) its verified MLIR module.",
                               epilog=EMIT_EPILOG, formatter_class=raw)
    add_kernel_arguments(emit)
    add_output_type(emit)
    emit.add_argument("-o", "--output", metavar="OUT", type=Path, help="write the module here instead of stdout")
    emit.add_argument("--debug-info", action="store_true",
                      help="print each op's source location, loc(\"file.py\":line:col) (as MLIR's "
                           "--mlir-print-debuginfo)")

    run = commands.add_parser("run", help="run a kernel on CPU and compare with Helion's reference mode",
                              parents=[common], epilog=RUN_EPILOG, formatter_class=raw,
                              description="Compile one kernel through MLIR, run it on CPU, and compare its "
                                          "results with Helion's reference mode on the same arguments.")
    add_kernel_arguments(run)
    add_output_type(run)
    add_tolerance_arguments(run)
    run.add_argument("--runtime", choices=RUNTIMES, default="jit",
                     help="jit: torch-mlir's ExecutionEngine in-process (default); iree: iree-compile for "
                          "llvm-cpu and IREE's runtime (needs iree-base-compiler and iree-base-runtime)")
    run.add_argument("--device", type=device_name, metavar="DEVICE", help=DEVICE_HELP)
    run.add_argument("--checked", action="store_true",
                     help="check every memory access at run time (plain pipeline, slower): an access out of "
                          "bounds fails naming the kernel source line instead of corrupting memory")

    check = commands.add_parser("check", help="lower every kernel in files or folders and summarize",
                                parents=[common], epilog=CHECK_EPILOG, formatter_class=raw,
                                description="Lower (and with --run, run) every kernel found and print a table.")
    check.add_argument("paths", nargs="+", metavar="PATH", help="Python files or folders (searched recursively)")
    check.add_argument("-t", "--output-type", type=output_type_name, action="append", metavar="T",
                       help=output_help + "; repeat for several (default: linalg-on-tensors)")
    add_arguments_options(check, "every kernel found (instead of make_args)")
    check.add_argument("--run", action="store_true", help="also run each verified kernel and compare with ref mode")
    check.add_argument("--iree", action="store_true",
                       help="also compile each verified kernel with IREE, run it and compare with the JIT's numbers")
    check.add_argument("--device", type=device_name, metavar="DEVICE", help=DEVICE_HELP.replace("--runtime iree", "--iree"))
    check.add_argument("--shape", choices=("divisible", "ragged"), default="divisible",
                       help="the shape kind passed to make_args and make_kwargs (default: divisible)")
    add_tolerance_arguments(check)

    tune = commands.add_parser("tune", help="find a kernel's best config for this CPU with Helion's autotuner",
                               parents=[common], epilog=TUNE_EPILOG, formatter_class=raw,
                               description="Autotune one kernel as backend=\"mlir\" does, cache the result, and "
                                           "time it against the default config and torch eager.")
    add_kernel_arguments(tune)
    add_output_type(tune)
    tune.add_argument("--effort", choices=("quick", "full"), default="quick",
                      help="Helion's autotune effort (default: quick)")
    tune.add_argument("--force", action="store_true", help="search even when a result is cached")

    ops = commands.add_parser("ops", help="list the ops that lower, per output type (of one kernel, or all)",
                              parents=[common], epilog=OPS_EPILOG, formatter_class=raw,
                              description="List the ops that lower to each output type: every op, or "
                                          "those of one kernel.")
    ops.add_argument("target", nargs="?", metavar="FILE.py[:KERNEL]",
                     help="a kernel whose ops to list (default: list every op)")
    add_arguments_options(ops, "the kernel")
    ops.add_argument("--config", metavar="JSON", help="helion.Config fields as a JSON object")
    ops.add_argument("--measure", action="store_true", help="measure the table instead of reading the document")

    pipeline = commands.add_parser("pipeline", help="print the steps of a CPU pipeline", parents=[common],
                                   epilog=PIPELINE_EPILOG, formatter_class=raw,
                                   description="Print the steps (upstream passes and the package's rewrites) "
                                               "that lower a module to LLVM on CPU, one a line.")
    pipeline.add_argument("--plain", action="store_true", help="the plain pipeline instead of the fast one")
    add_output_type(pipeline)
    pipeline.add_argument("--threads", type=int, help="OpenMP workers (default: torch's thread count)")
    pipeline.add_argument("--checked", action="store_true",
                          help="the plain pipeline with run-time checks of every memory access")

    cache = commands.add_parser("cache", help="show what the disk cache holds, or clear it", parents=[common],
                                description="Show the disk cache's directory and its entries per kind (compiled "
                                            "code, lowered ATen ops, Helion's host code), or remove them all. "
                                            "HELION_MLIR_CACHE=0 turns the cache off, HELION_MLIR_CACHE_DIR moves "
                                            "it, HELION_MLIR_CACHE_BYTES bounds it.")
    cache.add_argument("--clear", action="store_true", help="remove every entry (running processes then miss)")
    return parser
