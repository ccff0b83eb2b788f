"""Parallel tile loops run on torch's own OpenMP runtime and threads.

``convert-scf-to-openmp`` turns parallel loops into the ``omp`` dialect, which LLVM's
OpenMPIRBuilder translates into calls of the ``__kmpc_*`` entry points of LLVM's and
Intel's OpenMP runtimes. torch's CPU wheels bring GNU OpenMP (``libgomp``), whose entry
points are ``GOMP_*``; a second runtime loaded beside it (Intel's ``libiomp5`` did this
job before) is a second pool of worker threads on the same cores. libgomp's workers spin
after every torch op, waiting for the next, and took the cores from the kernel's own
workers: a GELU row kernel at 4096x1024 on 2 threads ran in 1.3-1.7 ms alone and
2.6-2.7 ms right after an Inductor (or any torch) op.

So the package supplies the few ``__kmpc_*`` entry points the translated code calls,
written over libgomp's ``GOMP_*`` ABI, in a small LLVM-dialect module JIT-compiled once per
process (:func:`_runtime`); every kernel's engine is given their addresses
(:func:`register_openmp`). A parallel region is then a ``GOMP_parallel`` of torch's
runtime, run by the workers torch's own ops (and Inductor's code) run on. No C compiler
and no second runtime are needed.

- ``__kmpc_fork_call(ident, argc, microtask, aggregate)``: OpenMPIRBuilder outlines the
  region into ``microtask(int *gtid, int *btid, void *aggregate)``, its captured values in
  one aggregate (``argc`` is 0 or 1), and this calls ``GOMP_parallel`` with a trampoline
  that calls the microtask on every worker. ``__kmpc_push_num_threads`` (the region's
  ``num_threads``, the kernel's ``threads``) keeps the count for the next fork of the
  calling thread.
- ``__kmpc_dispatch_init_8u`` / ``__kmpc_dispatch_next_8u``: the ``schedule(dynamic,
  chunk)`` loop (:mod:`.rewrites.buffer.dynamic_schedule`) on ``GOMP_loop_ull_dynamic_start`` /
  ``_next`` (libgomp hands out the first chunk at the start; it is kept for the first
  ``next``), and ``GOMP_loop_end_nowait`` when a worker finds no more work.
- ``__kmpc_barrier``: ``GOMP_barrier``. ``__kmpc_global_thread_num``: the worker's number
  (the entry points above ignore it).

What a thread keeps between two calls (the pushed count, the first chunk) lives in a
per-thread record under a ``pthread`` key (JIT-compiled code cannot use thread-local
globals). :func:`unsupported_constructs` refuses, before anything is JIT-compiled, an
OpenMP construct whose entry point is not here (a static schedule, reductions, ...).

libgomp's workers do not survive ``fork``: in the child, the thread that forked still
holds a pool whose threads are gone, and its next parallel region waits for them forever
(torch's own ops as well). After a fork, that thread runs the kernel's parallel loops
itself, on one thread; threads started in the child get pools of their own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import string
import threading
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine

from ...errors import ExecutionError
from ...mlir_context import mlir_session

__all__ = ["AFTER_FORK", "ENTRY_POINTS", "KEY_GLOBAL", "loaded_runtime", "mapped_libraries",
           "records_key", "register_openmp", "shim_text", "unsupported_constructs"]

log = logging.getLogger(__name__)

#: The ``__kmpc_*`` entry points LLVM's translation of the ``omp`` ops the pipelines make calls.
ENTRY_POINTS = (
    "__kmpc_global_thread_num",
    "__kmpc_push_num_threads",
    "__kmpc_fork_call",
    "__kmpc_dispatch_init_8u",
    "__kmpc_dispatch_next_8u",
    "__kmpc_barrier",
)
#: What a forked child's forking thread calls (its libgomp pool is gone).
AFTER_FORK = "helion_mlir_omp_after_fork"
#: The global the library form of the entry points reads its ``pthread`` key from (:func:`shim_text`).
KEY_GLOBAL = "helion_mlir_omp_key"

#: File names of OpenMP runtimes that export libgomp's ``GOMP_*`` ABI (LLVM's and Intel's
#: do too), in order of preference when torch has loaded one.
_RUNTIMES = ("libgomp", "libomp", "libiomp5")

# The per-thread record: {i32 pushed thread count, i32 first chunk pending, i32 pool lost
# to a fork, i32 padding, i64 chunk start, i64 chunk end, i64 loop end, i64 stride}.
# Chunks are half-open [start, end) as libgomp gives them; the kmpc ABI wants inclusive
# bounds, numbered as the caller numbered them (from 1).
_SHIM = string.Template("""
!state = !llvm.struct<(i32, i32, i32, i32, i64, i64, i64, i64)>
module {
$globals
  llvm.func @GOMP_parallel(!llvm.ptr, !llvm.ptr, i32, i32)
  llvm.func @GOMP_loop_ull_dynamic_start(i8, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr) -> i8
  llvm.func @GOMP_loop_ull_dynamic_next(!llvm.ptr, !llvm.ptr) -> i8
  llvm.func @GOMP_loop_end_nowait()
  llvm.func @GOMP_barrier()
  llvm.func @omp_get_thread_num() -> i32
  llvm.func @pthread_getspecific(i32) -> !llvm.ptr
  llvm.func @pthread_setspecific(i32, !llvm.ptr) -> i32
  llvm.func @calloc(i64, i64) -> !llvm.ptr
  llvm.func @abort()

  // This thread's record, allocated at its first use (the key's destructor frees it).
  llvm.func @helion_mlir_omp_state() -> !llvm.ptr {
$read_key
    %found = llvm.call @pthread_getspecific(%key) : (i32) -> !llvm.ptr
    %null = llvm.mlir.zero : !llvm.ptr
    %missing = llvm.icmp "eq" %found, %null : !llvm.ptr
    llvm.cond_br %missing, ^allocate, ^done(%found : !llvm.ptr)
  ^allocate:
    %one = llvm.mlir.constant(1 : i64) : i64
    %size = llvm.mlir.constant(48 : i64) : i64
    %new = llvm.call @calloc(%one, %size) : (i64, i64) -> !llvm.ptr
    %failed = llvm.icmp "eq" %new, %null : !llvm.ptr
    llvm.cond_br %failed, ^out_of_memory, ^keep
  ^out_of_memory:
    llvm.call @abort() : () -> ()
    llvm.unreachable
  ^keep:
    %status = llvm.call @pthread_setspecific(%key, %new) : (i32, !llvm.ptr) -> i32
    llvm.br ^done(%new : !llvm.ptr)
  ^done(%state: !llvm.ptr):
    llvm.return %state : !llvm.ptr
  }

  // Called in a forked child by the thread that forked: its libgomp pool is gone.
  llvm.func @helion_mlir_omp_after_fork() {
    %state = llvm.call @helion_mlir_omp_state() : () -> !llvm.ptr
    %lost = llvm.getelementptr %state[0, 2] : (!llvm.ptr) -> !llvm.ptr, !state
    %yes = llvm.mlir.constant(1 : i32) : i32
    llvm.store %yes, %lost : i32, !llvm.ptr
    llvm.return
  }

  llvm.func @__kmpc_global_thread_num(%ident: !llvm.ptr) -> i32 {
    %number = llvm.call @omp_get_thread_num() : () -> i32
    llvm.return %number : i32
  }

  llvm.func @__kmpc_push_num_threads(%ident: !llvm.ptr, %gtid: i32, %threads: i32) {
    %state = llvm.call @helion_mlir_omp_state() : () -> !llvm.ptr
    llvm.store %threads, %state : i32, !llvm.ptr
    llvm.return
  }

  // GOMP_parallel's function: the outlined region, called with this worker's number.
  llvm.func @helion_mlir_omp_microtask(%closure: !llvm.ptr) {
    %one = llvm.mlir.constant(1 : i64) : i64
    %gtid = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
    %btid = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
    %number = llvm.call @omp_get_thread_num() : () -> i32
    %zero = llvm.mlir.constant(0 : i32) : i32
    llvm.store %number, %gtid : i32, !llvm.ptr
    llvm.store %zero, %btid : i32, !llvm.ptr
    %microtask = llvm.load %closure : !llvm.ptr -> !llvm.ptr
    %slot = llvm.getelementptr %closure[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    %aggregate = llvm.load %slot : !llvm.ptr -> !llvm.ptr
    llvm.call %microtask(%gtid, %btid, %aggregate) : !llvm.ptr, (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }

  llvm.func @__kmpc_fork_call(%ident: !llvm.ptr, %argc: i32, %microtask: !llvm.ptr, ...) {
    %one = llvm.mlir.constant(1 : i64) : i64
    %zero = llvm.mlir.constant(0 : i32) : i32
    %closure = llvm.alloca %one x !llvm.array<2 x ptr> : (i64) -> !llvm.ptr
    %va = llvm.alloca %one x !llvm.array<24 x i8> {alignment = 16 : i64} : (i64) -> !llvm.ptr
    llvm.store %microtask, %closure : !llvm.ptr, !llvm.ptr
    %captures = llvm.icmp "sgt" %argc, %zero : i32
    %null = llvm.mlir.zero : !llvm.ptr
    llvm.cond_br %captures, ^read, ^fork(%null : !llvm.ptr)
  ^read:
    llvm.intr.vastart %va : !llvm.ptr
    %read = llvm.va_arg %va : (!llvm.ptr) -> !llvm.ptr
    llvm.intr.vaend %va : !llvm.ptr
    llvm.br ^fork(%read : !llvm.ptr)
  ^fork(%aggregate: !llvm.ptr):
    %slot = llvm.getelementptr %closure[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
    llvm.store %aggregate, %slot : !llvm.ptr, !llvm.ptr
    %state = llvm.call @helion_mlir_omp_state() : () -> !llvm.ptr
    %threads = llvm.load %state : !llvm.ptr -> i32
    llvm.store %zero, %state : i32, !llvm.ptr
    %lostp = llvm.getelementptr %state[0, 2] : (!llvm.ptr) -> !llvm.ptr, !state
    %lost = llvm.load %lostp : !llvm.ptr -> i32
    %forked = llvm.icmp "ne" %lost, %zero : i32
    llvm.cond_br %forked, ^alone, ^team
  ^alone:
    llvm.call @helion_mlir_omp_microtask(%closure) : (!llvm.ptr) -> ()
    llvm.return
  ^team:
    %run = llvm.mlir.addressof @helion_mlir_omp_microtask : !llvm.ptr
    llvm.call @GOMP_parallel(%run, %closure, %threads, %zero) : (!llvm.ptr, !llvm.ptr, i32, i32) -> ()
    llvm.return
  }

  llvm.func @__kmpc_dispatch_init_8u(%ident: !llvm.ptr, %gtid: i32, %schedule: i32, %lower: i64,
                                     %upper: i64, %stride: i64, %chunk: i64) {
    %state = llvm.call @helion_mlir_omp_state() : () -> !llvm.ptr
    %pending = llvm.getelementptr %state[0, 1] : (!llvm.ptr) -> !llvm.ptr, !state
    %start = llvm.getelementptr %state[0, 4] : (!llvm.ptr) -> !llvm.ptr, !state
    %stop = llvm.getelementptr %state[0, 5] : (!llvm.ptr) -> !llvm.ptr, !state
    %endp = llvm.getelementptr %state[0, 6] : (!llvm.ptr) -> !llvm.ptr, !state
    %stridep = llvm.getelementptr %state[0, 7] : (!llvm.ptr) -> !llvm.ptr, !state
    %c1 = llvm.mlir.constant(1 : i64) : i64
    %end = llvm.add %upper, %c1 : i64
    llvm.store %end, %endp : i64, !llvm.ptr
    llvm.store %stride, %stridep : i64, !llvm.ptr
    %up = llvm.mlir.constant(1 : i8) : i8
    %got = llvm.call @GOMP_loop_ull_dynamic_start(%up, %lower, %end, %stride, %chunk, %start, %stop)
        : (i8, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr) -> i8
    %none = llvm.mlir.constant(0 : i8) : i8
    %some = llvm.icmp "ne" %got, %none : i8
    %flag = llvm.zext %some : i1 to i32
    llvm.store %flag, %pending : i32, !llvm.ptr
    llvm.return
  }

  llvm.func @__kmpc_dispatch_next_8u(%ident: !llvm.ptr, %gtid: i32, %plast: !llvm.ptr, %plower: !llvm.ptr,
                                     %pupper: !llvm.ptr, %pstride: !llvm.ptr) -> i32 {
    %state = llvm.call @helion_mlir_omp_state() : () -> !llvm.ptr
    %pending = llvm.getelementptr %state[0, 1] : (!llvm.ptr) -> !llvm.ptr, !state
    %start = llvm.getelementptr %state[0, 4] : (!llvm.ptr) -> !llvm.ptr, !state
    %stop = llvm.getelementptr %state[0, 5] : (!llvm.ptr) -> !llvm.ptr, !state
    %zero = llvm.mlir.constant(0 : i32) : i32
    %one = llvm.mlir.constant(1 : i32) : i32
    %first = llvm.load %pending : !llvm.ptr -> i32
    %kept = llvm.icmp "ne" %first, %zero : i32
    llvm.cond_br %kept, ^take_first, ^fetch
  ^take_first:
    llvm.store %zero, %pending : i32, !llvm.ptr
    llvm.br ^chunk
  ^fetch:
    %got = llvm.call @GOMP_loop_ull_dynamic_next(%start, %stop) : (!llvm.ptr, !llvm.ptr) -> i8
    %none = llvm.mlir.constant(0 : i8) : i8
    %some = llvm.icmp "ne" %got, %none : i8
    llvm.cond_br %some, ^chunk, ^finished
  ^chunk:
    %lo = llvm.load %start : !llvm.ptr -> i64
    %hi = llvm.load %stop : !llvm.ptr -> i64
    %c1 = llvm.mlir.constant(1 : i64) : i64
    %last_index = llvm.sub %hi, %c1 : i64
    llvm.store %lo, %plower : i64, !llvm.ptr
    llvm.store %last_index, %pupper : i64, !llvm.ptr
    %stridep = llvm.getelementptr %state[0, 7] : (!llvm.ptr) -> !llvm.ptr, !state
    %stride = llvm.load %stridep : !llvm.ptr -> i64
    llvm.store %stride, %pstride : i64, !llvm.ptr
    %endp = llvm.getelementptr %state[0, 6] : (!llvm.ptr) -> !llvm.ptr, !state
    %end = llvm.load %endp : !llvm.ptr -> i64
    %is_last = llvm.icmp "eq" %hi, %end : i64
    %last = llvm.zext %is_last : i1 to i32
    llvm.store %last, %plast : i32, !llvm.ptr
    llvm.return %one : i32
  ^finished:
    llvm.call @GOMP_loop_end_nowait() : () -> ()
    llvm.return %zero : i32
  }

  llvm.func @__kmpc_barrier(%ident: !llvm.ptr, %gtid: i32) {
    llvm.call @GOMP_barrier() : () -> ()
    llvm.return
  }

  // Writes the entry points' addresses, in the order of ENTRY_POINTS, into a table: the
  // engine looks up only the packed wrappers it makes of every function.
  llvm.func @helion_mlir_omp_entry_points(%table: !llvm.ptr) {
$table
    llvm.return
  }
}
""")

# What the shim calls in the OpenMP runtime (the others are libc's, found in the process).
_GOMP_FUNCTIONS = (
    "GOMP_parallel",
    "GOMP_loop_ull_dynamic_start",
    "GOMP_loop_ull_dynamic_next",
    "GOMP_loop_end_nowait",
    "GOMP_barrier",
    "omp_get_thread_num",
)


@dataclass(frozen=True)
class _Runtime:
    """The JIT-compiled entry points (kept alive for the process) and where they point."""

    engine: ExecutionEngine
    addresses: dict[str, int]


def mapped_libraries() -> list[str]:
    """Paths of the shared libraries mapped into this process, as ``/proc/self/maps`` lists them."""
    loaded: set[str] = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip()
            if path.startswith("/") and ".so" in path:
                loaded.add(path)
    return sorted(loaded)


def loaded_runtime() -> str:
    """The OpenMP runtime torch loaded (by file name), else GNU OpenMP by its soname."""
    loaded = mapped_libraries()
    for prefix in _RUNTIMES:
        for path in loaded:
            if os.path.basename(path).startswith(prefix + "."):
                return path
    return "libgomp.so.1"


def _table_stores() -> str:
    """The body of ``helion_mlir_omp_entry_points``: one store per entry point."""
    lines = []
    for index, name in enumerate(ENTRY_POINTS):
        lines += [f"    %address{index} = llvm.mlir.addressof @{name} : !llvm.ptr",
                  f"    %slot{index} = llvm.getelementptr %table[{index}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr",
                  f"    llvm.store %address{index}, %slot{index} : !llvm.ptr, !llvm.ptr"]
    return "\n".join(lines)


def shim_text(key: int | None) -> str:
    """The entry points' module with ``key``, the ``pthread`` key of the per-thread records,
    as a constant; with None, read from the global :data:`KEY_GLOBAL`, which whoever loads
    the module compiled to a shared library sets before its first parallel region."""
    if key is None:
        globals_ = f"  llvm.mlir.global external @{KEY_GLOBAL}(0 : i32) {{addr_space = 0 : i32}} : i32"
        read_key = (f"    %key_cell = llvm.mlir.addressof @{KEY_GLOBAL} : !llvm.ptr\n"
                    "    %key = llvm.load %key_cell : !llvm.ptr -> i32")
    else:
        globals_, read_key = "", f"    %key = llvm.mlir.constant({key} : i32) : i32"
    return _SHIM.substitute(globals=globals_, read_key=read_key, table=_table_stores())


def _call_packed(engine: ExecutionEngine, function: str, *pointers: ctypes.c_void_p) -> None:
    """Call ``function(pointers...)`` of ``engine`` through the packed wrapper the engine made."""
    cells = [ctypes.c_void_p(p.value) for p in pointers]
    packed = (ctypes.c_void_p * max(1, len(cells)))(*(ctypes.addressof(c) for c in cells))
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.raw_lookup(function))(packed)


_RUNTIME_LOCK = threading.Lock()
_KEY_LOCK = threading.Lock()
_KEY: list[int] = []


def records_key() -> int:
    """The ``pthread`` key of the per-thread records, one per process: every copy of the entry
    points (the JIT's, and the native cache's library of them) shares the records, so a fork
    that one copy's handler records is seen by a copy first loaded in the child."""
    with _KEY_LOCK:
        if not _KEY:
            libc = ctypes.CDLL(None)
            key = ctypes.c_uint()
            if libc.pthread_key_create(ctypes.byref(key), ctypes.cast(libc.free, ctypes.c_void_p)) != 0:
                raise ExecutionError("no pthread key left for the OpenMP entry points' per-thread records")
            _KEY.append(key.value)
        return _KEY[0]


def _runtime() -> _Runtime:
    """The process's entry points, JIT-compiled by the first thread that needs them."""
    with _RUNTIME_LOCK:
        return _compiled_runtime()


@functools.cache
def _compiled_runtime() -> _Runtime:
    name = loaded_runtime()
    try:
        library = ctypes.CDLL(name)
        gomp = {f: ctypes.cast(getattr(library, f), ctypes.c_void_p) for f in _GOMP_FUNCTIONS}
    except (OSError, AttributeError) as err:
        raise ExecutionError(
            f"parallel tile loops run on GNU OpenMP's GOMP_* entry points, which {name} does not provide "
            f"({err}); compile with threads=1"
        ) from None
    with mlir_session():
        module = ir.Module.parse(shim_text(records_key()))
        engine = ExecutionEngine(module, opt_level=2)
        for function, address in gomp.items():
            engine.raw_register_runtime(function, address)
        engine.initialize()
        table = (ctypes.c_void_p * len(ENTRY_POINTS))()
        _call_packed(engine, "helion_mlir_omp_entry_points", ctypes.c_void_p(ctypes.addressof(table)))
    # Looked up now: in a forked child, the JIT's locks may be held by threads that are gone.
    after_fork = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.raw_lookup(AFTER_FORK))
    no_arguments = (ctypes.c_void_p * 1)()
    os.register_at_fork(after_in_child=lambda: after_fork(no_arguments))
    log.debug("OpenMP entry points over %s", library._name)
    return _Runtime(engine, dict(zip(ENTRY_POINTS, table)))


def register_openmp(engine: ExecutionEngine) -> None:
    """Give a kernel's engine (before it is initialized) the ``__kmpc_*`` entry points."""
    addresses = _runtime().addresses
    for name in ENTRY_POINTS:
        engine.raw_register_runtime(name, ctypes.c_void_p(addresses[name]))


# omp ops the entry points above implement, and the attributes each may carry.
_CONSTRUCTS: dict[str, frozenset[str]] = {
    "omp.parallel": frozenset({"operandSegmentSizes"}),
    "omp.wsloop": frozenset({"operandSegmentSizes", "schedule_kind", "nowait"}),
    "omp.loop_nest": frozenset({"collapse_num_loops", "loop_inclusive"}),
    "omp.yield": frozenset(),
    "omp.terminator": frozenset(),
}
_NUM_THREADS_ONLY = "array<i32: 0, 0, 0, 1, 0, 0>"  # omp.parallel: allocate, allocator, if, num_threads, private, reduction
_DYNAMIC = "#omp<schedulekind dynamic>"


def _unsupported(op: ir.Operation) -> str | None:
    """What about ``op`` no entry point here implements, or None."""
    allowed = _CONSTRUCTS.get(op.name)
    if allowed is None:
        return op.name
    attributes = {name: str(op.attributes[name]) for name in op.attributes}
    extra = sorted(set(attributes) - allowed)
    if extra:
        return f"{op.name} with {', '.join(extra)}"
    if op.name == "omp.wsloop" and attributes.get("schedule_kind") != _DYNAMIC:
        return "omp.wsloop without schedule(dynamic)"
    if op.name == "omp.parallel" and attributes["operandSegmentSizes"] != _NUM_THREADS_ONLY:
        return "omp.parallel with clauses other than num_threads"
    return None


def unsupported_constructs(module: ir.Module) -> list[str]:
    """The OpenMP constructs of an LLVM-dialect module that the entry points here do not
    implement (each would call a ``__kmpc_*`` function no runtime in the process is meant to
    provide)."""
    found: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("omp.") and (what := _unsupported(op)) is not None:
            found.add(what)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return sorted(found)
