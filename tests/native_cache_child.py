"""A fresh process for test_native_cache.py: compiles the modules of a case file (with the
native cache its environment names, tile loops parallel however small) and saves what each
call returned and whether its code came from the cache.

With ``fork``, a child it forks afterwards (its OpenMP workers gone, the JIT's copy of the
OpenMP entry points told so) compiles the modules again, from the cache, and saves the same
under ``OUTPUT.fork``; a child that does not finish within the time limit is killed.

Usage: python native_cache_child.py CASES OUTPUT [fork]
"""

from __future__ import annotations

import os
import signal
import sys
import time

import torch

from helion_mlir.runtime.cpu.engine import clear_compile_cache, compile_module
from helion_mlir.runtime.cpu.rewrites.tensor import tile_parallel

FORKED_CHILD_SECONDS = 120


def run(cases_path: str, output_path: str) -> None:
    cases = torch.load(cases_path)
    done = {}
    for name, (text, func_name, threads, args) in cases.items():
        function = compile_module(text, func_name, threads=threads)
        done[name] = (function(*args), function.from_disk)
    torch.save(done, output_path)


def run_in_forked_child(cases_path: str, output_path: str) -> None:
    pid = os.fork()
    if pid == 0:
        clear_compile_cache()
        run(cases_path, output_path)
        os._exit(0)
    deadline = time.monotonic() + FORKED_CHILD_SECONDS
    while time.monotonic() < deadline:
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            if status != 0:
                sys.exit(f"the forked child failed (status {status})")
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    sys.exit(f"the forked child did not finish in {FORKED_CHILD_SECONDS} s (a parallel loop waiting for workers)")


if __name__ == "__main__":
    tile_parallel.MIN_PARALLEL_WORK = 0
    run(sys.argv[1], sys.argv[2])
    if sys.argv[3:] == ["fork"]:
        run_in_forked_child(sys.argv[1], sys.argv[2] + ".fork")
