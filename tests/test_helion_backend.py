"""The Helion backend "mlir": calling real kernels runs them through helion_mlir on CPU.

Kernels are twins of the examples with ``backend="mlir"`` (a fresh twin per test, so every
test compiles what it checks) or small kernels defined here; results are compared with
torch on ragged shapes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import helion
import helion.language as hl
import pytest
import torch
from examples_util import (
    assert_matches,
    clone_args,
    load_example_by_name,
    register_cpu_matmul_dtype_overloads,
)
from helion._compiler.backend_registry import get_backend_class
from helion.runtime.kernel import BoundKernel
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

import helion_mlir
from helion_mlir.errors import HelionMLIRError, UnsupportedNodeError
from helion_mlir.runtime.backend import helion_backend
from helion_mlir.runtime.kernel import compiled_kernel


def mlir_twin(kernel: helion.Kernel, **settings: Any) -> helion.Kernel:
    """A new kernel with ``kernel``'s function and configs on the "mlir" backend."""
    replaced = dataclasses.replace(kernel.settings, backend="mlir", **settings)
    return helion.kernel(kernel.fn, configs=list(kernel.configs), settings=replaced)


@dataclasses.dataclass
class Compilations:
    """What the backend asked helion_mlir for, and how often MLIR was compiled to native code."""

    requested: list[compiled_kernel.CompiledKernel] = dataclasses.field(default_factory=list)
    native: int = 0


@pytest.fixture
def compilations(monkeypatch: pytest.MonkeyPatch) -> Compilations:
    seen = Compilations()
    compile_kernel = helion_backend.compile_kernel
    compile_module = compiled_kernel.compile_module

    def recording_compile_kernel(*args: Any, **kwargs: Any) -> compiled_kernel.CompiledKernel:
        compiled = compile_kernel(*args, **kwargs)
        seen.requested.append(compiled)
        return compiled

    def counting_compile_module(*args: Any, **kwargs: Any) -> Any:
        seen.native += 1
        return compile_module(*args, **kwargs)

    monkeypatch.setattr(helion_backend, "compile_kernel", recording_compile_kernel)
    monkeypatch.setattr(compiled_kernel, "compile_module", counting_compile_module)
    monkeypatch.delenv(helion_backend.OUTPUT_TYPE_ENV, raising=False)
    monkeypatch.delenv(helion_backend.DUMP_ENV, raising=False)
    monkeypatch.delenv(helion_backend.CHECKED_ENV, raising=False)
    return seen


@pytest.fixture(scope="module", autouse=True)
def _matmul_overloads() -> None:
    register_cpu_matmul_dtype_overloads()


