"""The fast pipeline computes what the plain one computes: two examples whose fast code
differs much from the plain code (index reductions, row statistics fused into rows, parallel
tiles) on the same ragged inputs, with dynamic and static shapes. Every example, both shapes,
is ``scripts/differential_pipelines.py`` (too long for the suite)."""

from __future__ import annotations

import pytest
from examples_util import load_example_by_name
from pipeline_differential import assert_pipelines_agree

# Small inputs, so tile loops run in parallel whenever legal: the code large inputs get.
pytestmark = pytest.mark.usefixtures("parallel_even_when_small")


@pytest.mark.parametrize(("name", "dynamic"), [("argmax_reduce", True), ("cross_entropy", False)])
def test_the_fast_pipeline_computes_what_the_plain_one_computes(name: str, dynamic: bool) -> None:
    assert_pipelines_agree(load_example_by_name(name), name, "ragged", dynamic)
