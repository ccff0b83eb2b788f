"""docs/your-own-kernel.md runs as written: its files are written to a fresh folder, and its
commands run there in order (``helion-mlir ...`` in-process, ``python FILE`` as a script,
``iree-compile`` as a program), each one succeeding; ``run`` and ``check`` commands must
report a match. The tuning section runs with a short search budget."""

from __future__ import annotations

import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helion_mlir.runtime.iree.engine import iree_available
from helion_mlir_cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "your-own-kernel.md"
_BLOCK = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.DOTALL)


_SECTIONS = {"walk": ("1.", "2.", "3.", "4."), "tune": ("1.", "5."), "iree": ("1.", "6.")}


def _steps(section: str) -> list[tuple[str, str, str | None]]:
    """``(language, body, file name)`` of each code block of the doc's sections that make up
    ``section`` (:data:`_SECTIONS`), in order."""
    parts = re.split(r"^## ", DOC.read_text(), flags=re.MULTILINE)
    chosen = [p for p in parts if p.startswith(_SECTIONS[section])]
    return [(m["lang"], m["body"], m["file"]) for p in chosen for m in _BLOCK.finditer(p)]


def _run_command(line: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run one command line of the doc; return what it printed."""
    argv = shlex.split(line)
    if argv[0] == "helion-mlir":
        code = main(argv[1:])
        out, err = capsys.readouterr()
        assert code == 0, f"{line}\n{out}\n{err}"
        if argv[1] == "run":
            assert "match: " in out, f"{line}\n{out}"
        if argv[1] == "check":
            assert " 0 failed, 0 skipped" in out, f"{line}\n{out}"
        return out
    if argv[0] == "python":
        runpy.run_path(argv[1], run_name="__main__")
        return capsys.readouterr().out
    if argv[0].startswith("iree-"):
        program = Path(sys.executable).parent / argv[0]
        done = subprocess.run([str(program), *argv[1:]], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
        return done.stdout
    raise AssertionError(f"the doc runs a command the test does not know: {line}")


def _walk(section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """Write the files and run the commands of ``section``; return what the commands printed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    printed = []
    try:
        for language, body, file in _steps(section):
            if file is not None:
                (tmp_path / file).write_text(body)
                continue
            if language != "bash":
                continue
            for line in body.splitlines():
                if not line.strip() or line.startswith("#"):
                    continue
                printed.append(_run_command(line, capsys))
    finally:
        sys.modules.pop("mykernels", None)
    return "".join(printed)


def test_the_walkthrough_of_your_own_kernel_runs_as_written(tmp_path, monkeypatch, capsys) -> None:
    printed = _walk("walk", tmp_path, monkeypatch, capsys)
    assert "swiglu matches torch" in printed
    assert '"tosa.sigmoid"' in printed  # the module emitted to stdout with -t tosa
    assert "loc(" in (tmp_path / "add_layer_norm.mlir").read_text()


@pytest.mark.iree
@pytest.mark.skipif(not iree_available(), reason="IREE is not installed (pip install -e '.[test]')")
def test_the_iree_step_of_the_walkthrough_compiles_and_runs_in_iree(tmp_path, monkeypatch, capsys) -> None:
    _walk("iree", tmp_path, monkeypatch, capsys)
    assert (tmp_path / "swiglu.vmfb").stat().st_size > 0


@pytest.mark.slow
def test_the_tuning_step_of_the_walkthrough_prints_a_cpu_config(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HELION_AUTOTUNE_BUDGET_SECONDS", "15")  # the search; a user's default is 45 s
    printed = _walk("tune", tmp_path, monkeypatch, capsys)
    # "(the default config)" follows when the search found nothing faster than Helion's default
    assert re.search(r"^best config: helion\.Config\(block_sizes=\[\d+, \d+\]\)( \(the default config\))?$",
                     printed, re.MULTILINE), printed
