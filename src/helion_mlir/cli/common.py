"""Pieces every subcommand shares: the errors that end a command and the stage a failure happened in."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import helion

from ..errors import HelionMLIRError
from ..generate import bind_kernel

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

NEXT_FOR_STAGE = {
    "bind": "make --args match what the kernel expects (number of parameters, dtypes, ranks)",
    "config": "give --config fields that fit the kernel (one power-of-two block size per hl.tile dimension)",
    "lower": "'helion-mlir ops FILE.py[:KERNEL]' lists the kernel's ops and their support per output type; "
             "or try another --output-type",
    "compile": "try another --output-type; if every output type fails, please report it",
    "host": "pass arguments the kernel accepts (--args, or the file's make_args)",
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

    def __init__(self, stage: str, error: BaseException, *, where: str = "") -> None:
        super().__init__(f"{stage}: {error}")
        self.stage, self.error, self.where = stage, error, where

    @property
    def details(self) -> str:
        """The error's own message; other exceptions (likely bugs) are named by their type.
        An error of the kernel's own host code says where it was raised instead."""
        if isinstance(self.error, (HelionMLIRError, helion.exc.Base)):
            return str(self.error)
        message = f"{type(self.error).__name__}: {self.error}".removesuffix(": ")
        if self.stage == "host":
            return message + (f"\n{self.where}" if self.where else "")
        return f"{message}\n(rerun with --debug to see the traceback)"


@contextlib.contextmanager
def stage(stage: str) -> Iterator[None]:
    """Failures inside the block are the stage's; a config Helion refuses (raised by the
    entry point that resolves it) is the ``config`` stage's, whatever the block."""
    try:
        yield
    except helion.exc.InvalidConfig as err:
        raise StageError("config", err) from err
    except Exception as err:
        raise StageError(stage, err) from err


def bind(kernel: helion.Kernel, args: tuple[Any, ...]) -> Any:
    """``kernel`` bound to ``args``.

    Binds under the front-end lock, as every bind of the package's does (Helion's bind is
    not safe in two threads at once). The config is resolved by the entry point the command
    calls next (``generate_mlir``, ``compile_kernel``), once."""
    with stage("bind"):
        return bind_kernel(kernel, args)


def first_line(text: str) -> str:
    """The first non-blank line of a message (for a table cell)."""
    return text.strip().splitlines()[0] if text.strip() else ""
