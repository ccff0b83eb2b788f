"""Run FileCheck patterns (the ``filecheck`` Python package) against text in a test."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path


def run_filecheck(text: str, patterns: str, *, extra_args: tuple[str, ...] = ()) -> None:
    """Check ``text`` against FileCheck ``patterns`` (``// CHECK: ...`` lines).

    Raises AssertionError with FileCheck's report and the numbered input on a mismatch.
    """
    checks = textwrap.dedent(patterns)
    with tempfile.TemporaryDirectory() as tmp:
        check_file = Path(tmp) / "checks.mlir"
        check_file.write_text(checks)
        proc = subprocess.run(
            [sys.executable, "-m", "filecheck", *extra_args, str(check_file)],
            input=text,
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        numbered = "\n".join(f"{n:4d} | {line}" for n, line in enumerate(text.splitlines(), 1))
        raise AssertionError(
            f"FileCheck failed:\n{proc.stdout}{proc.stderr}\n--- checks ---\n{checks}\n--- input ---\n{numbered}"
        )
