"""A child made by ``fork`` after its parent ran parallel tiles calls kernels, compiles new
ones and gets the right numbers.

Parallel tiles run on torch's GNU OpenMP (``helion_mlir.runtime.cpu.openmp``), whose workers do not
survive a fork: the child runs the kernels' parallel loops on its calling thread. A child
forked while another thread compiled inherited the package's locks held, and its first
compile waited for them forever. The scenario runs in a fresh interpreter with a time limit,
so that a hang fails the test instead of stalling the suite. torch's own ops in such a child
hang unless torch is set to one thread first (as DataLoader workers do), with or without this
package.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
TIME_LIMIT = 300  # seconds, for both scenarios; each takes a few on an idle machine
CHILD_TIME_LIMIT = 120  # a hung child ends by SIGALRM (exit -14)
MODES = ("fresh",)

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and /proc/self/task"),
              pytest.mark.xdist_group("forked-children")]  # one worker runs the scenarios' process

# One interpreter imports once, then forks a process per scenario. Each compiles bias + GELU
# for two OpenMP workers, calls it, forks while another thread holds the compile locks. Its
# child: the same compiled kernel, one compiled in the child and a torch op, each checked
# against torch; its thread count after the calls tells whether a worker was started.
SCENARIOS = """
import os, signal, sys, threading, time
sys.path.insert(0, sys.argv[1])
import torch
from examples_util import load_example_by_name
from helion_mlir import compile_kernel
from helion_mlir.front_end_lock import FRONT_END_LOCK
from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.engine import clear_compile_cache

example = load_example_by_name("bias_gelu")


def in_child(mode, kernel, x, bias, expected):
    signal.alarm(int(sys.argv[2]))
    torch.set_num_threads(1)
    torch.testing.assert_close(kernel(x, bias), expected, **example.TOLERANCE)
    print(f"{mode}: child called", flush=True)
    if mode == "fresh":
        clear_compile_cache()
        again = compile_kernel(example.KERNEL, (x, bias), threads=2)
        torch.testing.assert_close(again(x, bias), expected, **example.TOLERANCE)
        torch.testing.assert_close(torch.nn.functional.gelu(x.float() + bias.float()).to(x.dtype), expected)
        print(f"{mode}: child compiled", flush=True)
    print(f"{mode}: child threads", len(os.listdir("/proc/self/task")), flush=True)


def compiling_meanwhile(seconds):
    # A thread that holds the front-end and MLIR locks for a while, as a long compile does.
    holding = threading.Event()

    def hold():
        with FRONT_END_LOCK, mlir_session():
            holding.set()
            time.sleep(seconds)

    threading.Thread(target=hold).start()
    holding.wait()


def scenario(mode):
    x = torch.randn(512, 384).to(torch.bfloat16)
    bias = torch.randn(384).to(torch.bfloat16)
    expected = example.reference(x, bias)
    kernel = compile_kernel(example.KERNEL, (x, bias), threads=2)
    torch.testing.assert_close(kernel(x, bias), expected, **example.TOLERANCE)
    if mode == "fresh":
        compiling_meanwhile(0.5)  # the fork waits for it: the child must not inherit held locks
    pid = os.fork()
    if pid == 0:
        run(lambda: in_child(mode, kernel, x, bias, expected))
    _, status = os.waitpid(pid, 0)
    print(f"{mode}: child exit", os.waitstatus_to_exitcode(status), flush=True)


def run(work):
    try:
        work()
    except BaseException:
        import traceback
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


pids = []
for mode in sys.argv[3:]:
    pid = os.fork()
    if pid == 0:
        run(lambda: scenario(mode))
    pids.append(pid)
sys.exit(max(abs(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])) for pid in pids))
"""


@pytest.fixture(scope="module")
def scenario_output() -> list[str]:
    """The scenarios' output lines; fails (instead of hanging) past the time limit."""
    command = [sys.executable, "-c", textwrap.dedent(SCENARIOS), str(TESTS_DIR), str(CHILD_TIME_LIMIT), *MODES]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"a forked child hung: {err.stdout}\n{err.stderr}") from None
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout.splitlines()


def test_a_forked_child_runs_parallel_tiles_on_its_thread_and_compiles_afresh(scenario_output: list[str]) -> None:
    """Forked while another thread held the compile locks: the fork waited for them, and the
    child's parallel regions ran without the parent's (lost) workers."""
    assert "fresh: child exit 0" in scenario_output, scenario_output
    assert "fresh: child compiled" in scenario_output, scenario_output
    assert "fresh: child threads 1" in scenario_output, scenario_output
