"""The commands of ``helion-mlir``: lower, run and check Helion kernels from the shell.

The command line is parsed by :mod:`helion_mlir_cli` (without importing torch, so that
``--help`` answers at once), which then calls :func:`execute`.

Expected failures (bad usage, a kernel that does not lower) print one ``error:`` line, the
helion_mlir message (which names the node and kernel source line) and what to do next;
``--debug`` adds the Python traceback. Exit codes: 0 success, 1 a kernel failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Callable

from .cache import cache_command
from .check import check_command
from .common import CommandError
from .emit import emit_command
from .ops import ops_command
from .pipeline import pipeline_command
from .run import run_command
from .tune import tune_command

__all__ = ["execute"]

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "emit": emit_command,
    "run": run_command,
    "check": check_command,
    "ops": ops_command,
    "pipeline": pipeline_command,
    "tune": tune_command,
    "cache": cache_command,
}


def execute(options: argparse.Namespace) -> int:
    """Run the parsed command line ``options`` and return the exit code."""
    _configure_logging(options.verbose)
    try:
        return COMMANDS[options.command](options)
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
