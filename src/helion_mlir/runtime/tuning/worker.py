"""A helper process that JIT-compiles, runs and times candidate modules for the tuner.

JIT-compiled code can take its process down: LLVM aborts on what it cannot select, a
failing ``cf.assert`` aborts, a wrong index segfaults. A user's process must survive any
candidate the autotuner tries, so candidates are compiled and run here instead, and only
the config that wins is compiled in the user's process.

The worker is a fresh interpreter (:mod:`.worker_process`), not a fork: a process that has run
parallel code cannot fork safely (torch's GNU OpenMP, which parallel tiles run on too,
hangs a forked child's torch ops once it has started its threads). It answers
requests in order over a pipe: ``compile`` (module text -> the function's signature),
``run`` (arguments -> results), ``time`` and ``interleave`` (samples of the candidates'
last runs, see :mod:`.timing`) and ``forget``. Large arguments and results cross in
shared memory that the receiving side owns alone (:mod:`.protocol`), so a call costs
copies of its tensors, not their trip through the pipe. A request that outlives its time limit
kills the worker and fails. A worker that dies (a signal, an abort, killed from outside)
is replaced and the request tried once more in the new one: a compile, or a run (whose
arguments the request carries); timing requests are tried again by the tuner's timers,
which run the candidates again first (:mod:`.session`). A second death fails the request
with :class:`~helion_mlir.errors.WorkerDiedError`, the worker's exit status and the last
lines it wrote to stderr, and the tuner drops the candidate.

In the tuning process a candidate's compiled function is a :class:`RemoteFunction`, which
a :class:`~helion_mlir.runtime.kernel.compiled_kernel.CompiledKernel` calls like any compiled
function: the host code runs here, the device function there.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any, TypeVar

import torch

from ...errors import ArgumentError, ExecutionError, WorkerDiedError
from ..params import Param, TensorParam
from .protocol import CandidateModule, Signature, Traffic, receive, send

__all__ = [
    "BOOTSTRAP",
    "JITWorker",
    "RemoteFunction",
    "collecting",
    "recorded_calls",
    "shared_worker",
]

log = logging.getLogger(__name__)

#: Seconds a new worker may take to import torch, torch-mlir and this package.
STARTUP_TIMEOUT = 600.0
#: Lines of the worker's stderr quoted when it dies.
STDERR_TAIL_LINES = 12
#: Times a compile or a run is tried when its worker dies: in the worker that served it,
#: then once more in a new one.
ATTEMPTS = 2
#: Compiles sent and not yet answered, at most. The worker blocks writing answers nobody
#: reads while the tuning process blocks writing modules nobody reads once the pipe's
#: buffers fill both ways (a search that sends hundreds of candidates before collecting
#: one); a few in flight keep the pipelining and leave the answers room.
MAX_PENDING_COMPILES = 4


#: The worker's entry. The package's __init__ imports Helion to install its hooks, which
#: takes seconds and is of no use to a process that only compiles and runs modules, so the
#: worker loads the package's modules under a bare package object instead.
BOOTSTRAP = """
import sys, types
package = types.ModuleType("helion_mlir")
package.__path__ = [{package!r}]
sys.modules["helion_mlir"] = package
from helion_mlir.runtime.tuning.worker_process import main
main({fd})
"""

_RECORDING: contextvars.ContextVar[list["RemoteFunction"] | None] = contextvars.ContextVar(
    "helion_mlir_recorded_calls", default=None)


T = TypeVar("T")


@contextmanager
def collecting(into: contextvars.ContextVar[list[T] | None]) -> Iterator[list[T]]:
    """Set ``into`` to a new list for the block (whoever reads the variable appends to it)."""
    items: list[T] = []
    token = into.set(items)
    try:
        yield items
    finally:
        into.reset(token)


def recorded_calls() -> AbstractContextManager[list["RemoteFunction"]]:
    """Collect the :class:`RemoteFunction` of every call made inside the block, so a timer
    handed an opaque callable can time what it runs in the worker instead of through the
    pipe."""
    return collecting(_RECORDING)


class RemoteFunction:
    """A candidate's compiled function, living in the worker; called like a
    :class:`~helion_mlir.runtime.cpu.engine.CompiledFunction` (its results come back as new
    tensors, which the kernel's launch copies into the tensors the function writes).

    Its signature is known once the worker has compiled it: asking for it, or calling the
    function, waits for that and raises the compile error if there was one."""

    def __init__(self, worker: "JITWorker", module: CandidateModule) -> None:
        self.worker = worker
        self.module = module
        self.key = module.key
        self.func_name = module.func_name
        self.output_type = module.output_type
        self.pipeline = module.pipeline
        self.threads = module.threads
        #: Estimated bytes it holds in this process, where caches weigh it: its module's text
        #: (the compiled code is the worker's, which keeps a bounded store of it).
        self.nbytes = len(module.text)

    def __repr__(self) -> str:
        return f"RemoteFunction(@{self.func_name}, key={self.key})"

    @property
    def params(self) -> tuple[Param, ...]:
        return self.worker.signature(self).params

    @property
    def results(self) -> tuple[TensorParam, ...]:
        return self.worker.signature(self).results

    @property
    def held_by(self) -> tuple[int | None, ...]:
        return self.worker.signature(self).held_by

    def __call__(self, *args: Any, allocated: frozenset[int] = frozenset()) -> tuple[torch.Tensor, ...]:
        """Run it in the worker; ``allocated``: the positions of the arguments the kernel's
        host code allocated for this call, which a timed call allocates afresh too."""
        if len(args) != len(self.params):
            raise ArgumentError(f"@{self.func_name} takes {len(self.params)} argument(s), got {len(args)}")
        results = self.worker.run(self, args, allocated)
        recording = _RECORDING.get()
        if recording is not None:
            recording.append(self)
        return results


class JITWorker:
    """The tuning process's side of one worker process (started on first use).

    Compiles are pipelined: :meth:`compile` sends the module and returns at once, so the
    tuning process emits the next candidate while the worker compiles this one (at most
    :data:`MAX_PENDING_COMPILES` in flight); the worker answers in order, and every other
    request first collects the answers still due."""

    #: Seconds a compile, or a run or timing request, may take before the worker is abandoned.
    compile_timeout: float = 60.0
    run_timeout: float = 30.0

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._stderr: Any = None
        self._ready = False
        self._lock = threading.Lock()
        self._known: set[str] = set()  # keys the current worker process has compiled
        self._pending: deque[CandidateModule] = deque()  # compiles sent, not yet answered
        self._signatures: dict[str, Signature] = {}
        self._failures: dict[str, str] = {}  # key -> why it did not compile
        self._compile_deaths: dict[str, int] = {}  # key -> worker deaths while compiling it
        self._dropped: set[str] = set()  # keys given up after their worker died too often
        self._faults: list[tuple[str, int]] = []  # test faults to arm in the next workers
        self.started = 0  # worker processes started so far
        self.timed: set[str] = set()  # keys of the candidates timed since the last forget()
        self.ran: set[str] = set()  # keys of the candidates run without error since the last forget()
        #: Each worker death since the last forget(), and what was done about it: a tuning run
        #: reports them once it ends (Helion hides what is written while a candidate runs).
        self.deaths: list[str] = []
        #: What this side has sent to and received from its worker processes.
        self.sent = Traffic()
        self.received = Traffic()

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker process now (it imports for a few seconds) if none is running."""
        with self._lock:
            if self._process is not None and self._process.poll() is not None:
                self._discard_locked()  # it died between runs: nothing of this run was in it
            self._start_locked()

    def _start_locked(self) -> None:
        """Start a worker process if there is none; one that died since its last answer is a
        death like any other (what it held is lost), raised as :class:`WorkerDiedError`."""
        if self._process is not None:
            if self._process.poll() is None:
                return
            raise self._died("waiting for its next request")
        parent_end, child_end = Pipe(duplex=True)
        self._stderr = tempfile.TemporaryFile()
        fd = child_end.fileno()
        self._process = subprocess.Popen(
            [sys.executable, "-c", BOOTSTRAP.format(package=str(Path(__file__).resolve().parents[2]), fd=fd)],
            pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            start_new_session=True,  # Ctrl-C reaches the tuning process, which ends the worker
        )
        child_end.close()
        self._conn = parent_end
        self.started += 1
        log.debug("started JIT worker process %d", self._process.pid)

    def close(self) -> None:
        """End the worker process (a later request starts a new one)."""
        with self._lock:
            self._discard_locked()

    def _discard_locked(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            self._process = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._ready = False
        self._known.clear()
        self._pending.clear()

    # -- requests -------------------------------------------------------------------

    def compile(self, module: CandidateModule, *, wait: bool = True) -> RemoteFunction:
        """Have the worker compile ``module``; with ``wait``, return once it has (a failure
        raises ExecutionError with the reason)."""
        function = RemoteFunction(self, module)
        key = module.key
        with self._lock:
            if key not in self._failures and key not in self._known and all(m.key != key for m in self._pending):
                while len(self._pending) >= MAX_PENDING_COMPILES:
                    self._collect_one()
                try:
                    self._ready_locked()  # (again, if collecting found the worker dead)
                    self._send(("compile", module), f"compiling @{module.func_name}")
                    self._pending.append(module)
                except WorkerDiedError as err:  # before it read the module: compiled when next needed
                    self.note_death(err, "compiling it in a new worker when it is needed")
        if wait:
            self.signature(function)
        return function

    def signature(self, function: RemoteFunction) -> Signature:
        """The signature of a compiled function (waits for its compile)."""
        key = function.key
        with self._lock:
            while key not in self._signatures and key not in self._failures and self._pending:
                self._collect_one()
            if key not in self._signatures and key not in self._failures:  # lost with a dead worker
                self._compile_now(function.module)
        if key in self._failures:
            raise self._compile_error(function.module)
        return self._signatures[key]

    def failure(self, key: str) -> str | None:
        """Why the module of ``key`` did not compile, if it did not (as far as known)."""
        return self._failures.get(key)

    def dropped(self, key: str) -> bool:
        """Whether the module of ``key`` was given up because its worker died (twice)."""
        return key in self._dropped

    def drop(self, module: CandidateModule, doing: str, err: WorkerDiedError) -> None:
        """Give ``module`` up: its worker died each time it was tried (``doing`` says at what)."""
        if module.key in self._dropped:
            return
        self._dropped.add(module.key)
        self.note_death(err, f"dropping @{module.func_name}: its JIT worker died {ATTEMPTS} times while {doing} "
                             "(worker died)")
        if err.output:
            log.info("the JIT worker's last output:\n%s", err.output)

    def note_death(self, err: WorkerDiedError, then: str) -> None:
        """Record a worker death and what was done about it (``then``)."""
        self.deaths.append(f"{err.summary}; {then}")
        log.info("%s", self.deaths[-1])

    def run(self, function: RemoteFunction, args: Sequence[Any],
            allocated: frozenset[int] = frozenset()) -> tuple[torch.Tensor, ...]:
        """Run ``function`` on ``args`` in the worker and return its results (see
        :meth:`RemoteFunction.__call__` for ``allocated``)."""
        self.signature(function)
        try:
            results = self._request(("run", function.key, tuple(args), tuple(sorted(allocated))),
                                    f"running @{function.func_name}", needs=function.module, attempts=ATTEMPTS)
        except WorkerDiedError as err:
            self.drop(function.module, "running it", err)
            raise
        self.ran.add(function.key)
        return results

    def time(self, function: RemoteFunction, *, warmup_ms: float, rep_ms: float) -> list[float]:
        """Samples (ms) of ``function`` on the arguments of its last run."""
        self.timed.add(function.key)
        return self._request(("time", function.key, warmup_ms, rep_ms), f"timing @{function.func_name}")

    def interleave(self, functions: Sequence[RemoteFunction], *, repeat: int,
                   max_total_ms: float | None) -> list[list[float]]:
        """Samples of each function on the arguments of its last run, taken round-robin."""
        keys = [f.key for f in functions]
        self.timed.update(keys)
        return self._request(("interleave", keys, repeat, max_total_ms), f"timing {len(keys)} candidates")

    def forget(self) -> None:
        """Drop what the worker holds of the candidates so far (the process stays)."""
        self.timed.clear()
        self.ran.clear()
        self.deaths.clear()
        self._signatures.clear()
        self._failures.clear()
        self._compile_deaths.clear()
        self._dropped.clear()
        with self._lock:
            if not self._ready or self._process is None or self._process.poll() is not None:
                return  # nothing was sent to this process
        self._request(("forget",), "forgetting candidates")
        self._known.clear()

    def inject_fault(self, *faults: tuple[str, int]) -> None:
        """Test hook, for the tests of a tuning run whose worker dies; nothing else calls it.
        Each fault ``(request, nth)`` makes one worker process kill itself (SIGKILL) when it
        receives its ``nth`` request of kind ``request`` (``"compile"``, ``"run"``,
        ``"time"``, ``"interleave"``) counted from when the fault is armed: the first fault
        in the running worker (or the next one started), each next one in the worker started
        after the one before."""
        with self._lock:
            self._faults = list(faults)
            if self._ready and self._process is not None and self._process.poll() is None:
                while self._pending:
                    self._collect_one()
                if self._ready:
                    self._arm_fault_locked()

    def _request(self, message: tuple[Any, ...], what: str, needs: CandidateModule | None = None,
                 attempts: int = 1) -> Any:
        """Send ``message`` once every compile still due is answered, and return the reply;
        ``needs`` is compiled first when this worker process has not (a new process). A
        worker that dies is replaced and the request sent again, up to ``attempts`` times."""
        with self._lock:
            for attempt in range(1, attempts + 1):
                try:
                    status, payload = self._request_locked(message, what, needs)
                    break
                except WorkerDiedError as err:
                    if attempt == attempts:
                        raise
                    self.note_death(err, "trying again in a new worker")
        if status == "error":
            raise ExecutionError(f"{what} in the JIT worker failed: {payload}")
        return payload

    def _request_locked(self, message: tuple[Any, ...], what: str,
                        needs: CandidateModule | None) -> tuple[str, Any]:
        self._ready_locked()
        while self._pending:
            self._collect_one()
        self._ready_locked()  # a compile may have ended the process
        if needs is not None and needs.key not in self._known:
            self._compile_now(needs)
        self._send(message, what)
        return self._await(self.run_timeout, what)

    def _ready_locked(self) -> None:
        self._start_locked()
        if not self._ready:
            self._await(STARTUP_TIMEOUT, "starting")
            self._ready = True
            self._arm_fault_locked()

    def _arm_fault_locked(self) -> None:
        if self._faults:
            request, nth = self._faults.pop(0)
            self._send(("fault", request, nth), "arming a test fault")
            self._await(self.run_timeout, "arming a test fault")

    def _compile_now(self, module: CandidateModule) -> None:
        """Compile ``module`` in this worker process, in a new one if it dies (up to
        :data:`ATTEMPTS` deaths while compiling it)."""
        key = module.key
        while key not in self._known and key not in self._failures:
            try:
                self._ready_locked()
                self._send(("compile", module), f"compiling @{module.func_name}")
            except WorkerDiedError as err:
                self._count_death(module, err)
                continue
            self._pending.append(module)
            while self._pending:
                self._collect_one()
        if key in self._failures:
            raise self._compile_error(module)

    def _compile_error(self, module: CandidateModule) -> ExecutionError:
        error = WorkerDiedError if module.key in self._dropped else ExecutionError
        return error(f"compiling @{module.func_name} in the JIT worker failed: {self._failures[module.key]}")

    def _count_death(self, module: CandidateModule, err: WorkerDiedError) -> None:
        """The worker died while compiling ``module``: it is compiled again in a new worker,
        or, after :data:`ATTEMPTS` deaths, given up."""
        deaths = self._compile_deaths[module.key] = self._compile_deaths.get(module.key, 0) + 1
        if deaths < ATTEMPTS:
            self.note_death(err, "compiling it again in a new worker")
            return
        self._failures[module.key] = f"the JIT worker died {deaths} times while compiling it: {err}"
        self.drop(module, "compiling it", err)

    def _collect_one(self) -> None:
        """Wait for the answer to the oldest compile still due and record it."""
        module = self._pending[0]
        what = f"compiling @{module.func_name}"
        try:
            status, payload = self._await(self.compile_timeout, what)
        except WorkerDiedError as err:  # the worker died on this module; the others are lost with it
            self._count_death(module, err)
            return
        except ExecutionError as err:  # it hung on this module
            self._failures[module.key] = str(err)
            log.warning("%s", err)
            return
        self._pending.popleft()
        if status == "ok":
            self._signatures[module.key] = payload
            self._known.add(module.key)
        else:
            self._failures[module.key] = payload
            log.warning("%s in the JIT worker failed: %s", what, str(payload).splitlines()[0])

    def _send(self, message: tuple[Any, ...], what: str) -> None:
        assert self._conn is not None
        try:
            send(self._conn, message, self.sent)
        except OSError:
            raise self._died(what) from None
        except BaseException:  # interrupted mid-message: the stream is out of step
            self._discard_locked()
            raise

    def _await(self, timeout: float, what: str) -> tuple[str, Any]:
        assert self._conn is not None
        started = time.perf_counter()
        deadline = time.monotonic() + timeout
        try:
            while not self._conn.poll(max(0.0, min(1.0, deadline - time.monotonic()))):
                if self._process is not None and self._process.poll() is not None:
                    raise self._died(what)
                if time.monotonic() >= deadline:
                    self._discard_locked()
                    raise ExecutionError(f"{what} took longer than {timeout:.0f} s; the JIT worker was stopped")
            reply = receive(self._conn, self.received)
        except (EOFError, OSError):
            raise self._died(what) from None
        except ExecutionError:
            raise
        except BaseException:  # interrupted (Ctrl-C) while the worker works: its answer would come
            self._discard_locked()  # to the next request, so this worker is not used again
            raise
        log.debug("%s: %s after %.0f ms", what, reply[0], (time.perf_counter() - started) * 1e3)
        return reply

    def _died(self, what: str) -> WorkerDiedError:
        process = self._process
        code = process.wait() if process is not None else None
        tail = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            lines = self._stderr.read().decode(errors="replace").strip().splitlines()
            tail = "\n".join(lines[-STDERR_TAIL_LINES:])
        self._discard_locked()
        if code is not None and code < 0:
            status = f"was killed by {signal.Signals(-code).name}"
        else:
            status = f"exited with status {code}"
        return WorkerDiedError(f"the JIT worker {status} while {what}", tail)


_SHARED: JITWorker | None = None
_SHARED_LOCK = threading.Lock()


def shared_worker() -> JITWorker:
    """The process-wide worker (ended when the process exits)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = JITWorker()
            atexit.register(_SHARED.close)
        return _SHARED
