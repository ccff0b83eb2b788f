"""scripts/block_costs.py runs a model block three ways (eager, torch.compile, our kernel in
place of torch's op), and a clone in the kernel's place, and its numbers agree with eager; tiny
sizes, one round."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from block_costs import measure_blocks  # noqa: E402

TINY = dict(tokens=48, hidden=64, ffn=96, heads=2, sequence=24, vocab=80)


def test_a_loss_head_with_our_kernel_matches_eager_and_times_the_kernel_inside_it() -> None:
    """The cheapest block (one matmul, one kernel): Inductor's compile of it is most of the
    test's few seconds."""
    threads = torch.get_num_threads()
    with torch.random.fork_rng():
        data = measure_blocks(rounds=1, budget=0.0, sizes=TINY, blocks=["loss head"], dtypes=["float32"], settle=0.0)
    assert torch.get_num_threads() == threads
    (row,) = data["rows"]
    assert (row["name"], row["dtype"], row["sizes"]) == ("loss head", "float32", "48x64, vocabulary 80")
    assert row["error"] < 1e-5 and row["compiled_error"] < 1e-5
    assert min(row["eager_s"], row["compiled_s"], row["ours_s"]) > 0
    (kernel,) = row["kernels"]
    assert kernel["name"] == "cross_entropy"
    assert 0 < kernel["in_block_s"] < row["ours_s"] and kernel["alone_s"] > 0
    # Its compiled code was timed apart from the host side, and so was a clone in its place.
    assert math.isfinite(kernel["code_ratio"]) and kernel["code_ratio"] > 0
    assert math.isfinite(kernel["clone_ratio"]) and kernel["clone_ratio"] > 0
