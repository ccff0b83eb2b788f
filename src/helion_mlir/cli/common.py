"""Pieces every subcommand shares: the errors that end a command and the stage a failure happened in."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import helion

from ..errors import HelionMLIRError
from ..output_type import OutputType

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

NEXT_FOR_STAGE = {
    "bind": "make --args match what the kernel expects (number of parameters, dtypes, ranks)",
    "lower": "see 'helion-mlir ops' for what lowers to each output type, or try another --output-type",
    "compile": "try another --output-type; if every output type fails, please report it",
    "run": "try another --output-type; if every output type fails, please report it",
    "reference": "check that the kernel runs eagerly on these --args",
}


class CommandError(Exception):
    """An expected failure: printed as an error line, details and a next step; no traceback."""

    def __init__(self, message: str, *, details: str = "", next_step: str = "", code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message, self.details, self.next_step, self.code = message, details, next_step, code


class StageError(Exception):
    """An exception raised while binding, lowering, compiling or running a kernel."""

    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(f"{stage}: {error}")
        self.stage, self.error = stage, error

    @property
    def details(self) -> str:
        """The error's own message; other exceptions (likely bugs) are named by their type."""
        if isinstance(self.error, (HelionMLIRError, helion.exc.Base)):
            return str(self.error)
        return f"{type(self.error).__name__}: {self.error}\n(rerun with --debug to see the traceback)"


@contextlib.contextmanager
def stage(stage: str) -> Iterator[None]:
    try:
        yield
    except Exception as err:
        raise StageError(stage, err) from err


# ---------------------------------------------------------------------------- parsing


def output_type(text: str) -> OutputType:
    try:
        return OutputType.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def tolerance_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a non-negative number")
    return value
