"""Every example under configs from Helion's own generator computes what reference mode
computes (tests/config_fuzz.py).

CI draws ``--fuzz-configs`` (2) configs per example from fixed seeds; each config runs in
one of :data:`VARIANTS` (shape kind, static or dynamic shapes, output type, pipeline,
threads, checked mode), rotating per example so that the suite covers all of them. Exploring:
``scripts/test tests/test_config_fuzz.py --fuzz-configs 200 --fuzz-seed 7`` or
``scripts/fuzz_configs`` (docs/testing.md).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from config_fuzz import (
    KNOWN_GAP,
    MATCH,
    WRONG,
    FuzzCase,
    Outcome,
    bound_kernel,
    case_seed,
    random_configs,
    run_config,
)
from examples_util import HELION_NEEDS_STATIC_SHAPES, example_names

import config_fuzz

SCRIPTS_DIR = Path(__file__).resolve().parent.parent / "scripts"

# Small inputs, so tile loops run in parallel whenever legal: the code large inputs get.
pytestmark = pytest.mark.usefixtures("parallel_even_when_small")

# Everything of a FuzzCase but the example.
VARIANTS = [
    dict(shape="ragged", output_type="linalg-on-tensors", threads=2),
    dict(shape="divisible", output_type="linalg-on-tensors", threads=4),
    dict(shape="ragged", static_shapes=False, output_type="linalg-on-tensors", threads=2),
    dict(shape="ragged", output_type="stablehlo", pipeline="plain"),
    dict(shape="ragged", output_type="tosa", threads=3),
    dict(shape="ragged", static_shapes=False, output_type="linalg-on-tensors", pipeline="plain", checked=True),
]


def fuzz_case(example: str, index: int) -> FuzzCase:
    """The variant config ``index`` of ``example`` runs in (rotating from an example-dependent start)."""
    case = FuzzCase(example, **VARIANTS[(case_seed(example, 0) + index) % len(VARIANTS)])
    if example in HELION_NEEDS_STATIC_SHAPES:
        return dataclasses.replace(case, static_shapes=True)
    return case


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "fuzz_index" in metafunc.fixturenames:
        count = metafunc.config.getoption("fuzz_configs")
        metafunc.parametrize("fuzz_index", range(count))


def _failure(outcome: Outcome) -> str:
    return f"{outcome.summary()}\nreproduce with:\n{outcome.reproduction()}"


@pytest.mark.parametrize("example", example_names())
def test_random_config_of_helions_generator_matches_reference_mode(example: str, fuzz_index: int,
                                                                   request: pytest.FixtureRequest) -> None:
    case = fuzz_case(example, fuzz_index)
    seed = case_seed(example, fuzz_index, request.config.getoption("fuzz_seed"))
    [config] = random_configs(bound_kernel(case), seed, 1)
    outcome = run_config(case, config)
    assert outcome.status in (MATCH, KNOWN_GAP), _failure(outcome)


def test_configs_are_reproducible_from_their_seed_and_vary_with_it() -> None:
    bound = bound_kernel(FuzzCase("layer_norm"))
    first = random_configs(bound, 5, 4)
    assert first == random_configs(bound, 5, 4)
    assert first != random_configs(bound, 6, 4)
    assert len({repr(c) for c in first}) > 1


def test_a_wrong_number_is_reported_with_its_reproduction(monkeypatch: pytest.MonkeyPatch) -> None:
    case = FuzzCase("add")
    [config] = random_configs(bound_kernel(case), 0, 1)
    expected, args, kwargs = config_fuzz._reference_run("add", "ragged")
    off = expected.clone()
    off[3, 5] += 1.0

    def perturbed(example: str, shape: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        return off, args, kwargs

    monkeypatch.setattr(config_fuzz, "_reference_run", perturbed)
    outcome = run_config(case, config)
    assert outcome.status == WRONG and "Mismatched elements: 1" in outcome.detail
    assert "FuzzCase(example='add'" in outcome.reproduction()


def test_fuzzed_variants_cover_every_pipeline_output_type_and_shape_kind() -> None:
    cases = [fuzz_case(name, i) for name in example_names() for i in range(2)]
    assert {c.shape for c in cases} == {"divisible", "ragged"}
    assert {c.static_shapes for c in cases} == {True, False}
    assert {c.pipeline for c in cases} == {"fast", "plain"}
    assert {c.checked for c in cases} == {True, False}
    assert {c.output_type for c in cases} >= {"linalg-on-tensors", "stablehlo", "tosa"}


def test_exploring_script_reports_every_config_and_the_time_taken(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("fuzz_configs", SCRIPTS_DIR / "fuzz_configs.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    report = tmp_path / "report.jsonl"
    assert script.main(["--configs", "2", "--examples", "add", "--threads", "2", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "add: {'match': 2}" in out and "2 configs (2 per example) over 1 examples in" in out
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert [line["status"] for line in lines] == ["match", "match"] and all("block_sizes" in line["config"] for line in lines)
