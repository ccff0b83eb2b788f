"""The ``helion-mlir`` command: emit, run, check and ops, run in-process through ``main(argv)``,
plus the console script and ``python -m helion_mlir`` as subprocesses."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helion_mlir import OutputType, batch, caches, verify_module_text
from helion_mlir.cli import ops as cli_ops
from helion_mlir.cli import run as cli_run
from helion_mlir.cli.kernel_loading import load_module
from helion_mlir.importer.op_catalog import CATALOG
from helion_mlir.importer.op_support import OpSupport
from helion_mlir.runtime.iree.engine import device_available, iree_available
from helion_mlir_cli import main

ROOT = Path(__file__).resolve().parents[1]
ADD = ROOT / "examples" / "add.py"
ADD_ARGS = "f32[32,64], f32[32,64]"

# Lowering rejects inline assembly with a node error that names this line.
ASM_KERNEL = textwrap.dedent(
    """\
    import torch
    import helion
    import helion.language as hl


    @helion.kernel(config=helion.Config(block_sizes=[16]))
    def asm_copy(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = hl.inline_asm_elementwise("mov.u32 $0, $1;", "=r,r", [x[tile]], dtype=torch.int32, is_pure=True, pack=1)
        return out


    def make_args(shape="divisible"):
        return (torch.arange(32, dtype=torch.int32),)
    """
)
ASM_LINE = 10


# A kernel with a default, a float parameter, a string option and an assert in its host code.
SCALED_KERNEL = textwrap.dedent(
    """\
    import torch
    import helion
    import helion.language as hl


    @helion.kernel(config=helion.Config(block_sizes=[8, 16]))
    def scaled_act(x: torch.Tensor, bias: torch.Tensor, scale: float = 1.0, activation: str = "relu") -> torch.Tensor:
        m, n = x.size()
        assert bias.size(0) == n, "bias must have one value per column"
        out = torch.empty_like(x)
        for tm, tn in hl.tile([m, n]):
            v = x[tm, tn] * scale + bias[tn][None, :]
            if activation == "relu":
                v = torch.relu(v)
            else:
                v = torch.sigmoid(v)
            out[tm, tn] = v
        return out
    """
)
SCALED_ASSERT_LINE = 9


@pytest.fixture
def scaled_file(tmp_path: Path) -> Path:
    path = tmp_path / "scaled.py"
    path.write_text(SCALED_KERNEL)
    return path


def check_rows(out: str) -> dict[str, str]:
    """The rows of a ``check`` table by their first column (the lines before the summary)."""
    lines = out.splitlines()
    end = next(i for i, line in enumerate(lines) if re.match(r"\d+ passed, \d+ failed, \d+ skipped$", line))
    return {line.split()[0]: line for line in lines[1:end]}


@pytest.fixture
def asm_file(tmp_path: Path) -> Path:
    path = tmp_path / "asm.py"
    path.write_text(ASM_KERNEL)
    return path


@pytest.mark.parametrize("output_type", ["linalg", "tosa"])
def test_emit_writes_a_module_that_verifies(tmp_path: Path, capsys, output_type: str) -> None:
    out = tmp_path / "add.mlir"
    assert main(["emit", f"{ADD}:add", "--args", ADD_ARGS, "-t", output_type, "-o", str(out)]) == 0
    text = out.read_text()
    verify_module_text(text)
    assert "func.func @add(%x: tensor<32x64xf32>, %y: tensor<32x64xf32>" in text
    assert ("tosa.add" in text) == (output_type == "tosa")
    assert f"wrote {out}" in capsys.readouterr().err
    assert "loc(" not in text


def test_emit_prints_source_locations_with_debug_info(capsys) -> None:
    assert main(["emit", f"{ADD}:add", "--args", ADD_ARGS, "--debug-info"]) == 0
    text = capsys.readouterr().out
    verify_module_text(text)
    assert f'loc("{ADD.resolve()}":' in text


def test_emit_prints_to_stdout_with_config_and_make_args_and_logs_with_verbose(capsys) -> None:
    matmul = ROOT / "examples" / "matmul.py"
    assert main(["-v", "emit", str(matmul), "--config", '{"block_sizes": [16, 16, 32]}']) == 0
    captured = capsys.readouterr()
    verify_module_text(captured.out)
    assert "tensor<32x64xf32> to tensor<16x32xf32>" in captured.out  # make_args' x, config's tiles
    assert "emitted kernel matmul" in captured.err


def test_run_reports_matching_results_and_times(capsys) -> None:
    rms_norm = ROOT / "examples" / "rms_norm.py"
    assert main(["run", str(rms_norm), "--args", "f32[16,64], f32[64], 1e-5", "-t", "tosa"]) == 0
    out = capsys.readouterr().out
    assert "args: x=f32[16,64], weight=f32[64], eps=1e-05" in out
    assert "result  f32[16,64]" in out and "rtol=0.0001 atol=0.0001  ok" in out
    assert "times: emit" in out and "compile" in out and "run" in out
    assert "match: 1 output(s) agree" in out


def test_run_exits_1_when_results_differ(monkeypatch, capsys) -> None:
    real = cli_run.reference_kernel
    monkeypatch.setattr(cli_run, "reference_kernel", lambda kernel: lambda *args: real(kernel)(*args) + 0.5)
    assert main(["run", str(ADD), "--args", ADD_ARGS, "--atol", "0.25"]) == 1
    out = capsys.readouterr().out
    assert "result  f32[32,64]  0.5" in out and "MISMATCH: beyond tolerance" in out
    assert "mismatch: 1 of 1 output(s) differ" in out


def test_check_tables_good_failing_broken_and_skipped_files(tmp_path: Path, asm_file: Path, capsys,
                                                            monkeypatch) -> None:
    for name in ("add.py", "exp.py"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    (tmp_path / "broken.py").write_text("import helion\ndef f(:\n")
    (tmp_path / "no_args.py").write_text(ASM_KERNEL.replace("def make_args", "def other"))

    assert main(["check", str(tmp_path / "add.py"), str(tmp_path / "exp.py"), "--run"]) == 0
    assert "2 passed, 0 failed, 0 skipped" in capsys.readouterr().out

    assert main(["check", str(tmp_path), "--run"]) == 1
    captured = capsys.readouterr()
    rows = check_rows(captured.out)
    assert rows[f"{tmp_path / 'add.py'}:add"].split()[1:6] == ["linalg-on-tensors", "9", "yes", "yes", "yes"]
    assert rows[f"{tmp_path / 'exp.py'}:exp_kernel"].split()[3:6] == ["yes", "yes", "yes"]
    assert "inline assembly is specific to a GPU back end" in rows[f"{asm_file}:asm_copy"]
    assert f"{asm_file}:{ASM_LINE}" in rows[f"{asm_file}:asm_copy"]
    assert "import failed: SyntaxError" in rows[str(tmp_path / "broken.py")]
    assert "skipped: no arguments (define make_args(), or pass --args)" in rows[f"{tmp_path / 'no_args.py'}:asm_copy"]
    assert "2 passed, 2 failed, 1 skipped" in captured.out
    assert "hint: express the operation with torch ops" in captured.out  # the full failure message
    assert "3/3" not in captured.err  # no progress bar drawn into a pipe or file
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["check", str(tmp_path / "add.py")]) == 0
    assert "1/1" in capsys.readouterr().err  # on a terminal, the progress bar


def test_check_leaves_out_virtual_environments_installed_packages_and_build_folders(tmp_path: Path, capsys) -> None:
    # Importing a package from its sources inside a venv runs arbitrary code (numpy's did
    # and ended the run); each file below would be reported if it were imported.
    shutil.copy(ADD, tmp_path / "add.py")
    imported = "raise SystemExit('imported')\n"
    for folder in ("venv/lib/python3.11/site-packages/pkg", ".venv/lib/pkg", "env/site-packages/pkg",
                   "build/lib/pkg", "dist", "pkg.egg-info", "node_modules/pkg", ".git", "src/__pycache__"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "module.py").write_text(imported)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a venv under any name
    (tmp_path / "src" / "kernel_helpers.py").write_text("SCALE = 2\n")  # an ordinary folder is searched
    assert main(["check", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 passed, 0 failed, 0 skipped" in out
    assert "imported" not in out
    # A file named explicitly is taken even inside such a folder.
    assert main(["check", str(tmp_path / "build" / "lib" / "pkg" / "module.py")]) == 1
    assert "import failed: SystemExit: imported" in capsys.readouterr().out


def test_check_reports_files_that_fail_to_import_or_to_be_read_and_goes_on(tmp_path: Path, capsys) -> None:
    shutil.copy(ADD, tmp_path / "z_add.py")  # sorted last: checked after every broken file
    (tmp_path / "a_raises.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "b_exits.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "c_syntax.py").write_text("def f(:\n")
    # A lazy module whose __getattr__ fails (as numpy's sources do outside their package).
    (tmp_path / "d_lazy.py").write_text(ASM_KERNEL.replace("def make_args", "def unused")
                                        + "\ndef __getattr__(name):\n    raise ImportError('lazy import failed')\n")
    (tmp_path / "e_args_exit.py").write_text(ADD.read_text().replace(
        "def make_args(shape: str = \"divisible\", dtype: torch.dtype | None = None) -> tuple:",
        "def make_args(shape: str = \"divisible\", dtype: torch.dtype | None = None) -> tuple:\n    raise SystemExit(4)"))
    assert main(["check", str(tmp_path), "--run"]) == 1
    out = capsys.readouterr().out
    rows = check_rows(out)
    assert "import failed: RuntimeError: boom at import" in rows[str(tmp_path / "a_raises.py")]
    assert "import failed: SystemExit: 3" in rows[str(tmp_path / "b_exits.py")]
    assert "import failed: SyntaxError" in rows[str(tmp_path / "c_syntax.py")]
    assert "reading the module failed: ImportError: lazy import failed" in rows[str(tmp_path / "d_lazy.py")]
    assert "make_args('divisible') failed: SystemExit: 4" in rows[f"{tmp_path / 'e_args_exit.py'}:add"]
    assert rows[f"{tmp_path / 'z_add.py'}:add"].split()[1:6] == ["linalg-on-tensors", "9", "yes", "yes", "yes"]
    assert "1 passed, 5 failed, 0 skipped" in out


def test_batch_reports_an_error_raised_by_mistake_and_goes_on(monkeypatch) -> None:
    # Only HelionMLIRError is raised on purpose; anything else is a bug, still reported per kernel.
    module = load_module(ADD)
    emit = batch.emit_unverified

    def emit_or_fail(model, output_type):
        if output_type is OutputType.TOSA:
            raise KeyError("a bug")
        return emit(model, output_type)

    monkeypatch.setattr(batch, "emit_unverified", emit_or_fail)
    report = batch.check_kernels([batch.KernelCase("add", module.KERNEL, module.make_args())], ["tosa", "raw"])
    assert [(r.output_type, r.status, r.reason) for r in report.results] == [
        ("tosa", "emit-failed", "KeyError: 'a bug'"), ("raw", "verified", "")]


@pytest.mark.iree
@pytest.mark.skipif(not iree_available(), reason="IREE is not installed")
def test_run_with_the_iree_runtime_compares_iree_with_reference_mode(capsys) -> None:
    assert main(["run", str(ADD), "--args", ADD_ARGS, "-t", "stablehlo", "--runtime", "iree"]) == 0
    out = capsys.readouterr().out
    assert "output type stablehlo, runtime iree" in out
    assert "match: 1 output(s) agree with Helion's reference mode" in out


@pytest.mark.iree
@pytest.mark.skipif(not iree_available(), reason="IREE is not installed")
def test_check_with_iree_reports_per_output_type_whether_iree_agrees_with_the_jit(tmp_path: Path, capsys) -> None:
    shutil.copy(ROOT / "examples" / "histogram.py", tmp_path / "histogram.py")
    code = main(["check", str(tmp_path / "histogram.py"), "-t", "linalg", "-t", "tosa", "--iree", "--shape", "ragged"])
    out = capsys.readouterr().out
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith(str(tmp_path))}
    assert out.splitlines()[0].split()[6] == "iree"  # after "output type"
    assert rows["linalg-on-tensors"].split()[2:6] == ["14", "yes", "yes", "yes"]
    # A kernel converting to int64: IREE validates TOSA against the spec's profiles.
    assert rows["tosa"].split()[5:7] == ["no", "compile"]
    assert "'tosa.cast' op illegal" in out and "histogram.py:" in out
    assert code == 1 and "1 passed, 1 failed" in out


@pytest.mark.iree
@pytest.mark.skipif(not iree_available(), reason="IREE is not installed")
def test_check_with_iree_for_a_gpu_says_the_module_compiles_where_the_gpu_is_missing(capsys) -> None:
    if device_available("vulkan"):
        pytest.skip("a Vulkan GPU is present: the kernel runs there")
    assert main(["check", str(ADD), "--args", ADD_ARGS, "--iree", "--device", "vulkan:rdna3"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(str(ADD)))
    assert row.split()[2:7] == ["9", "yes", "yes", "compiles", row.split()[6]]


@pytest.mark.iree
@pytest.mark.skipif(not iree_available(), reason="IREE is not installed")
def test_run_on_iree_for_another_cpu_model_compares_with_reference_mode(capsys) -> None:
    assert main(["run", str(ADD), "--args", ADD_ARGS, "--runtime", "iree", "--device", "cpu:x86-64"]) == 0
    out = capsys.readouterr().out
    assert "runtime iree on cpu:x86-64" in out and "match: 1 output(s)" in out


def test_ops_prints_rule_targets_and_the_support_table(capsys) -> None:
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "memory_ops: load, store" in out
    supported, _, refused = out.partition("Node targets refused on purpose")
    assert "device_print" not in supported.split("ATen/prims ops per output type")[0]
    assert "device_print.device_print: device_print has no MLIR lowering" in refused
    assert "inline_asm_ops.inline_asm_elementwise: inline assembly" in refused
    assert "ATen/prims ops: via torch-mlir" in out
    header = next(line for line in out.splitlines() if line.startswith("target "))
    assert header.split() == ["target", *(t.value for t in OutputType)]
    assert any(line.split()[:5] == ["aten.add.Tensor", "yes", "yes", "yes", "yes"] for line in out.splitlines())


def test_ops_measure_renders_a_fresh_measurement(monkeypatch, capsys) -> None:
    failures = {(case.name, ot): {} for case in CATALOG for ot in OutputType}
    failures[("aten.add.Tensor", OutputType.TOSA)][("f32", "symbolic")] = "'tosa.add' op <fake> failure"
    monkeypatch.setattr(cli_ops, "measure_op_support", lambda: OpSupport(failures))
    assert main(["ops", "--measure"]) == 0
    out = capsys.readouterr().out
    assert "(measured now)" in out
    row = next(line for line in out.splitlines() if line.startswith("aten.add.Tensor "))
    assert "no: f32 symbolic [1]" in row
    assert "[1] 'tosa.add' op <fake> failure" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["emit", str(ADD), "--args", "f32[32,64"], "argument --args: '[' was never closed"),
        (["emit", str(ADD), "--args", "f8[32,64], f32[32,64]"],
         "argument 1 (f8[32, 64]): name 'f8' is not defined; tensor dtypes are f32 f64 bf16"),
        (["run", str(ADD), "--args", "f32[32,x], f32[32,64]"], "name 'x' is not defined; sizes are integers"),
        (["emit", str(ADD), "--args", "f32[32,64]"], "missing a required argument: 'y'; the kernel is add(x, y)"),
        (["emit", str(ADD), "--args", "f32[32,64], f32[32,64], f32[2]"], "too many positional arguments"),
        (["emit", str(ADD), "--args", "f32[32,64], z=f32[32,64]"], "unexpected keyword argument 'z'"),
        (["emit", str(ADD), "--args", "f32[32,64], 2"], "parameter 'y' takes a tensor, got 2 (int)"),
        (["emit", str(ADD), "--args", "f32[99999999999,99999999999], f32[2]"],
         "f32[99999999999,99999999999] takes 3.64e+10 TiB, more than the"),
        (["emit", str(ADD), "--args", "torch.empty(-1), f32[2]"], "argument 1 (torch.empty(-1)): RuntimeError"),
        (["emit", str(ROOT / "examples" / "missing.py")], "no such file"),
        (["emit", str(ROOT / "examples")], "is a folder: this command takes one kernel, FILE.py[:KERNEL]"),
        (["run", str(ADD), "--config", '{"block_sizes": [8]}'], "--config does not fit kernel 'add'"),
        (["emit", f"{ADD}:nope"], "has no helion kernel named 'nope' (kernels there: add)"),
        (["emit", str(ADD), "--config", "{block_sizes: [8]}"], "--config is not valid JSON"),
        (["emit", str(ADD), "--config", '{"block_sizes": [8, 8], "block_sizez": [8]}'],
         "Invalid config keys ['block_sizez']"),
        (["emit", str(ADD), "-t", "spirv"], "unknown output type 'spirv'"),
        (["check", str(ROOT / "missing")], "no such file or folder"),
        (["check"], "the following arguments are required: PATH"),
        (["ops", "--args", "f32[2]"], "--args and --config describe a kernel"),
        (["run", str(ADD), "--device", "cuda"], "--device cuda is a device IREE compiles for"),
        (["run", str(ADD), "--runtime", "iree", "--device", "tpu:v5"], "unknown device 'tpu:v5'"),
        (["check", str(ADD), "--device", "rocm"], "--device rocm is a device IREE compiles for"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_lowering_failure_exits_1_and_shows_a_traceback_only_with_debug(asm_file: Path, capsys) -> None:
    assert main(["emit", str(asm_file), "-t", "stablehlo"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("helion-mlir: error: cannot lower kernel 'asm_copy' to stablehlo\n")
    assert f"node 'inline_asm_elementwise' (inline_asm_ops.inline_asm_elementwise) at {asm_file}:{ASM_LINE}" in err
    assert "next: " in err and "Traceback" not in err
    assert main(["--debug", "emit", str(asm_file)]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["emit", "run", "check", "ops", "tune"])
def test_every_help_shows_an_example(command: str, capsys) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "example" in out
    assert any(line.strip().startswith(f"helion-mlir {command}") for line in out.splitlines())


def test_tune_help_says_what_is_timed_and_how_to_time_torch_eager(capsys) -> None:
    assert main(["tune", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "defines reference(...): a plain-torch function that takes the kernel's arguments" in out
    assert "when a call of the default config is faster than one of the search's best, the default is cached" in out


def test_console_script_and_python_dash_m() -> None:
    """Both entry points, started together to halve the wait for their imports."""
    script = Path(sys.executable).parent / "helion-mlir"
    assert script.exists(), "reinstall the package: python -m pip install -e . --no-deps"
    emit = subprocess.Popen([str(script), "emit", str(ADD), "--args", ADD_ARGS, "-t", "tosa"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bad = subprocess.Popen([sys.executable, "-m", "helion_mlir", "emit", str(ADD), "--args", "f32[32,64], 7"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    emit_out, emit_err = emit.communicate(timeout=300)
    _, bad_err = bad.communicate(timeout=300)
    assert emit.returncode == 0, emit_err
    verify_module_text(emit_out)
    assert bad.returncode == 2
    assert bad_err.startswith("helion-mlir: error: bad --args for kernel 'add': parameter 'y' takes a tensor"), bad_err


def test_run_takes_keywords_strings_and_an_int_for_a_float_parameter(scaled_file: Path, capsys) -> None:
    args = 'f32[16,48], f32[48], 30, activation="sigmoid"'
    assert main(["run", str(scaled_file), "--args", args]) == 0
    out = capsys.readouterr().out
    assert "args: x=f32[16,48], bias=f32[48], scale=30.0, activation='sigmoid'" in out
    assert "match: 1 output(s) agree" in out
    assert main(["emit", str(scaled_file), "--args", args]) == 0
    assert "%scale: f64" in capsys.readouterr().out  # a float, as from Python (30 alone would be an i64)


def test_run_says_the_kernels_host_code_refused_the_arguments(scaled_file: Path, capsys) -> None:
    assert main(["run", str(scaled_file), "--args", "f32[16,48], f32[40]"]) == 2
    err = capsys.readouterr().err
    assert "error: kernel 'scaled_act' refused these arguments: its host code raised" in err
    assert "AssertionError: bias must have one value per column" in err
    assert "assert bias.size(0) == n" in err  # the line that raised
    assert "failed on the CPU" not in err and "another --output-type" not in err and "Traceback" not in err


def test_a_kernel_without_arguments_names_its_parameters(scaled_file: Path, capsys) -> None:
    assert main(["emit", str(scaled_file)]) == 2
    assert ("error: kernel scaled_act(x, bias, scale=1.0, activation='relu') needs arguments: pass --args, "
            f"or define make_args() in {scaled_file}") in capsys.readouterr().err


def test_check_exits_1_when_no_kernel_has_arguments_and_takes_args(scaled_file: Path, capsys) -> None:
    assert main(["check", str(scaled_file)]) == 1
    out = capsys.readouterr().out
    assert "skipped: no arguments (define make_args(), or pass --args)" in out
    assert "nothing was checked: no kernel has arguments" in out
    assert main(["check", str(scaled_file), "--args", "f32[16,48], f32[48], scale=2", "--run"]) == 0
    rows = check_rows(capsys.readouterr().out)
    assert rows[f"{scaled_file}:scaled_act"].split()[1:6] == ["linalg-on-tensors", "13", "yes", "yes", "yes"]
    assert main(["check", str(scaled_file), "--args", "f32[16,48], f32[40]", "--run"]) == 1
    row = check_rows(capsys.readouterr().out)[f"{scaled_file}:scaled_act"]
    assert "the kernel's host code refused the arguments: AssertionError: bias must have one value" in row


def test_check_finds_imported_kernels_with_make_kwargs_once(tmp_path: Path, capsys) -> None:
    # kernels_for_uses.py defines the kernel without arguments; uses.py imports it and gives them.
    (tmp_path / "kernels_for_uses.py").write_text(SCALED_KERNEL)
    (tmp_path / "uses.py").write_text(textwrap.dedent(
        """\
        import torch
        from kernels_for_uses import scaled_act

        def make_args(shape="divisible"):
            return (torch.randn(16, 48 if shape == "divisible" else 37), torch.randn(48 if shape == "divisible" else 37))

        def make_kwargs(shape="divisible"):
            return {"activation": "sigmoid", "scale": 0.5}
        """))
    assert main(["check", str(tmp_path), "--run", "--shape", "ragged"]) == 0
    out = capsys.readouterr().out
    rows = check_rows(out)
    assert list(rows) == [f"{tmp_path / 'uses.py'}:scaled_act"]  # checked where it has arguments, once
    assert rows[f"{tmp_path / 'uses.py'}:scaled_act"].split()[3:6] == ["yes", "yes", "yes"]
    assert "1 passed, 0 failed, 0 skipped" in out
    assert main(["emit", str(tmp_path / "uses.py")]) == 0
    assert "%x: tensor<16x48xf32>" in capsys.readouterr().out  # make_args() of the importing file


# Three kernels in one file: two with example arguments of their own, one without.
SEVERAL_KERNELS = textwrap.dedent(
    """\
    import torch
    import helion
    import helion.language as hl


    @helion.kernel(config=helion.Config(block_sizes=[16, 32]))
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm, tn in hl.tile(out.size()):
            out[tm, tn] = x[tm, tn] + y[tm, tn]
        return out


    @helion.kernel(config=helion.Config(block_sizes=[16]))
    def row_scale(x: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm in hl.tile(x.size(0)):
            out[tm, :] = x[tm, :] * scale
        return out


    @helion.kernel(config=helion.Config(block_sizes=[16]))
    def negate(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm in hl.tile(x.size(0)):
            out[tm] = -x[tm]
        return out


    def make_args_add(shape="divisible"):
        rows = 64 if shape == "divisible" else 50
        return torch.randn(rows, 40), torch.randn(rows, 40)


    def make_args_row_scale(shape="divisible"):
        return (torch.randn(48, 24),)


    def make_kwargs_row_scale(shape="divisible"):
        return {"scale": 0.5}
    """
)


def test_a_file_with_several_kernels_gives_each_its_arguments_by_name(tmp_path: Path, capsys) -> None:
    """make_args_<kernel> / make_kwargs_<kernel> per kernel, and --args 'KERNEL: ...' per kernel,
    in check, run and emit; a kernel with neither is skipped with what to write."""
    path = tmp_path / "several.py"
    path.write_text(SEVERAL_KERNELS)
    assert main(["check", str(path), "--run", "--shape", "ragged"]) == 0
    captured = capsys.readouterr()
    rows = check_rows(captured.out)
    for name in ("add", "row_scale"):
        assert rows[f"{path}:{name}"].split()[1:6] == ["linalg-on-tensors", rows[f"{path}:{name}"].split()[2],
                                                        "yes", "yes", "yes"]
    assert ("skipped: no arguments (define make_args_negate(), or pass --args 'negate: ...')"
            in rows[f"{path}:negate"])
    assert "2 passed, 0 failed, 1 skipped" in captured.out
    assert "[#" not in captured.err  # no progress bar drawn into a pipe

    assert main(["check", str(path), "--run", "--args", "negate: f32[33]", "--args", "add: f32[8,8], f32[8,8]"]) == 0
    out = capsys.readouterr().out
    assert "3 passed, 0 failed, 0 skipped" in out
    assert main(["run", f"{path}:row_scale"]) == 0
    assert "args: x=f32[48,24], scale=0.5" in capsys.readouterr().out  # make_kwargs_row_scale
    assert main(["emit", f"{path}:add"]) == 0
    assert "%x: tensor<64x40xf32>" in capsys.readouterr().out  # make_args_add
    assert main(["emit", f"{path}:negate", "--args", "add: f32[2,2], f32[2,2]", "--args", "negate: f32[5]"]) == 0
    assert "%x: tensor<5xf32>" in capsys.readouterr().out

    assert main(["check", str(path), "--args", "negat: f32[33]"]) == 2
    assert "--args names kernel 'negat', which is not a kernel of the files checked (did you mean 'negate'?)" \
        in capsys.readouterr().err
    assert main(["emit", f"{path}:negate"]) == 2
    assert "needs arguments: pass --args, or define make_args_negate() in" in capsys.readouterr().err
    assert main(["emit", f"{path}:negate", "--args", "negate: f32[4]", "--args", "negate: f32[8]"]) == 2
    assert "--args given twice for kernel 'negate'" in capsys.readouterr().err


def test_ops_of_a_kernel_lists_its_ops_and_where_each_output_type_stops(asm_file: Path, capsys) -> None:
    assert main(["ops", str(ROOT / "examples" / "rms_norm.py")]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:] if line and not line.startswith(("(", "["))}
    assert rows["memory_ops.load"][3] == "rules.load_store" and rows["memory_ops.store"][3] == "rules.load_store"
    assert rows["aten.rsqrt.default"][3:] == ["torch-mlir", "yes", "yes", "yes", "yes"]
    assert out.splitlines()[0].startswith("kernel rms_norm (") and "args: x=f32[" in out.splitlines()[0]
    assert main(["ops", str(asm_file)]) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.startswith("inline_asm_ops."))
    assert row[3:] == ["refused", "no", "[1]", "no", "[1]", "no", "[1]", "no", "[1]"]
    assert "[1] raw, linalg-on-tensors, tosa, stablehlo: node 'inline_asm_elementwise'" in out
    assert next(line.split() for line in out.splitlines() if line.startswith("memory_ops.load"))[4:] == ["?"] * 4


def test_cache_lists_entries_per_kind_and_clear_removes_them(disk_cache_dir: Path, capsys) -> None:
    tmp_path = disk_cache_dir
    caches.DiskCache("op", durable=False).write([("a" * 64, {}, b"x" * 100), ("b" * 64, {}, b"y")])
    caches.DiskCache("host", durable=False).write([("c" * 64, {}, b"z" * 2048)])
    (tmp_path / ".op-left-by-a-dead-writer.tmp").write_bytes(b"partial")
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert f"directory: {tmp_path}" in out
    assert re.search(r"host\s+1 entries .*Helion's host code", out)
    assert re.search(r"op\s+2 entries .*lowered ATen ops", out)
    assert main(["cache", "--clear"]) == 0
    assert "removed 3 entries" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_cache_says_when_it_is_off_and_refuses_a_size_limit_that_is_not_a_number(monkeypatch, capsys) -> None:
    monkeypatch.setenv(caches.ENABLE_VARIABLE, "0")
    assert main(["cache"]) == 0
    assert "the disk cache is off (HELION_MLIR_CACHE=0)" in capsys.readouterr().out
    monkeypatch.setenv(caches.BYTES_VARIABLE, "1 GiB")
    assert main(["cache", "--clear"]) == 2
    err = capsys.readouterr().err
    assert "HELION_MLIR_CACHE_BYTES='1 GiB'" in err and "next:" in err
