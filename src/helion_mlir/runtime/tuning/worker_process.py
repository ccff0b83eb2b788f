"""The JIT worker process: compiles candidate modules, runs them and times them.

Started by :class:`.worker.JITWorker` with :data:`.worker.BOOTSTRAP`, which loads this
module without the package's ``__init__`` (it imports Helion, which takes seconds and is
of no use here): this module imports nothing of Helion.
"""

from __future__ import annotations

import faulthandler
import os
import signal
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import torch

from ...caches import LRUCache
from ..cpu.engine import CompiledFunction, clear_compile_cache, compile_module
from .protocol import CandidateModule, Signature, receive, send
from .timing import bitwise, interleave, measure

__all__ = ["main", "serve"]

#: Compiled candidates the worker keeps; older ones are compiled again when asked for.
WORKER_FUNCTIONS = 32
#: Candidates whose last arguments the worker keeps for timing. Helion may re-time more
#: finalists together than this; a candidate whose arguments went is timed on another's
#: (see :meth:`_Server.arguments`).
WORKER_ARGUMENTS = 16


@dataclass(frozen=True)
class _Layout:
    """What of a candidate's last run the worker keeps for good: each argument's dtype,
    sizes and strides (a scalar's value), and the positions the host code allocated."""

    args: tuple[tuple[Any, ...], ...]
    allocated: frozenset[int]


@dataclass(frozen=True)
class _Call:
    """A candidate's last run: its arguments, and which of them the kernel's host code
    allocated for that call (its outputs), which a timed call allocates afresh too."""

    args: tuple[Any, ...]
    allocated: frozenset[int]

    @property
    def layout(self) -> _Layout:
        return _Layout(tuple(_layout(value) for value in self.args), self.allocated)


