"""Configs are resolved as Helion resolves them, once per compilation, at every entry point.

Every form Helion accepts (aliases such as ``block_size`` and ``reduction_loop``, nested
lists, dicts, omitted fields, GPU-only fields) compiles to what its canonical form compiles
to and matches torch on ragged and divisible shapes; every config Helion refuses raises
Helion's ``InvalidConfig`` naming the field, from the Python API, the ``"mlir"`` backend and
the command line (tuned configs read back from the autotune cache: tests/test_autotune.py);
and one ``compile_kernel``, ``generate_mlir`` or backend compilation builds one kernel model
from one resolution.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helion
import pytest
import torch
from examples_util import assert_matches, load_example_by_name
from helion._testing import code_and_output
from hypothesis import given, settings
from hypothesis import strategies as st
from helion.exc import InvalidConfig

from config_fuzz import random_configs
from kernels import loop_hint_kernels
from model_counts import ModelCounts

from helion_mlir import OutputType, compile_kernel, generate_mlir
from helion_mlir.errors import HelionMLIRError
from helion_mlir.generate import emit_module, kernel_model
from helion_mlir.lowering.kernel_config import resolve_config
from helion_mlir_cli import main

ADD = Path(__file__).resolve().parents[1] / "examples" / "add.py"


def _clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


# ------------------------------------------------------------------------ accepted forms
# (example, a form of a config, the canonical spelling of the same config)
FORMS = [
    ("add", {"block_sizes": [[16, 32]]}, {"block_sizes": [16, 32]}),  # nested lists are flattened
    ("add", helion.Config(block_size=[8, 64]), {"block_sizes": [8, 64]}),  # the singular alias
    ("add", {"block_sizes": [16, 32], "loop_order": [1, 0], "l2_grouping": 4},
     {"block_sizes": [16, 32], "loop_orders": [[1, 0]], "l2_groupings": [4]}),
    ("rms_norm", {"block_size": 4, "reduction_loop": 16}, {"block_sizes": [4], "reduction_loops": [16]}),
    ("rms_norm", {"block_sizes": [8], "reduction_loops": [None]}, {"block_sizes": [8]}),
]


@pytest.mark.parametrize(("name", "form", "canonical"), FORMS)
def test_each_config_form_resolves_to_its_canonical_spelling_and_matches_torch(name: str, form: Any,
                                                                               canonical: dict) -> None:
    module = load_example_by_name(name)
    for shape in ("ragged", "divisible"):
        args = module.make_args(shape)
        bound = module.KERNEL.bind(args)
        compiled = compile_kernel(bound, config=form)
        assert compiled.config == resolve_config(bound, canonical), (name, form, shape)
        assert_matches(compiled(*_clone(args)), module.reference(*args), module.TOLERANCE, f"{name}[{shape}]")


# (example, a config with fields that change nothing on CPU, the same config without them)
GPU_FIELDS = [
    ("add", {"block_sizes": [16, 32], "loop_orders": [[1, 0]], "l2_groupings": [4], "flatten_loops": [False],
             "num_warps": 2, "pid_type": "xyz"}, {"block_sizes": [16, 32]}),
    ("matmul", {"block_sizes": [16, 16, 32], "num_warps": 8, "num_stages": 2, "pid_type": "persistent_blocked",
                "indexing": "block_ptr", "l2_groupings": [8]}, {"block_sizes": [16, 16, 32]}),
]


@pytest.mark.parametrize(("name", "config", "cpu_fields"), GPU_FIELDS)
def test_fields_that_mean_nothing_on_cpu_are_accepted_and_leave_the_module_as_it_is(name: str, config: dict,
                                                                                   cpu_fields: dict) -> None:
    module = load_example_by_name(name)
    args = module.make_args("ragged")
    bound = module.KERNEL.bind(args)
    assert generate_mlir(bound, config=config) == generate_mlir(bound, config=cpu_fields)
    assert_matches(compile_kernel(bound, config=config)(*_clone(args)), module.reference(*args), module.TOLERANCE)


def test_omitted_fields_take_helions_defaults() -> None:
    module = load_example_by_name("matmul")
    bound = module.KERNEL.bind(module.make_args("ragged"))
    resolved = resolve_config(bound, {"block_sizes": [16, 16, 16]})
    assert resolved == bound.config_spec.default_config()  # every other field is Helion's default


def test_a_matmul_tile_below_helions_minimum_is_raised_to_it() -> None:
    """Helion's normalization raises a dot's tiles to its minimum (16); the lowering follows."""
    module = load_example_by_name("matmul")
    args = module.make_args("ragged")
    bound = module.KERNEL.bind(args)
    compiled = compile_kernel(bound, config={"block_sizes": [4, 8, 16]})
    assert compiled.config["block_sizes"] == [16, 16, 16]
    assert compiled.mlir == compile_kernel(bound, config={"block_sizes": [16, 16, 16]}).mlir
    assert_matches(compiled(*args), module.reference(*args), module.TOLERANCE)


def _mlir_kernel(name: str, **settings: Any) -> tuple[Any, helion.Kernel]:
    module = load_example_by_name(name)
    return module, helion.kernel(module.KERNEL.fn, backend="mlir", **settings)


def test_a_config_set_on_a_bound_kernel_is_resolved_anew() -> None:
    module, kernel = _mlir_kernel("add", config={"block_sizes": [16, 32]})
    args = module.make_args("ragged")
    bound = kernel.bind(args)
    assert resolve_config(bound)["block_sizes"] == [16, 32]
    bound.set_config({"block_size": [8, 64]})
    assert resolve_config(bound)["block_sizes"] == [8, 64]
    assert_matches(bound(*args), module.reference(*args), module.TOLERANCE)


@pytest.mark.parametrize("config", [{"block_size": [16, 32]}, {"block_sizes": [[8, 16]], "num_warps": 2}])
def test_backend_kernels_run_configs_given_in_any_form(config: dict) -> None:
    module, kernel = _mlir_kernel("add", config=config)
    args = module.make_args("ragged")
    assert_matches(kernel(*args), module.reference(*args), module.TOLERANCE)


def test_backend_runs_helions_test_helper_with_config_keywords() -> None:
    """``code_and_output(kernel, args, block_size=...)``, as Helion's own tests call kernels."""
    module, kernel = _mlir_kernel("rms_norm")
    args = module.make_args("ragged")
    _code, result = code_and_output(kernel, args, block_size=8, reduction_loop=32)
    assert_matches(result, module.reference(*args), module.TOLERANCE)


