"""``--args`` of the ``helion-mlir`` command (its syntax, its values, the kernel's parameters)
and what parsing the command line costs: no import of torch before a command runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import helion
import helion.language as hl
import pytest
import torch

from helion_mlir import OutputType
from helion_mlir.cli.arguments import DTYPES, ArgumentsError, arguments_from_file, describe_call, evaluate_call
from helion_mlir.runtime.kernel.compiled_kernel import RUNTIMES
from helion_mlir.runtime.iree.devices import DEVICE_KINDS
from helion_mlir.runtime.cpu.pipelines import DUMP_ENVIRONMENT_VARIABLE
from helion_mlir_cli.call_syntax import DTYPE_NAMES, INT_RANGE, CallSyntaxError, parse_call
from helion_mlir_cli.parser import DEVICE_KINDS as PARSER_DEVICE_KINDS
from helion_mlir_cli.parser import DUMP_PIPELINE_VARIABLE, OUTPUT_TYPES
from helion_mlir_cli.parser import RUNTIMES as PARSER_RUNTIMES


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def scaled(x: torch.Tensor, bias: torch.Tensor | None = None, scale: float = 1.0, mode: str = "relu",
           steps: int = 1) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        v = x[tm, tn] * scale
        if bias is not None:
            v = v + bias[tn][None, :]
        out[tm, tn] = torch.relu(v) if mode == "relu" else torch.sigmoid(v)
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def unannotated(x, eps=1e-5, count=2):  # noqa: ANN001, ANN202
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + eps * count
    return out


def evaluate(text: str, kernel: helion.Kernel = scaled, **options) -> tuple:
    return evaluate_call(parse_call(text), kernel, **options)


def test_the_parser_spells_the_packages_output_types_runtimes_devices_and_dtypes() -> None:
    assert OUTPUT_TYPES == tuple(t.value for t in OutputType)
    assert PARSER_RUNTIMES == RUNTIMES
    assert PARSER_DEVICE_KINDS == DEVICE_KINDS
    assert DUMP_PIPELINE_VARIABLE == DUMP_ENVIRONMENT_VARIABLE
    assert tuple(DTYPES) == DTYPE_NAMES


def test_tensor_shorthands_make_seeded_random_tensors_of_each_dtype() -> None:
    spelled = ", ".join(f"{name}[2, 3]" for name in DTYPE_NAMES) + ", f32[], bool[4]"
    call = parse_call(f"({spelled},)")  # one tuple, for the unannotated x
    tensors = evaluate_call(call, unannotated)[0]
    assert [t.dtype for t in tensors] == [*DTYPES.values(), torch.float32, torch.bool]
    assert [tuple(t.shape) for t in tensors] == [(2, 3)] * len(DTYPES) + [(), (4,)]
    integers = torch.cat([t.flatten().long() for t in tensors if not (t.dtype.is_floating_point or t.dtype == torch.bool)])
    assert INT_RANGE[0] <= integers.min() and integers.max() < INT_RANGE[1]
    again, other_seed = evaluate_call(call, unannotated)[0], evaluate_call(call, unannotated, seed=1)[0]
    assert all(torch.equal(a.float(), b.float()) for a, b in zip(tensors, again))
    assert not torch.equal(tensors[0], other_seed[0])


def test_arguments_bind_like_a_python_call_with_defaults_applied() -> None:
    x, bias, scale, mode, steps = evaluate('f32[8,16], mode="sigmoid", steps=3')
    assert tuple(x.shape) == (8, 16) and bias is None and scale == 1.0 and mode == "sigmoid" and steps == 3
    assert evaluate("f32[8,16], f32[16], 2.5, 'relu'")[2:4] == (2.5, "relu")
    assert describe_call(scaled, evaluate("f32[8,16], scale=2")) == (
        "x=f32[8,16], bias=None, scale=2.0, mode='relu', steps=1")


def test_an_int_for_a_float_parameter_becomes_a_float_from_the_annotation_or_the_default() -> None:
    scale = evaluate("f32[8,16], scale=30")[2]
    assert type(scale) is float and scale == 30.0
    eps, count = evaluate("f32[8], 1, 3", unannotated)[1:]
    assert type(eps) is float and type(count) is int  # eps defaults to a float, count to an int


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("f32[8,16], scale='big'", "parameter 'scale' takes float, got 'big' (str)"),
        ("f32[8,16], steps=1.5", "parameter 'steps' takes int, got 1.5 (float)"),
        ("f32[8,16], mode=None", "parameter 'mode' takes str, got None (NoneType)"),
        ("f32[8,16], bias=3", "parameter 'bias' takes a tensor or None, got 3 (int)"),
        ("3", "parameter 'x' takes a tensor, got 3 (int) (a tensor is written like f32[128,256])"),
        ("f32[8,16], mode=relu", '''mode (relu): name 'relu' is not defined; a string is written in quotes: "relu"'''),
        ("f32[-1]", "argument 1 (f32[-1]): the sizes of f32[...] must be non-negative integers, got -1"),
        ("f32[8,16], scale=1/0", "scale (1 / 0): ZeroDivisionError: division by zero"),
        ("f32[8,16], mdoe='relu'", "unexpected keyword argument 'mdoe' (did you mean 'mode'?); the kernel is "
                                   "scaled(x, bias=None, scale=1.0, mode='relu', steps=1)"),
    ],
)
def test_values_that_do_not_fit_a_parameter_name_it(text: str, message: str) -> None:
    with pytest.raises(ArgumentsError) as raised:
        evaluate(text)
    assert message in str(raised.value)


def test_python_expressions_see_torch_math_and_the_kernel_files_names() -> None:
    file = ModuleType("kernel_file")
    file.WIDTH = 16
    x, _bias, scale = evaluate("torch.arange(8 * WIDTH, dtype=torch.float32).view(8, WIDTH), scale=math.pi",
                               namespace=vars(file))[:3]
    assert torch.equal(x, torch.arange(128.0).view(8, 16)) and scale == pytest.approx(3.14159265)
    assert evaluate("f32[8,16], steps=true")[4] is True  # true/false as in the older syntax
    assert evaluate("f32[8], count=bf16", unannotated)[2] is torch.bfloat16  # a bare dtype name is the dtype


def test_arguments_from_file_read_make_args_and_make_kwargs_with_the_shape() -> None:
    file = ModuleType("kernel_file")
    file.make_args = lambda shape="divisible": (torch.ones(8 if shape == "divisible" else 5, 16),)
    assert tuple(arguments_from_file(file, scaled)[0].shape) == (8, 16)
    file.make_kwargs = lambda shape="divisible": {"scale": 0.5, "mode": shape}
    x, bias, scale, mode, steps = arguments_from_file(file, scaled, "ragged")
    assert tuple(x.shape) == (5, 16) and (bias, scale, mode, steps) == (None, 0.5, "ragged", 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("f32[2], (", "'(' was never closed"),
        ("x=1, 2", "positional argument follows keyword argument"),
        ("1), (2", "not an argument list"),
        ("*shapes", "'*' unpacking is not supported"),
        ("**options", "'**' unpacking is not supported"),
        ("x=1, x=2", "keyword argument repeated: x"),
    ],
)
def test_syntax_errors_are_found_by_parsing_alone(text: str, message: str) -> None:
    with pytest.raises(CallSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        parse_call(text)


def test_a_syntax_error_points_at_the_column_the_user_wrote() -> None:
    with pytest.raises(CallSyntaxError) as raised:
        parse_call("f32[], f32[] f32[4]")  # f32[] is spelled f32[()] before parsing: columns stay the user's
    assert str(raised.value).splitlines()[1:] == ["  f32[], f32[] f32[4]", "         ^"]
    assert parse_call("").positional == () and parse_call("  # a comment").keywords == ()


def test_a_kernel_name_before_a_colon_says_which_kernel_the_arguments_are_for() -> None:
    call = parse_call("rms_norm: f32[64,512], f32[512], eps=1e-5")
    assert call.kernel == "rms_norm" and len(call.positional) == 2 and [k for k, _ in call.keywords] == ["eps"]
    assert parse_call(" negate :f32[4]").kernel == "negate" and parse_call("reset:").positional == ()
    # Arguments that merely contain a colon name no kernel.
    for text in ("f32[4], eps=1e-5", "lambda: 0", "n := 3", "{'a': 1}", "x[1:2]"):
        assert parse_call(text).kernel is None, text
    with pytest.raises(CallSyntaxError, match="invalid syntax"):
        parse_call("add: swiglu: f32[4]")  # one kernel per --args


STARTUP = textwrap.dedent(
    """\
    import contextlib, io, sys
    from helion_mlir_cli import main
    codes = []
    for argv in (["--help"], ["run", "--help"], ["pipeline", "--help"], ["emit", "k.py", "--args", "f32[4"], ["check"],
                 ["ops", "k.py", "-t", "linalg"], ["emit", "k.py", "--output-type", "spirv"]):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            codes.append(main(argv))
    print(codes, sorted(name for name in ("torch", "helion", "helion_mlir") if name in sys.modules))
    """
)


def test_help_and_usage_errors_import_neither_torch_nor_helion() -> None:
    """Start-up cost is measured by what is imported (timings are noisy): parsing and
    every usage error must not import torch, Helion or helion_mlir."""
    done = subprocess.run([sys.executable, "-c", STARTUP], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[0, 0, 0, 2, 2, 2, 2] []", done.stderr


def test_the_console_script_answers_help_without_importing_torch() -> None:
    script = Path(sys.executable).parent / "helion-mlir"
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")  # stderr lists every module imported
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and "usage: helion-mlir" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "helion_mlir_cli.parser" in imported
    assert not {"torch", "helion", "helion_mlir"} & imported
