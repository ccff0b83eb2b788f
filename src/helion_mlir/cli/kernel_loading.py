"""Take Helion kernels from Python files: import them, make arguments, run their reference.

Used by the ``helion-mlir`` command (and meant for anything else that works on kernel
files, such as benchmarks). A file is imported by path under a private module name
registered in ``sys.modules``, because Helion finds a kernel's helper functions (an
``hl.reduce`` combine function, say) through the kernel's module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Union

import helion
import torch

from ..errors import HelionMLIRError
from ..mlir_types import element_type

__all__ = [
    "ArgSpecError",
    "DTYPES",
    "INT_RANGE",
    "KernelFileError",
    "TensorArgSpec",
    "describe_args",
    "find_kernels",
    "load_module",
    "make_args",
    "parse_args_spec",
    "select_kernel",
]


class KernelFileError(HelionMLIRError):
    """A kernel file that does not exist, does not import, or lacks the kernel asked for."""


class ArgSpecError(HelionMLIRError):
    """An argument spec such as ``'f32[128,256], 1e-5'`` that cannot be parsed."""


# Spellings accepted in argument specs (MLIR's element types, and ``bool``); the order is
# the one error messages list.
DTYPES: dict[str, torch.dtype] = {
    ("bool" if dtype == torch.bool else element_type(dtype)): dtype
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64,
                  torch.int8, torch.bool)
}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}

# Random integers stay small and non-negative so that they are valid indices and divisors
# of typical kernels; floats are standard normal.
INT_RANGE = (0, 16)


@dataclasses.dataclass(frozen=True)
class TensorArgSpec:
    """A tensor in an argument spec (``f32[128,256]``): random values of that dtype and shape."""

    dtype: torch.dtype
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return _describe_tensor(self.dtype, self.shape)


def _describe_tensor(dtype: torch.dtype, shape: tuple[int, ...]) -> str:
    name = _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))
    return f"{name}[{','.join(map(str, shape))}]"


ArgSpec = Union[TensorArgSpec, bool, int, float]

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
    """The ``helion.Kernel`` objects a module defines (not imports), by name, in file order.

    A kernel bound to several names (``KERNEL = add``) is listed once, under its function's
    name when the module uses that name for it.
    """
    found: dict[int, tuple[str, helion.Kernel]] = {}
    for name, value in vars(module).items():
        if not isinstance(value, helion.Kernel):
            continue
        if getattr(value.fn, "__module__", None) != module.__name__:
            continue
        preferred = value.fn.__name__ if vars(module).get(value.fn.__name__) is value else name
        found.setdefault(id(value), (preferred, value))
    return dict(found.values())


def select_kernel(module: ModuleType, name: str | None, path: str | Path) -> tuple[str, helion.Kernel]:
    """The kernel called ``name`` in ``module``, or its only kernel when ``name`` is None."""
    kernels = find_kernels(module)
    listed = ", ".join(kernels) or "none"
    if name is not None:
        value = getattr(module, name, None)
        if isinstance(value, helion.Kernel):
            return name, value
        raise KernelFileError(f"{path} has no helion kernel named '{name}' (kernels defined there: {listed})")
    if len(kernels) == 1:
        return next(iter(kernels.items()))
    if not kernels:
        raise KernelFileError(f"{path} defines no @helion.kernel function")
    raise KernelFileError(f"{path} defines several kernels ({listed}); name one as {path}:{next(iter(kernels))}")


def parse_args_spec(text: str) -> list[ArgSpec]:
    """Parse ``'f32[128,256], i64[128], 1e-5, 2, true'``: tensors as DTYPE[sizes], then numbers.

    ``f32[]`` is a 0-d tensor; a plain integer is an int, anything else numeric a float.
    """
    specs: list[ArgSpec] = []
    for item in _split_top_level(text):
        match = re.fullmatch(r"([A-Za-z0-9]+)\s*\[(.*)\]", item)
        if match:
            specs.append(_tensor_spec(match.group(1), match.group(2), item))
        else:
            specs.append(_scalar_spec(item))
    return specs


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets."""
    items, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ArgSpecError(f"unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if depth:
        raise ArgSpecError(f"unclosed '[' in {text!r}")
    items.append("".join(current).strip())
    if items == [""]:
        return []
    if "" in items:
        raise ArgSpecError(f"empty argument in {text!r} (a stray comma?)")
    return items


def _tensor_spec(dtype_name: str, dims: str, item: str) -> TensorArgSpec:
    dtype = DTYPES.get(dtype_name.lower())
    if dtype is None:
        raise ArgSpecError(f"unknown dtype '{dtype_name}' in {item!r}; choose one of {', '.join(DTYPES)}")
    shape = []
    for dim in (d.strip() for d in dims.split(",")) if dims.strip() else ():
        if not re.fullmatch(r"\d+", dim):
            raise ArgSpecError(f"size '{dim}' in {item!r} is not a non-negative integer")
        shape.append(int(dim))
    return TensorArgSpec(dtype, tuple(shape))


def _scalar_spec(item: str) -> bool | int | float:
    if item.lower() in ("true", "false"):
        return item.lower() == "true"
    if re.fullmatch(r"[+-]?\d+", item):
        return int(item)
    try:
        return float(item)
    except ValueError:
        raise ArgSpecError(
            f"{item!r} is neither a tensor (DTYPE[size,...], DTYPE one of {', '.join(DTYPES)}) nor a number"
        ) from None


def make_args(specs: list[ArgSpec], seed: int = 0) -> tuple[Any, ...]:
    """Random CPU tensors for the tensor specs (reproducible for a seed); numbers as given."""
    gen = torch.Generator().manual_seed(seed)
    args: list[Any] = []
    for spec in specs:
        if not isinstance(spec, TensorArgSpec):
            args.append(spec)
        elif spec.dtype.is_floating_point:
            draw_dtype = torch.float64 if spec.dtype == torch.float64 else torch.float32
            args.append(torch.randn(spec.shape, generator=gen, dtype=draw_dtype).to(spec.dtype))
        elif spec.dtype == torch.bool:
            args.append(torch.randint(0, 2, spec.shape, generator=gen).bool())
        else:
            args.append(torch.randint(*INT_RANGE, spec.shape, generator=gen, dtype=spec.dtype))
    return tuple(args)


def describe_args(args: tuple[Any, ...]) -> str:
    """Arguments in the spec syntax: ``f32[64,128], 2``."""
    return ", ".join(_describe_tensor(a.dtype, tuple(a.shape)) if isinstance(a, torch.Tensor) else repr(a) for a in args)


