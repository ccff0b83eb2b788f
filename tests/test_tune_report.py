"""docs/benchmarks.md's autotuning section says which targets each kernel meets
(scripts/tune_costs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from tune_costs import render_tuning  # noqa: E402


def _row(name: str, default: float, quick: float, sweep: float, quick_s: float, first_call_s: float) -> dict:
    config = {"block_sizes": [32, 32, 32]}
    return dict(
        name=name, example="matmul", shape="1024^3", default_config={"block_sizes": [16, 16, 16]},
        quick=dict(config=config, seconds=quick_s, candidates=30, timed=25, failures=0),
        full=dict(config=config, seconds=300.0, candidates=200, timed=150, failures=1),
        sweep=dict(config=config, seconds=100.0, grid=216, timed=216, failures=0),
        second=dict(first_call_s=first_call_s, candidates=0, timed=0),
        ms={"default": default, "quick": quick, "full": quick, "sweep": sweep, "torch eager": 10.0},
    )


def test_targets_name_the_kernels_that_miss_them() -> None:
    rows = [_row("matmul f32", 20.0, 10.0, 9.5, 40.0, 0.4), _row("softmax", 1.0, 1.3, 1.0, 75.0, 1.5)]
    text = render_tuning(dict(threads=2, efforts=["quick", "full"], rows=rows, load=(1.0, 1.0, 1.0)))
    assert "- quick <= 1.10x the sweep's best: missed: softmax (1.30x)" in text
    assert "- matmul >= 1.5x faster than the default config: met" in text
    assert "- quick <= 60 s per kernel: missed: softmax (75 s)" in text
    assert "- full <= 10 min per kernel: met" in text
    assert "- second process, first call < 1 s and 0 candidates timed: missed: softmax (1.50 s, 0 timed)" in text
    assert "| matmul f32 | 1024^3 | 20.00 | 10.00 | 10.00 | 9.50 | 1.05 | 2.00 |" in text


def test_a_target_no_row_measures_is_not_reported_met() -> None:
    row = _row("softmax", 1.0, 1.0, 1.0, 30.0, 0.4)
    del row["full"], row["ms"]["full"]
    text = render_tuning(dict(threads=2, efforts=["quick"], rows=[row], load=(1.0, 1.0, 1.0)))
    assert "- full <= 10 min per kernel: not measured in this run" in text
    assert "- matmul >= 1.5x faster than the default config: not measured in this run" in text
    assert "- quick <= 1.10x the sweep's best: met" in text


def test_a_kernel_tuned_at_quick_effort_only_shows_no_full_run_and_its_note() -> None:
    full, quick_only = _row("matmul f32", 20.0, 10.0, 9.5, 40.0, 0.4), _row("softmax", 1.0, 1.0, 1.0, 30.0, 0.4)
    del quick_only["full"], quick_only["ms"]["full"]
    quick_only.update(load=6.54, note="eager's threads wait for cores under load")
    text = render_tuning(dict(threads=2, efforts=["quick", "full"], rows=[full, quick_only], load=(1.0, 1.0, 1.0)))
    assert "- full <= 10 min per kernel: met" in text
    assert "| softmax | 1024^3 | 1.00 | 1.00 | - | 1.00 | 1.00 | 1.00 | 10.00 | - | 0.10 | 30 s, 25 | - |" in text
    assert text.count(" | 6.5 |") == 1 and "| 0.40 s, 0 | - |" in text  # the row without a load says so
    assert "- softmax: eager's threads wait for cores under load" in text
    assert "| softmax | [16, 16, 16] | [32, 32, 32] | - | [32, 32, 32] |" in text
