"""The ``helion-mlir`` command: parse the command line, then run the command in :mod:`helion_mlir.cli`.

This package stands beside ``helion_mlir`` rather than inside it because importing
``helion_mlir`` prepares Helion, which imports torch and Helion (seconds). ``--help`` and
usage errors must answer at once, so parsing (this package) uses only the standard
library, and the command's modules are imported after the command line has parsed.

Exit codes: 0 success, 1 a kernel failed, 2 bad usage.
"""

from __future__ import annotations

from collections.abc import Sequence

from .parser import build_parser, check_arguments_options

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_USAGE = 0, 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    try:
        options = parser.parse_args(argv)
        check_arguments_options(parser, options)
    except SystemExit as stop:  # argparse has printed the help or the usage error
        return stop.code if isinstance(stop.code, int) else EXIT_OK if stop.code is None else EXIT_USAGE
    # Imported here, after parsing, for start-up time only (there is no import cycle):
    # helion_mlir.cli imports torch and Helion.
    from helion_mlir.cli import execute

    return execute(options)