class _Server:
    """The worker's state: compiled candidates, and each one's last arguments."""

    def __init__(self) -> None:
        self.functions: LRUCache[CompiledFunction] = LRUCache(WORKER_FUNCTIONS)
        self.modules: dict[str, CandidateModule] = {}
        self.last_calls: LRUCache[_Call] = LRUCache(WORKER_ARGUMENTS)
        self.layouts: dict[str, _Layout] = {}  # every candidate's, kept when its arguments go
        self.inputs: list[torch.Tensor] = []  # recent read-only inputs, shared between candidates
        #: Test hook (see :meth:`.worker.JITWorker.inject_fault`): the request kind and its
        #: number, counted from when the fault was armed, on which this process kills itself.
        self.fault: tuple[str, int] | None = None
        self.requests: Counter[str] = Counter()

    def function(self, key: str) -> CompiledFunction:
        found = self.functions.get(key)
        if found is None:
            found = self.compile(self.modules[key])
        return found

    def compile(self, module: CandidateModule) -> CompiledFunction:
        key = module.key
        self.modules[key] = module
        found = self.functions.get(key)
        if found is None:
            found = compile_module(module.text, module.func_name, output_type=module.output_type,
                                   pipeline=module.pipeline, threads=module.threads, in_place=module.in_place)
            clear_compile_cache()  # the worker's own cache decides what stays compiled
            self.functions.put(key, found)
        return found

    def handle(self, message: tuple[Any, ...]) -> Any:
        kind = message[0]
        self._maybe_die(kind)
        if kind == "compile":
            fn = self.compile(message[1])
            return Signature(fn.params, fn.results, fn.held_by)
        if kind == "run":
            key, args, allocated = message[1:]
            fn = self.function(key)
            args = self._share_inputs(fn, args)
            call = _Call(args, frozenset(allocated))
            self.last_calls.put(key, call)
            self.layouts[key] = call.layout
            return fn(*_working_copies(fn, args))
        if kind == "time":
            key, warmup_ms, rep_ms = message[1:]
            call, prepare = self._timed_call(key)
            return measure(call, prepare=prepare, warmup_ms=warmup_ms, rep_ms=rep_ms)
        if kind == "interleave":
            keys, repeat, max_total_ms = message[1:]
            pairs = [self._timed_call(key) for key in keys]
            return interleave([c for c, _ in pairs], prepares=[p for _, p in pairs], repeat=repeat,
                              max_total_ms=max_total_ms)
        if kind == "forget":
            self.functions.clear()
            self.modules.clear()
            self.last_calls.clear()
            self.layouts.clear()
            self.inputs.clear()
            return None
        if kind == "fault":
            self.fault = (message[1], message[2])
            self.requests.clear()
            return None
        raise ValueError(f"unknown request {kind!r}")

    def _maybe_die(self, kind: str) -> None:
        """Test hook: die as a killed worker dies, on the request the armed fault names."""
        self.requests[kind] += 1
        if self.fault == (kind, self.requests[kind]):
            os.kill(os.getpid(), signal.SIGKILL)

    def _share_inputs(self, fn: CompiledFunction, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """``args`` with each read-only tensor equal to a recent one replaced by it, so the
        candidates of one kernel share one copy of its inputs."""
        written = _written(fn)
        shared = []
        for index, value in enumerate(args):
            if isinstance(value, torch.Tensor) and index not in written:
                same = next((t for t in self.inputs if _same_tensor(t, value)), None)
                if same is None:
                    self.inputs = [value, *self.inputs][:16]
                else:
                    value = same
            shared.append(value)
        return tuple(shared)

    def _timed_call(self, key: str) -> tuple[Any, Any]:
        """A call of candidate ``key`` on its last arguments, as a user's call makes it: the
        outputs the host code allocated are allocated afresh in each call (a fresh
        allocation's first writes fault its pages in, which a kernel writing into memory it
        used before never pays), with their first values when the function reads them. And
        the preparation each timed call needs: the written arguments restored, when the
        function reads what it wrote (two calls in a row leave different values)."""
        fn = self.function(key)
        last = self.arguments(key)
        args = last.args
        working = _working_copies(fn, args)
        written = sorted(_written(fn))
        fn(*working)
        first = [working[i].clone() for i in written]
        fn(*working)
        reads = {i for before, i in zip(first, written) if not torch.equal(bitwise(before), bitwise(working[i]))}
        fresh = [i for i in written if i in last.allocated and isinstance(args[i], torch.Tensor)]
        kept = [i for i in written if i not in fresh]

        def call() -> None:
            call_args = list(working)
            for index in fresh:
                like = args[index]
                call_args[index] = torch.empty_strided(like.size(), like.stride(), dtype=like.dtype)
                if index in reads:  # the host code filled it (torch.zeros, say)
                    call_args[index].copy_(like)
            fn(*call_args)

        def restore_kept() -> None:
            for index in kept:
                working[index].copy_(args[index])

        return call, (restore_kept if reads.intersection(kept) else None)

    def arguments(self, key: str) -> _Call:
        """The arguments of candidate ``key``'s last run. When they were dropped to bound the
        worker's memory, those of another candidate, as that run's were: the worker serves
        one tuning run at a time, and every candidate of a run is called with the same kernel
        arguments, but the outputs the host code allocates may differ (their sizes may
        depend on a block size: ``x.new_empty([cdiv(m, block_m), n])``). A candidate's code
        relies on the sizes its launch checked (docs/abi.md), so another call serves only
        if each argument has the sizes and strides of the candidate's own, or is an output
        the host code allocated, which is then allocated at the candidate's sizes, zeroed."""
        last = self.last_calls.get(key)
        if last is not None:
            return last
        layout = self.layouts.get(key)
        found = None if layout is None else next(
            (call for other in self.last_calls.values() if (call := _laid_out(other, layout)) is not None), None)
        if found is None:
            raise ValueError(f"candidate {key} has not run yet (or no kept call has its argument sizes)")
        return found


def _layout(value: Any) -> tuple[Any, ...]:
    if isinstance(value, torch.Tensor):
        return (value.dtype, tuple(value.size()), value.stride())
    return (type(value), value)


def _laid_out(call: _Call, layout: _Layout) -> _Call | None:
    """``call``'s arguments as ``layout``'s: each of the same layout kept, each output the
    host code allocated allocated afresh at ``layout``'s sizes; None if any other differs."""
    if len(call.args) != len(layout.args):
        return None
    args = []
    for index, (value, want) in enumerate(zip(call.args, layout.args)):
        if _layout(value) != want:
            if index not in layout.allocated or not isinstance(value, torch.Tensor):
                return None
            dtype, size, stride = want
            value = torch.empty_strided(size, stride, dtype=dtype).zero_()
        args.append(value)
    return _Call(tuple(args), layout.allocated)


def _written(fn: CompiledFunction) -> set[int]:
    return {held for held in fn.held_by if held is not None}


def _working_copies(fn: CompiledFunction, args: tuple[Any, ...]) -> list[Any]:
    """The arguments with a private copy of each one the function writes."""
    written = _written(fn)
    return [a.clone() if i in written and isinstance(a, torch.Tensor) else a for i, a in enumerate(args)]


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and torch.equal(bitwise(a), bitwise(b)))


def serve(conn: Connection) -> None:
    """Answer requests until the tuning process closes the pipe."""
    server = _Server()
    send(conn, ("ready", os.getpid()))
    while True:
        try:
            message = receive(conn)
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", server.handle(message))
        except Exception as err:  # noqa: BLE001  (every failure is the candidate's, reported by text)
            reply = ("error", f"{type(err).__name__}: {err}")
        try:
            send(conn, reply)
        except OSError:
            return


def main(fd: int) -> None:
    """The worker process's entry point: serve on the pipe end ``fd``."""
    faulthandler.enable()  # a crash writes the Python stack to stderr, which the tuner quotes
    serve(Connection(fd))
