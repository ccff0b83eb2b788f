"""What a call of a compiled kernel does to memory besides running its code: it runs the
kernel's host code, whose allocations (``torch.empty_like``, ``torch.zeros``) make the
outputs through torch's allocator, and no torch op of its own (no copy, no temporary), so
between torch ops it costs the page faults of a fresh output no more than Inductor's code does.
"""

from __future__ import annotations

import helion
import torch
from examples_util import load_example_by_name
from torch.profiler import ProfilerActivity, profile

from helion_mlir import compile_kernel

# The ops torch's allocation functions dispatch to; nothing else may run in a call.
ALLOCATING_OPS = {"aten::empty_like", "aten::empty_strided", "aten::empty", "aten::zeros", "aten::zero_"}


def _torch_ops_of_a_call(example: str, args: tuple, block_sizes: list[int]) -> tuple[set[str], torch.Tensor]:
    """The torch ops one call (after a first one) runs, and its output."""
    kernel = helion.kernel(load_example_by_name(example).KERNEL.fn, config=helion.Config(block_sizes=block_sizes))
    compiled = compile_kernel(kernel, args, threads=2)
    compiled(*args)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = compiled(*args)
    return {event.name for event in prof.events() if event.name.startswith("aten::")}, out


def test_a_call_runs_no_torch_op_but_the_allocations_of_its_host_code() -> None:
    gate, up = torch.randn(37, 100), torch.randn(37, 100)
    ops, out = _torch_ops_of_a_call("swiglu", (gate, up), [16, 64])
    assert ops == {"aten::empty_like", "aten::empty_strided"}  # out = torch.empty_like(gate)
    torch.testing.assert_close(out, torch.nn.functional.silu(gate) * up)
    pred, target = (torch.randn(37, 100).log_softmax(-1) for _ in range(2))
    ops, out = _torch_ops_of_a_call("kl_div_loss", (pred, target, True, "none"), [16, 64])
    assert ops <= ALLOCATING_OPS and "aten::zeros" in ops  # loss = torch.zeros([rows])
    torch.testing.assert_close(out, (target.exp() * (target - pred)).sum(-1), rtol=1e-4, atol=1e-5)


def test_a_transposed_argument_is_the_one_copy_a_call_makes_and_the_profile_shows_it() -> None:
    """The check above sees a copy when there is one: the code reads contiguous rows, so a
    transposed view is copied first."""
    gate, up = torch.randn(100, 37).t(), torch.randn(37, 100)
    ops, out = _torch_ops_of_a_call("swiglu", (gate, up), [16, 64])
    assert ops - ALLOCATING_OPS, ops
    torch.testing.assert_close(out, torch.nn.functional.silu(gate) * up)
