"""Take Helion kernels from Python files: import a file by path and find its kernels.

Used by the ``helion-mlir`` command (and meant for anything else that works on kernel
files, such as benchmarks). A file is imported by path under a private module name
registered in ``sys.modules``, because Helion finds a kernel's helper functions (an
``hl.reduce`` combine function, say) through the kernel's module.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import helion

from ..errors import HelionMLIRError

__all__ = ["KernelFileError", "find_kernels", "load_module", "select_kernel"]


class KernelFileError(HelionMLIRError):
    """A kernel file that does not exist, does not import, or lacks the kernel asked for."""


_LOADED: dict[Path, ModuleType] = {}


def load_module(path: str | Path) -> ModuleType:
    """Import a Python file by path (once per resolved path).

    The file's folder is appended to ``sys.path`` so that it can import its neighbours,
    as it could when run as a script.
    """
    path = Path(path).resolve()
    if path in _LOADED:
        return _LOADED[path]
    if not path.is_file():
        raise KernelFileError(f"no such file: {path}")
    stem = re.sub(r"\W", "_", path.stem)
    name = f"_helion_mlir_file_{stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise KernelFileError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:
        del sys.modules[name]
        raise KernelFileError(f"cannot import {path}: {type(err).__name__}: {err}") from err
    _LOADED[path] = module
    return module


def find_kernels(module: ModuleType) -> dict[str, helion.Kernel]:
    """The kernels a file is about, by name, in file order: the ``helion.Kernel`` objects it
    defines or, when it defines none, those it imports (a file that tests or runs a kernel
    from elsewhere).

    A kernel bound to several names (``KERNEL = add``) is listed once, under its function's
    name when the module uses that name for it.
    """
    defined: dict[int, tuple[str, helion.Kernel]] = {}
    imported: dict[int, tuple[str, helion.Kernel]] = {}
    names = vars(module)
    for name, value in names.items():
        if isinstance(value, helion.Kernel):
            found = defined if getattr(value.fn, "__module__", None) == module.__name__ else imported
            preferred = value.fn.__name__ if names.get(value.fn.__name__) is value else name
            found.setdefault(id(value), (preferred, value))
    return dict((defined or imported).values())


def select_kernel(module: ModuleType, name: str | None, path: str | Path) -> tuple[str, helion.Kernel]:
    """The kernel called ``name`` in ``module``, or its only kernel when ``name`` is None."""
    kernels = find_kernels(module)
    listed = ", ".join(kernels) or "none"
    if name is not None:
        value = getattr(module, name, None)
        if isinstance(value, helion.Kernel):
            return name, value
        raise KernelFileError(f"{path} has no helion kernel named '{name}' (kernels there: {listed})")
    if len(kernels) == 1:
        return next(iter(kernels.items()))
    if not kernels:
        raise KernelFileError(f"{path} defines or imports no @helion.kernel function")
    raise KernelFileError(f"{path} defines several kernels ({listed}); name one as {path}:{next(iter(kernels))}")
