"""Compiling and calling kernels from many threads gives what one thread gives, and no error.

Emission works in state that threads share (a bound kernel's fake-tensor mode and compile
environment, Helion's bind, Python's parser); the package serializes that work
(``helion_mlir.front_end_lock``) and lets calls of compiled code run at the same time.
Before it did, 16 threads compiling one bound kernel failed in about half their calls.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Callable
from typing import Any

import helion
import pytest
import torch
from examples_util import assert_matches, clone_args, load_example_by_name, register_cpu_matmul_dtype_overloads

from helion_mlir import compile_kernel, generate_mlir
from helion_mlir.runtime.cpu.engine import clear_compile_cache
from helion_mlir.runtime.reference import reference_kernel

# Layer norm, softmax, matmul, flash attention, a reduction rolled into loops
# (reduction_loops), an elementwise kernel.
KERNELS = ("layer_norm", "softmax_two_pass", "matmul", "attention", "softmax_looped", "bias_gelu")
OUTPUT_TYPES = ("linalg-on-tensors", "stablehlo")
THREADS = 16
ROUNDS = 10
EMITTING_THREADS = 4  # per round, these threads also emit their kernel again (two pairs share one)


def _twin(kernel: helion.Kernel, **settings: Any) -> helion.Kernel:
    """A new kernel with ``kernel``'s function and configs: it binds, and compiles, afresh."""
    replaced = dataclasses.replace(kernel.settings, **settings)
    return helion.kernel(kernel.fn, configs=list(kernel.configs), settings=replaced)


def _nodes_located_elsewhere(kernel: helion.Kernel, bound: Any) -> list[str]:
    """Nodes of ``bound`` whose recorded source line is not in the kernel's source (what two
    of Helion's binds at once can leave behind)."""
    lines, first = inspect.getsourcelines(kernel.fn)
    return [
        f"{node.name} at line {node.meta['location'].lineno}"
        for graph in bound.host_function.device_ir.graphs
        for node in graph.graph.nodes
        if node.op == "call_function" and node.meta.get("location") and node.meta["location"].lineno
        and not first <= node.meta["location"].lineno < first + len(lines)
    ]


def _in_threads(count: int, work: Callable[[int], Any]) -> tuple[list[Any], list[str]]:
    """``work(i)`` in ``count`` threads released together; their results and their errors."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[str] = []

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = work(index)
        except BaseException as err:  # a thread cannot fail the test itself
            errors.append(f"thread {index}: {type(err).__name__}: {err}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


def _compile_and_call_from_threads(rounds: int, *, fresh_every_round: bool) -> None:
    """Each round, 16 threads released together compile (``compile_kernel`` with the
    kernel and its arguments, which binds) and call the six kernels in two output types,
    and four of them emit their kernel again; then one thread emits and calls each kernel
    and every thread's text and result must be that thread's. With ``fresh_every_round``
    every round starts from new kernels, so every round binds, emits and JIT-compiles from
    all threads at once; otherwise the first round does, and later ones emit again while
    the other threads call the compiled code."""
    register_cpu_matmul_dtype_overloads()
    modules = {name: load_example_by_name(name) for name in KERNELS}
    args = {name: module.make_args("ragged") for name, module in modules.items()}
    cases = [(name, kind) for name in KERNELS for kind in OUTPUT_TYPES]
    results: dict[tuple[str, str], list[torch.Tensor]] = {case: [] for case in cases}
    texts: dict[tuple[str, str], set[str]] = {case: set() for case in cases}
    errors: list[str] = []
    kernels: dict[str, helion.Kernel] = {}
    for round_ in range(rounds):
        if fresh_every_round or not kernels:
            kernels = {name: _twin(module.KERNEL) for name, module in modules.items()}
            clear_compile_cache()  # the twins' modules are the same texts: compile them again

        def work(thread: int) -> tuple[tuple[str, str], torch.Tensor, list[str]]:
            name, kind = case = cases[(thread + round_) % len(cases)]
            compiled = compile_kernel(kernels[name], args[name], output_type=kind)
            emitted = [compiled.mlir]
            if thread < EMITTING_THREADS:
                emitted.append(generate_mlir(compiled.bound, output_type=kind, debug_info=True))
            return case, compiled(*clone_args(args[name])), emitted

        outcomes, round_errors = _in_threads(THREADS, work)
        errors += [f"round {round_}, {e}" for e in round_errors]
        for outcome in outcomes:
            if outcome is not None:
                case, result, emitted = outcome
                results[case].append(result)
                texts[case].update(emitted)
    assert not errors, f"{len(errors)} of {THREADS * rounds} calls failed:\n" + "\n".join(errors[:5])
    for (name, kind), got in results.items():  # one thread: emit and call again
        bound = kernels[name].bind(args[name])
        assert not _nodes_located_elsewhere(kernels[name], bound), name
        assert texts[(name, kind)] == {generate_mlir(bound, output_type=kind, debug_info=True)}, (name, kind)
        expected = compile_kernel(bound, output_type=kind)(*clone_args(args[name]))
        assert_matches(expected, modules[name].reference(*clone_args(args[name])), modules[name].TOLERANCE, name)
        assert got and all(torch.equal(result, expected) for result in got), (name, kind)


def test_sixteen_threads_compile_and_call_six_kernels_as_one_thread_does() -> None:
    """Ten rounds; the kernels are bound and compiled from all threads in the first."""
    _compile_and_call_from_threads(ROUNDS, fresh_every_round=False)


@pytest.mark.stress  # about 90 s on two cores
def test_sixteen_threads_compile_six_new_kernels_in_every_round() -> None:
    """Ten rounds, each binding, emitting and JIT-compiling new kernels from all threads."""
    _compile_and_call_from_threads(ROUNDS, fresh_every_round=True)


def test_first_calls_of_a_backend_kernel_from_eight_threads_agree() -> None:
    """A new ``backend="mlir"`` kernel called first from 8 threads at once: Helion binds and
    compiles it once, and every thread gets what a later call from one thread gets."""
    for name in ("layer_norm", "attention"):
        module = load_example_by_name(name)
        args = module.make_args("ragged")
        kernel = _twin(module.KERNEL, backend="mlir")
        outcomes, errors = _in_threads(8, lambda _thread: kernel(*clone_args(args)))
        assert not errors, f"{name}: {len(errors)} of 8 first calls failed:\n" + "\n".join(errors)
        expected = kernel(*clone_args(args))
        assert_matches(expected, module.reference(*clone_args(args)), module.TOLERANCE, name)
        assert all(torch.equal(result, expected) for result in outcomes), name


def test_reference_twins_from_eight_threads_are_one_kernel() -> None:
    """Reference runs (tests, ``helion-mlir run``) get one ref-mode twin per kernel, however
    many threads ask for it first."""
    kernel = _twin(load_example_by_name("matmul").KERNEL)
    twins, errors = _in_threads(8, lambda _thread: reference_kernel(kernel))
    assert not errors and all(twin is twins[0] for twin in twins)