# ------------------------------------------------------------------------ loop hints
# Triton's ``tl.range`` hints, one entry per loop (the grid loop's count when the kernel is
# persistent; omitted entries take their defaults): the fields Helion's Triton backend adds
# to a kernel's config spec, accepted without Triton.
LOOP_HINTS = [
    {"range_unroll_factors": [0, 2]},
    {"range_num_stages": [0, 3], "range_unroll_factors": [0, 4]},
    {"range_multi_buffers": [None, False], "range_flattens": [None, True]},
    {"static_ranges": [True], "range_num_stages": [0, 2]},
]


@pytest.mark.parametrize("hints", LOOP_HINTS)
def test_loop_hints_of_the_triton_backend_are_accepted_and_change_nothing_on_cpu(hints: dict) -> None:
    kernel = loop_hint_kernels.row_scale_loops
    for shape in ((37, 50), (32, 64)):
        x, w = torch.randn(shape), torch.randn(shape[1])
        bound = kernel.bind((x, w))
        config = {"block_sizes": [16, 16], **hints}
        assert generate_mlir(bound, config=config) == generate_mlir(bound, config={"block_sizes": [16, 16]})
        _code, result = code_and_output(kernel, (x, w), **config)  # as Helion's own tests pass them
        torch.testing.assert_close(result, loop_hint_kernels.row_scale_loops_reference(x, w))


