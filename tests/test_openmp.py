"""Parallel tiles run on torch's own OpenMP runtime and worker threads (runtime/cpu/openmp.py).

One fresh process checks what a process-wide runtime decides: the kernel's parallel regions
start no thread torch's ops did not start (one pool, not two), they give torch's numbers
from several Python threads at once between torch ops, and a forked child still runs them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from torch_mlir import ir

from helion_mlir.mlir_context import mlir_session
from helion_mlir.runtime.cpu.openmp import unsupported_constructs

_PROCESS = textwrap.dedent("""
    import os, sys, threading, time
    sys.path.insert(0, "tests")
    import torch
    from examples_util import load_example_by_name
    from helion_mlir import compile_kernel

    torch.set_num_threads(2)
    x, bias = torch.randn(512, 512), torch.randn(512)
    want = load_example_by_name("bias_gelu").reference(x, bias)
    kernel = compile_kernel(load_example_by_name("bias_gelu").KERNEL.bind((x, bias)), threads=2)

    torch.nn.functional.gelu(torch.randn(2048, 2048))  # torch's pool starts its worker
    threads_of_torch = len(os.listdir("/proc/self/task"))
    for _ in range(5):
        torch.testing.assert_close(kernel(x, bias), want)
    print("new threads", len(os.listdir("/proc/self/task")) - threads_of_torch)
    print("libiomp5", any("libiomp5" in line for line in open("/proc/self/maps")))

    errors = []
    def interleave():
        try:
            for _ in range(10):
                torch.nn.functional.gelu(torch.randn(256, 1024))
                torch.testing.assert_close(kernel(x, bias), want)
        except Exception as err:
            errors.append(repr(err))
    workers = [threading.Thread(target=interleave) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print("errors in threads", len(errors))
    print(*errors, sep="\\n")

    pid = os.fork()
    if pid == 0:  # torch's own parallel ops would wait for the parent's workers forever
        got = kernel(x, bias)
        torch.set_num_threads(1)
        os._exit(0 if torch.allclose(got, want, rtol=2e-2, atol=2e-2) else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        print("child hung")
    else:
        print("child status", os.waitstatus_to_exitcode(done[1]))
""")


def test_parallel_tiles_share_torchs_pool_in_threads_and_after_fork() -> None:
    out = subprocess.run([sys.executable, "-c", _PROCESS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = dict(line.rsplit(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["new threads"] == "0", out.stdout  # libiomp5 started a pool of its own
    assert lines["libiomp5"] == "False", out.stdout
    assert lines["errors in threads"] == "0", out.stdout
    assert lines.get("child status") == "0", out.stdout


def test_constructs_without_an_entry_point_here_are_named() -> None:
    """A static schedule (``__kmpc_for_static_init_*``) would call a function nothing provides."""
    text = """
    llvm.func @f(%n: i64, %t: i32) {
      omp.parallel num_threads(%t : i32) {
        omp.wsloop {
          omp.loop_nest (%i) : i64 = (%n) to (%n) step (%n) {
            omp.yield
          }
        }
        omp.terminator
      }
      llvm.return
    }
    """
    with mlir_session():
        module = ir.Module.parse(text)
        assert unsupported_constructs(module) == ["omp.wsloop without schedule(dynamic)"]
        dynamic = text.replace("omp.wsloop {", "omp.wsloop schedule(dynamic) {")
        assert unsupported_constructs(ir.Module.parse(dynamic)) == []
