"""The OpenMP runtime that parallel tile loops run on.

``convert-scf-to-openmp`` turns parallel loops into the ``omp`` dialect, which LLVM lowers
to calls of the ``__kmpc_*`` entry points of LLVM's and Intel's OpenMP runtimes. torch's CPU
wheels bring GNU OpenMP (``libgomp``), which has other entry points, so we load Intel's
``libiomp5`` from the ``intel-openmp`` package into the process with global symbols, where
the ``ExecutionEngine``'s JIT finds them (handing it the library instead would load it into
every engine again, 0.7 MiB each). Its symbols do not clash with ``libgomp``'s: torch keeps
its own runtime.

Idle workers of ``libiomp5`` spin for ``KMP_BLOCKTIME`` (200 ms by default) after each
parallel region before they sleep. On a machine whose cores torch eager code also uses,
that long a spin steals them from the next torch op; sleeping at once (``0``) makes every
call wake the workers again, which cost 40-100 us per call on the 2-core machine of
docs/benchmarks.md (a 37x100 kernel: 14 us on one thread, 130-150 us on two). We default
``KMP_BLOCKTIME`` to 50 us: calls that follow each other (the host code in between takes
about 10 us) find the workers awake, and a torch op after a call loses at most 50 us of
one core. The environment's own setting wins.

A child made by ``fork`` inherits the runtime's state but not its worker threads: its first
parallel region waits in a barrier for workers that do not exist, forever, unless the
runtime's own fork handler resets it in the child (it then starts new workers). The
runtime registers that handler when it initializes, unless ``KMP_INIT_AT_FORK`` is false,
and scikit-learn (which Helion's autotuner imports) sets it to ``FALSE`` when imported, to
avoid a bug of intel-openmp 2019.5. So the runtime is initialized here at once, with the
setting true for that moment. When another package loaded ``libiomp5`` first, whether its
handler was registered is unknown: a forked child then runs parallel regions on one thread
(``omp_set_max_active_levels(0)`` in the child, before anything else can start one).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.metadata
import logging
import os
from pathlib import Path

from ..errors import ExecutionError

__all__ = ["openmp_library", "remove_registration"]

log = logging.getLogger(__name__)

_DISTRIBUTION = "intel-openmp"
_LIBRARY = "libiomp5.so"
_BLOCKTIME = "50us"
#: The file ``libiomp5`` creates for each process that starts it (``_<pid>_<uid>``), and
#: removes only when that process exits normally.
_REGISTRATION = "/dev/shm/__KMP_REGISTERED_LIB_{pid}_*"
_INIT_AT_FORK = "KMP_INIT_AT_FORK"


@functools.cache
def openmp_library() -> str:
    """Path of ``libiomp5.so``, loaded into the process once (global symbols, for the JIT).

    Raises :class:`~helion_mlir.errors.ExecutionError` when the ``intel-openmp`` package is
    not installed (it is a dependency of this package; ``threads=1`` does not need it).
    """
    try:
        files = importlib.metadata.distribution(_DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    paths = [Path(str(f.locate())) for f in files if Path(str(f)).name == _LIBRARY]
    found = next((p.resolve() for p in paths if p.exists()), None)
    if found is None:
        raise ExecutionError(
            f"parallel tile loops need {_LIBRARY} from the '{_DISTRIBUTION}' package, which is not "
            "installed; install it or compile with threads=1"
        )
    os.environ.setdefault("KMP_BLOCKTIME", _BLOCKTIME)
    loaded_before = _is_loaded()
    library = ctypes.CDLL(str(found), mode=ctypes.RTLD_GLOBAL)
    if loaded_before:
        os.register_at_fork(after_in_child=lambda: library.omp_set_max_active_levels(0))
        log.info("%s was loaded by another package: forked children run parallel tiles on one thread", _LIBRARY)
    else:
        _initialize_with_fork_handler(library)
    log.debug("loaded the OpenMP runtime %s (KMP_BLOCKTIME=%s)", found, os.environ["KMP_BLOCKTIME"])
    return str(found)


def _is_loaded() -> bool:
    """Whether a ``libiomp5`` is in the process already (some other package loaded it)."""
    try:
        ctypes.CDLL(_LIBRARY, mode=os.RTLD_NOLOAD)
    except OSError:
        return False
    return True


def _initialize_with_fork_handler(library: ctypes.CDLL) -> None:
    """Initialize the runtime now, with ``KMP_INIT_AT_FORK`` true while it reads its settings,
    so that it registers its fork handler whatever the environment says; then the
    environment is as it was (other processes and runtimes see their own setting)."""
    previous = os.environ.get(_INIT_AT_FORK)
    os.environ[_INIT_AT_FORK] = "TRUE"
    try:
        library.omp_get_max_threads()
    finally:
        if previous is None:
            del os.environ[_INIT_AT_FORK]
        else:
            os.environ[_INIT_AT_FORK] = previous


def remove_registration(pid: int) -> None:
    """Remove the file ``libiomp5`` left in ``/dev/shm`` for the ended process ``pid``.

    A process that is killed or aborts never removes it; a tuning run whose JIT worker
    processes end so (crashing candidates, time limits, the worker killed at exit) would
    leave one file per worker behind.
    """
    for path in glob.glob(_REGISTRATION.format(pid=pid)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