def test_configs_drawn_with_loop_hints_by_helions_generator_match_torch() -> None:
    x, w = torch.randn(45, 70), torch.randn(70)
    bound = loop_hint_kernels.row_scale_loops.bind((x, w))
    configs = random_configs(bound, seed=3, count=4)
    assert any(any(config.range_unroll_factors) for config in configs)  # the generator varies the hints
    for config in configs:
        torch.testing.assert_close(compile_kernel(bound, config=config)(x, w),
                                   loop_hint_kernels.row_scale_loops_reference(x, w), msg=repr(config))


@pytest.mark.parametrize("columns", [64, 100])
def test_unrolled_pipelined_loop_over_a_module_level_block_size_keeps_its_tiles(columns: int) -> None:
    """Helion's Triton code generation reads ``range_num_stages`` and ``range_unroll_factors``
    with ``int()`` of the fixed block size: under the mlir backend that leaves the block's
    symbol a tile size, and the next compilation still tiles with it."""
    kernel = loop_hint_kernels.fixed_chunk_copy
    x = torch.randn(3, columns, dtype=torch.float16)
    expected = loop_hint_kernels.fixed_chunk_copy_reference(x)
    _code, result = code_and_output(kernel, (x,), range_num_stages=[0, 2], range_unroll_factors=[0, 2])
    torch.testing.assert_close(result, expected)
    torch.testing.assert_close(compile_kernel(kernel.bind((x,)), config={"range_unroll_factors": [0, 4]})(x),
                               expected)


def test_a_fixed_tile_size_specialized_after_binding_is_refused() -> None:
    kernel = helion.kernel(loop_hint_kernels.fixed_chunk_copy.fn, backend="mlir", static_shapes=True)
    x = torch.randn(3, 64, dtype=torch.float16)
    bound = kernel.bind((x,))
    with bound.env:
        int(bound.env.block_sizes[1].var)  # what a code generator guarding on the tile size does
    with pytest.raises(HelionMLIRError, match="tile-size symbol of block 1 .* was specialized to 16"):
        compile_kernel(bound)


# ------------------------------------------------------------------------ invalid configs
# (config for examples/add.py, which tiles two dimensions; what the error names)
INVALID = [
    ({"block_sizes": [0, 16]}, r"config\[block_sizes\]\[0\] must be a power of two, got 0"),
    ({"block_sizes": [-16, 16]}, r"config\[block_sizes\]\[0\] must be a power of two, got -16"),
    ({"block_sizes": ["abc", 16]}, r"config\[block_sizes\]\[0\] must be a power of two, got 'abc'"),
    ({"block_sizes": [16, 24]}, r"config\[block_sizes\]\[1\] must be a power of two, got 24"),
    ({"block_sizes": [16]}, r"Not enough values for config\['block_sizes'\]"),
    ({"block_sizes": [16, 16, 16]}, r"Too many values for config\['block_sizes'\]"),
    ({"block_sizes": [16, 16], "pid_type": "sideways"}, r"Invalid value for 'pid_type'"),
    ({"block_sizes": [16, 16], "loop_orders": [[0, 0]]}, r"loop_orders\]\[0\] must be permutation"),
    ({"block_sizes": [16, 16], "block_sizez": [8]}, r"Invalid config keys \['block_sizez'\]"),
    ({"block_size": 16, "block_sizes": [16, 16]}, r"Cannot specify both block_size and block_sizes"),
]


@pytest.fixture(scope="module")
def add_bound() -> Any:
    module = load_example_by_name("add")
    return module.KERNEL.bind(module.make_args("ragged"))


@pytest.mark.parametrize(("config", "names"), INVALID)
def test_invalid_configs_raise_helions_invalid_config_naming_the_field(add_bound: Any, config: dict,
                                                                       names: str) -> None:
    with pytest.raises(InvalidConfig, match=names):
        generate_mlir(add_bound, config=config)
    with pytest.raises(InvalidConfig, match=names):
        compile_kernel(add_bound, config=config)
    with pytest.raises(InvalidConfig, match="kernel 'add'"):
        compile_kernel(add_bound, config=config)


def test_a_config_that_is_neither_a_config_nor_a_dict_is_invalid(add_bound: Any) -> None:
    with pytest.raises(InvalidConfig, match=r"a config is a helion.Config or a dict of its fields, got list"):
        compile_kernel(add_bound, config=[16, 16])