@helion.kernel(backend="mlir")
def scale_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(out.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2.0 + y[tile_m, tile_n]
    return out


def _device_print(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        value = x[tile]
        hl.device_print("value", value)
        out[tile] = value
    return out


def _inline_asm(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.inline_asm_elementwise(
            "mov.b32 $0, $1;", "=r,r", [x[tile]], dtype=torch.float32, is_pure=True, pack=1
        )
    return out


def test_import_registers_the_backend_once() -> None:
    wrapped = BoundKernel.compile_config
    helion_backend.install()
    assert get_backend_class("mlir") is helion_backend.MLIRBackend
    assert BoundKernel.compile_config is wrapped
    assert not getattr(wrapped.__wrapped__, "_helion_mlir_wrapped", False)  # not wrapped twice


@pytest.mark.parametrize("name", ["add", "softmax_two_pass", "matmul"])
def test_example_kernels_run_through_the_backend(name: str, compilations: Compilations) -> None:
    example = load_example_by_name(name)
    kernel = mlir_twin(example.KERNEL)
    args = example.make_args("ragged")
    got = kernel(*clone_args(args))
    assert_matches(got, example.reference(*clone_args(args)), example.TOLERANCE)
    assert [c.name for c in compilations.requested] == [example.KERNEL.name]
    assert compilations.requested[0].output_type is helion_mlir.OutputType.LINALG_ON_TENSORS


def test_each_specialization_of_strings_none_and_callables_compiles_once(compilations: Compilations) -> None:
    loss = load_example_by_name("smooth_l1_loss")
    kernel = mlir_twin(loss.KERNEL)
    x, y = loss.make_args("ragged")
    weight = loss.make_kwargs("ragged")["weight"]
    for reduction in ("mean", "sum", "none"):
        for w in (None, weight):
            for beta in (1.0, 0.25):  # a float is not specialized: both betas share a compilation
                got = kernel(x, y, weight=w, beta=beta, reduction=reduction)
                assert_matches(got, loss.reference(x, y, w, beta, reduction), loss.TOLERANCE)
    assert len(compilations.requested) == 6
    flex = load_example_by_name("flex_attention")
    kernel = mlir_twin(flex.KERNEL)
    q, k, v, _, scale = flex.make_args("ragged")
    for score_mod in (flex.softcap, flex.relative_bias, flex.softcap):
        assert_matches(kernel(q, k, v, score_mod, scale), flex.reference(q, k, v, score_mod, scale), flex.TOLERANCE)
    assert len(compilations.requested) == 6 + 2


def test_host_allocated_output_and_in_place_argument(compilations: Compilations) -> None:
    example = load_example_by_name("xorshift_rand")
    out_bits, seed = example.make_args("ragged")
    expected_bits, expected_uniform = example.reference(out_bits.clone(), seed)
    bits, uniform = mlir_twin(example.KERNEL)(out_bits, seed)
    assert bits is out_bits  # written in place, as Helion would
    torch.testing.assert_close(out_bits, expected_bits, rtol=0, atol=0)
    torch.testing.assert_close(uniform, expected_uniform, rtol=0, atol=0)


def test_second_call_reuses_the_compiled_kernel(compilations: Compilations) -> None:
    example = load_example_by_name("add")
    kernel = mlir_twin(example.KERNEL)
    args = example.make_args("ragged")
    first = kernel(*args)
    second = kernel(*args)
    assert compilations.native == 1 and len(compilations.requested) == 1
    torch.testing.assert_close(second, first, rtol=0, atol=0)
    kernel(*example.make_args("divisible"))  # static shapes: a new shape is a new kernel
    assert compilations.native == 2


def test_dynamic_shapes_share_one_compiled_kernel(compilations: Compilations) -> None:
    example = load_example_by_name("row_mean_dynamic")
    kernel = mlir_twin(example.KERNEL)
    for shape in ("ragged", "divisible"):
        args = example.make_args(shape)
        assert_matches(kernel(*clone_args(args)), example.reference(*clone_args(args)), example.TOLERANCE)
    assert compilations.native == 1


def test_kernel_without_config_and_no_tuning_runs_helions_default(compilations: Compilations) -> None:
    kernel = helion.kernel(scale_add.fn, backend="mlir", autotune_effort="none")
    x, y = torch.randn(19, 45), torch.randn(19, 45)
    torch.testing.assert_close(kernel(x, y), x * 2.0 + y)
    (compiled,) = compilations.requested
    assert compiled.config == kernel.bind((x, y)).config_spec.default_config()


def test_set_config_compiles_the_config_it_is_given(compilations: Compilations) -> None:
    x, y = torch.randn(11, 40), torch.randn(11, 40)
    bound = helion.kernel(scale_add.fn, config=helion.Config(block_sizes=[8, 16]), backend="mlir").bind((x, y))
    chosen = helion.Config(block_sizes=[4, 32])
    bound.set_config(chosen)
    torch.testing.assert_close(bound(x, y), x * 2.0 + y)
    (compiled,) = compilations.requested
    assert compiled.config == bound.config_spec.normalized_config(chosen)  # normalized as Helion does


def test_a_callers_launcher_receives_the_launch_and_the_compiled_function_does_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Helion's ``_launcher=`` keyword (its autotuner captures launches with it, a custom op's
    fake implementation launches nothing): the host code runs and hands its launch over."""
    x, y = torch.randn(37, 50), torch.randn(37, 50)
    compiled = scale_add.bind((x, y)).compile_config(helion.Config(block_sizes=[16, 16]))
    monkeypatch.setattr(compiled_kernel.CompiledKernel, "_run_function",
                        lambda *a: pytest.fail("the compiled function ran"))
    launches: list[tuple[Any, ...]] = []
    out = compiled(x, y=y, _launcher=lambda _fn, _grid, *args, **_options: launches.append(args))
    (launched,) = launches
    assert out.shape == x.shape and [id(a) for a in launched if isinstance(a, torch.Tensor)] == [id(x), id(y), id(out)]
    monkeypatch.undo()
    torch.testing.assert_close(compiled(x, y), x * 2.0 + y)  # the same compiled kernel, launched as usual


def test_fake_tensors_with_a_launcher_that_launches_nothing_give_the_outputs_shape() -> None:
    kernel = helion.kernel(scale_add.fn, backend="mlir", static_shapes=False, autotune_effort="none")
    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 2)
    with mode:
        x, y = (mode.from_tensor(torch.randn(21, 34), symbolic_context=dynamic) for _ in range(2))
        torch._check(x.size(0) == y.size(0))
        torch._check(x.size(1) == y.size(1))
        bound = kernel.bind((x, y))
        out = bound.compile_config(bound.config_spec.default_config())(x, y, _launcher=lambda *a, **k: None)
    assert isinstance(out, FakeTensor) and out.dtype == torch.float32
    assert [str(size) for size in out.shape] == [str(size) for size in x.shape]  # the inputs' own symbols


def test_settings_select_the_backend(compilations: Compilations) -> None:
    kernel = helion.kernel(
        scale_add.fn, config=helion.Config(block_sizes=[8, 8]), settings=helion.Settings(backend="mlir")
    )
    x, y = torch.randn(13, 30), torch.randn(13, 30)
    torch.testing.assert_close(kernel(x, y), x * 2.0 + y)
    assert len(compilations.requested) == 1


def test_environment_variable_selects_the_backend(tmp_path: Path) -> None:
    script = tmp_path / "use_env_backend.py"
    script.write_text(textwrap.dedent(
        """
        import json

        import helion_mlir  # registers "mlir" before Settings() reads HELION_BACKEND
        import helion
        import helion.language as hl
        import torch


        @helion.kernel(config=helion.Config(block_sizes=[16]))
        def negate(x):
            out = torch.empty_like(x)
            for tile in hl.tile(x.size(0)):
                out[tile] = -x[tile]
            return out


        x = torch.randn(37)
        result = negate(x)
        print(json.dumps({
            "settings": negate.settings.backend,
            "backend": type(negate.bind((x,)).env.backend).__name__,
            "exact": bool(torch.equal(result, -x)),
        }))
        """
    ))
    env = {**os.environ, "HELION_BACKEND": "mlir"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"settings": "mlir", "backend": "MLIRBackend", "exact": True}


def test_dump_writes_each_module_named_after_kernel_config_and_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compilations: Compilations
) -> None:
    dump_dir = tmp_path / "dumps" / "nested"
    monkeypatch.setenv(helion_backend.DUMP_ENV, str(dump_dir))
    monkeypatch.setenv(helion_backend.OUTPUT_TYPE_ENV, "tosa")
    example = load_example_by_name("add")
    args = example.make_args("ragged")
    other_args = example.make_args("divisible")
    configs = [example.KERNEL.configs[0], helion.Config(block_sizes=[8, 8])]
    for config in configs:
        kernel = helion.kernel(example.KERNEL.fn, config=config, backend="mlir")
        torch.testing.assert_close(kernel(*args), example.reference(*args), **example.TOLERANCE)
    kernel = helion.kernel(example.KERNEL.fn, config=configs[0], backend="mlir")
    torch.testing.assert_close(kernel(*other_args), example.reference(*other_args), **example.TOLERANCE)
    signatures = {", ".join(f"float32[{', '.join(map(str, a.shape))}]" for a in a_args) for a_args in (args, other_args)}
    assert {c.signature for c in compilations.requested} == signatures
    expected = {
        f"add_{hashlib.sha256(f'{c.config!r}|{c.signature}'.encode()).hexdigest()[:8]}_tosa.mlir"
        for c in compilations.requested
    }
    assert len(expected) == 3 and {p.name for p in dump_dir.iterdir()} == expected
    for compiled in compilations.requested:
        text = helion_backend.dump_path(dump_dir, compiled).read_text()
        helion_mlir.verify_module_text(text)
        assert "tosa." in text and compiled.mlir in text
        assert f'loc("{example.KERNEL.fn.__code__.co_filename}":' in text  # dumps keep source locations
        assert f"// arguments: {compiled.signature}\n" in text


def test_checked_environment_variable_compiles_kernels_in_checked_mode(
    monkeypatch: pytest.MonkeyPatch, compilations: Compilations
) -> None:
    example = load_example_by_name("rope")
    args = example.make_args("ragged")
    monkeypatch.setenv(helion_backend.CHECKED_ENV, "1")
    kernel = mlir_twin(example.KERNEL)
    torch.testing.assert_close(kernel(*clone_args(args)), example.reference(*clone_args(args)), **example.TOLERANCE)
    [compiled] = compilations.requested
    assert compiled.checked and compiled.function.check_failures is not None
    monkeypatch.setenv(helion_backend.CHECKED_ENV, "off")
    assert not helion_backend.checked_from_env()
    monkeypatch.setenv(helion_backend.CHECKED_ENV, "maybe")
    with pytest.raises(HelionMLIRError, match="HELION_MLIR_CHECKED must be one of .* got 'maybe'"):
        helion_backend.checked_from_env()


def test_unknown_output_type_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(helion_backend.OUTPUT_TYPE_ENV, "spirv")
    with pytest.raises(HelionMLIRError, match="HELION_MLIR_OUTPUT_TYPE: unknown output type 'spirv'"):
        helion_backend.output_type_from_env()


@pytest.mark.parametrize(
    ("fn", "node"), [(_device_print, "device_print"), (_inline_asm, "inline_asm_elementwise")]
)
def test_unsupported_node_raises_helion_mlir_error(fn: Any, node: str, compilations: Compilations) -> None:
    kernel = helion.kernel(fn, config=helion.Config(block_sizes=[16]), backend="mlir")
    with pytest.raises(UnsupportedNodeError, match=f"node '{node}'"):
        kernel(torch.randn(40))


def test_other_backends_keep_helions_compile_config(monkeypatch: pytest.MonkeyPatch) -> None:
    routed: list[BoundKernel[Any]] = []
    monkeypatch.setattr(helion_backend, "_compile_through_mlir", lambda bound, config: routed.append(bound))
    triton_kernel = helion.kernel(scale_add.fn, config=helion.Config(block_sizes=[8, 8]), backend="triton")
    bound = triton_kernel.bind((torch.randn(8, 8), torch.randn(8, 8)))
    try:
        bound.compile_config()
    except ImportError:  # Helion's own path imports the generated Triton module; CPU installs lack triton
        pass
    assert routed == []
