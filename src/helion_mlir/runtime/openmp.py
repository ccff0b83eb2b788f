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
    ctypes.CDLL(str(found), mode=ctypes.RTLD_GLOBAL)
    log.debug("loaded the OpenMP runtime %s (KMP_BLOCKTIME=%s)", found, os.environ["KMP_BLOCKTIME"])
    return str(found)


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