@pytest.mark.parametrize(("config", "names"), [INVALID[0], INVALID[4], INVALID[8]])
def test_backend_kernels_with_an_invalid_config_raise_invalid_config(config: dict, names: str) -> None:
    module, kernel = _mlir_kernel("add", config=config)
    with pytest.raises(InvalidConfig, match=names):
        kernel(*module.make_args("ragged"))


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(-70, 300), st.none(), st.booleans(), st.floats(allow_nan=True),
                                st.text(max_size=2), st.lists(st.integers(1, 64), max_size=2)), max_size=3))
def test_any_block_sizes_resolve_to_powers_of_two_or_raise_invalid_config(add_bound: Any, sizes: list) -> None:
    try:
        resolved = resolve_config(add_bound, {"block_sizes": sizes})
    except InvalidConfig:
        return
    assert len(resolved["block_sizes"]) == 2
    assert all(int(b) > 0 and int(b) & (int(b) - 1) == 0 for b in resolved["block_sizes"]), resolved


@pytest.mark.parametrize("command", ["emit", "run", "ops"])
def test_command_line_config_helion_refuses_exits_2_naming_the_field(command: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, str(ADD), "--config", json.dumps({"block_sizes": [0, 16]})]) == 2
    err = capsys.readouterr().err
    assert "--config does not fit kernel 'add'" in err
    assert "config[block_sizes][0] must be a power of two, got 0" in err
    assert "Traceback" not in err


def test_command_line_accepts_helions_aliases(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emit", str(ADD), "--config", '{"block_size": [8, 64]}']) == 0
    assert "tensor<64x128xf32> to tensor<8x64xf32>" in capsys.readouterr().out


# ------------------------------------------------------------------------ one path
def test_each_entry_point_builds_one_kernel_model_from_one_resolution(model_counts: ModelCounts) -> None:
    module = load_example_by_name("rms_norm")
    args = module.make_args("ragged")
    bound = module.KERNEL.bind(args)
    generate_mlir(bound, config={"block_size": 8, "reduction_loop": 32})
    assert model_counts.take() == (1, 1)
    config = {"block_size": 4, "reduction_loop": 32}
    compiled = compile_kernel(bound, config=config, pipeline="plain")
    assert model_counts.take() == (1, 1)
    assert compile_kernel(bound, config=config, pipeline="plain") is compiled  # cached: nothing built or normalized
    assert model_counts.take() == (0, 0)
    _module, kernel = _mlir_kernel("rms_norm", config=config)
    assert_matches(kernel(*args), module.reference(*args), module.TOLERANCE)
    assert model_counts.take() == (1, 1)


@pytest.mark.parametrize("command", ["emit", "run"])
def test_each_command_builds_one_kernel_model_from_one_resolution(command: str, model_counts: ModelCounts,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, str(ADD), "--config", '{"block_size": [8, 64]}']) == 0
    assert model_counts.take() == (1, 1), capsys.readouterr().out


def test_one_kernel_model_serves_every_output_type(model_counts: ModelCounts) -> None:
    module = load_example_by_name("rms_norm")
    bound = module.KERNEL.bind(module.make_args("ragged"))
    model = kernel_model(bound)
    texts = [emit_module(model, output_type) for output_type in OutputType]
    assert model_counts.take() == (1, 1)
    assert texts == [generate_mlir(bound, output_type=output_type) for output_type in OutputType]


def test_compiled_kernels_share_one_cache_entry_for_every_spelling_of_a_config(model_counts: ModelCounts) -> None:
    module = load_example_by_name("add")
    bound = module.KERNEL.bind(module.make_args("ragged"))
    first = compile_kernel(bound, config={"block_size": [8, 64]}, pipeline="plain")
    assert compile_kernel(bound, config=helion.Config(block_sizes=[8, 64]), pipeline="plain") is first
    assert compile_kernel(bound, config={"block_sizes": [[8, 64]]}, pipeline="plain") is first
    assert model_counts.take() == (1, 3)
