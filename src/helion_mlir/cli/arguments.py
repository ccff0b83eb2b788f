"""The arguments a command runs a kernel on: ``--args`` evaluated for the kernel's signature,
or its file's ``make_args()`` and ``make_kwargs()``.

``--args`` is parsed by :mod:`helion_mlir_cli.call_syntax` (the inside of a Python call) and
evaluated here, each expression in a namespace of tensor shorthands (``f32[64,128]`` is a
seeded random tensor), ``torch``, ``math`` and the names of the kernel's file. The values
are then bound to the kernel's parameters, defaults applied, and checked against the
parameters' annotations: a literal ``30`` for a parameter annotated ``float`` (or whose
default is a float) becomes ``30.0``, as the kernel would see it called from Python, and a
value of the wrong kind is an error naming the parameter.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import math
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import helion
import torch
from helion_mlir_cli.call_syntax import INT_RANGE, CallArguments

from ..errors import HelionMLIRError

__all__ = [
    "ArgumentsError",
    "DTYPES",
    "argument_makers",
    "arguments_from_file",
    "describe_call",
    "describe_parameters",
    "describe_value",
    "evaluate_call",
]


class ArgumentsError(HelionMLIRError):
    """Arguments that cannot be made, or that do not fit the kernel's parameters."""


DTYPES: dict[str, torch.dtype] = {
    "f32": torch.float32,
    "f64": torch.float64,
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "f8e4m3fn": torch.float8_e4m3fn,
    "f8e5m2": torch.float8_e5m2,
    "i64": torch.int64,
    "i32": torch.int32,
    "i16": torch.int16,
    "i8": torch.int8,
    "u8": torch.uint8,
    "bool": torch.bool,
}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def _available_bytes() -> int | None:
    """Memory the system can give without swapping (``MemAvailable``), when it says."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _size(nbytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.3g} {unit}" if unit != "bytes" else f"{int(nbytes)} bytes"
        nbytes /= 1024
    raise AssertionError("unreachable")


class _RandomTensors:
    """``f32[64, 128]`` in ``--args``: a tensor of seeded random values of that dtype and shape."""

    def __init__(self, name: str, dtype: torch.dtype, generator: torch.Generator) -> None:
        self.name, self.dtype, self.generator = name, dtype, generator

    def __getitem__(self, sizes: Any) -> torch.Tensor:
        shape = sizes if isinstance(sizes, tuple) else (sizes,)
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise ArgumentsError(f"the sizes of {self.name}[...] must be non-negative integers, got {sizes!r}")
        spelled = f"{self.name}[{','.join(map(str, shape))}]"
        nbytes = math.prod(shape) * self.dtype.itemsize
        available = _available_bytes()
        if available is not None and nbytes > available:
            raise ArgumentsError(f"{spelled} takes {_size(nbytes)}, more than the {_size(available)} of memory "
                                 "available; make it smaller")
        try:
            if self.dtype.is_floating_point:
                draw = torch.float64 if self.dtype == torch.float64 else torch.float32
                return torch.randn(shape, generator=self.generator, dtype=draw).to(self.dtype)
            if self.dtype == torch.bool:
                return torch.randint(0, 2, shape, generator=self.generator).bool()
            return torch.randint(*INT_RANGE, shape, generator=self.generator, dtype=self.dtype)
        except (RuntimeError, MemoryError) as err:  # sizes past what torch can address
            raise ArgumentsError(f"cannot allocate {spelled} ({_size(nbytes)}): {err}") from None


def evaluate_call(call: CallArguments, kernel: helion.Kernel, *, seed: int = 0,
                  namespace: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """The kernel's full argument tuple (signature order, defaults applied) for ``--args``.

    Expressions are evaluated in order, in ``namespace`` (the kernel file's names) with the
    tensor shorthands, ``torch``, ``math``, ``true``/``false``, ``inf`` and ``nan`` on top.
    """
    generator = torch.Generator().manual_seed(seed)
    scope: dict[str, Any] = dict(namespace or {})
    scope.update(torch=torch, math=math, true=True, false=False, inf=math.inf, nan=math.nan)
    scope.update({name: _RandomTensors(name, dtype, generator) for name, dtype in DTYPES.items()})
    positional = [_evaluate(call, expression, scope, f"argument {index + 1}")
                  for index, expression in enumerate(call.positional)]
    keywords = {name: _evaluate(call, expression, scope, name) for name, expression in call.keywords}
    return _bind(kernel, positional, keywords, fit=True)


def _evaluate(call: CallArguments, expression: Any, scope: dict[str, Any], what: str) -> Any:
    text = call.source(expression)
    try:
        code = compile(ast.fix_missing_locations(ast.Expression(expression)), "<--args>", "eval")
        value = eval(code, scope)  # noqa: S307  (the user's own command line, like the kernel file it runs)
        return value.dtype if isinstance(value, _RandomTensors) else value  # a bare bf16 is the dtype
    except ArgumentsError as err:
        raise ArgumentsError(f"{what} ({text}): {err}") from None
    except NameError as err:
        raise ArgumentsError(f"{what} ({text}): {err}{_unknown_name_hint(expression, err.name)}") from None
    except Exception as err:
        raise ArgumentsError(f"{what} ({text}): {type(err).__name__}: {err}") from err


def _unknown_name_hint(expression: ast.expr, name: str) -> str:
    """What an unknown name in ``--args`` was probably meant to be."""
    for node in ast.walk(expression):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            if node.value.id == name:
                return f"; tensor dtypes are {' '.join(DTYPES)}"
            if any(isinstance(inner, ast.Name) and inner.id == name for inner in ast.walk(node.slice)):
                return "; sizes are integers"
    return f'; a string is written in quotes: "{name}"'


def argument_makers(module: types.ModuleType, kernel: helion.Kernel,
                    name: str | None = None) -> tuple[str, Callable[..., Any], Callable[..., Any] | None] | None:
    """The file's functions that make ``kernel``'s arguments: ``(name, make_args, make_kwargs
    or None)``, or None when it has none.

    A file with several kernels gives each its own ``make_args_<kernel>`` (and
    ``make_kwargs_<kernel>``), ``<kernel>`` being the name the file gives the kernel or its
    function's name; otherwise ``make_args`` (and ``make_kwargs``) serve every kernel.
    """
    for suffix in dict.fromkeys(n for n in (name, kernel.fn.__name__) if n):
        make_args = getattr(module, f"make_args_{suffix}", None)
        if callable(make_args):
            make_kwargs = getattr(module, f"make_kwargs_{suffix}", None)
            return f"make_args_{suffix}", make_args, make_kwargs if callable(make_kwargs) else None
    make_args, make_kwargs = getattr(module, "make_args", None), getattr(module, "make_kwargs", None)
    if callable(make_args):
        return "make_args", make_args, make_kwargs if callable(make_kwargs) else None
    return None


def arguments_from_file(module: types.ModuleType, kernel: helion.Kernel, shape: str | None = None, *,
                        name: str | None = None) -> tuple[Any, ...]:
    """The full argument tuple from the file's :func:`argument_makers` (called with
    ``shape`` when given)."""
    makers = argument_makers(module, kernel, name)
    if makers is None:
        raise ArgumentsError(f"{getattr(module, '__file__', module.__name__)} defines no make_args")
    given = (shape,) if shape is not None else ()
    _, make_args, make_kwargs = makers
    args = tuple(make_args(*given))
    kwargs = dict(make_kwargs(*given)) if make_kwargs is not None else {}
    return _bind(kernel, args, kwargs, fit=False)


def describe_parameters(kernel: helion.Kernel) -> str:
    """``rms_norm(x, weight, eps=1e-05)``: the kernel's parameters, with their defaults."""
    parameters = inspect.signature(kernel.fn).parameters.values()
    spelled = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in parameters)
    return f"{kernel.fn.__name__}({spelled})"


def _bind(kernel: helion.Kernel, args: Any, kwargs: dict[str, Any], *, fit: bool) -> tuple[Any, ...]:
    signature = inspect.signature(kernel.fn)
    for name in kwargs:
        if name not in signature.parameters:
            close = difflib.get_close_matches(name, signature.parameters, n=1)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            raise ArgumentsError(f"unexpected keyword argument '{name}'{guess}; "
                                 f"the kernel is {describe_parameters(kernel)}")
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as err:
        raise ArgumentsError(f"{err}; the kernel is {describe_parameters(kernel)}") from None
    if fit:
        hints = _annotations(kernel.fn)
        for name, value in bound.arguments.items():
            parameter = signature.parameters[name]
            bound.arguments[name] = _fit(name, value, hints.get(name, parameter.annotation), parameter.default)
    bound.apply_defaults()
    return tuple(bound.args)


def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' annotations, resolved where possible (string annotations stay strings)."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # a name only imported under TYPE_CHECKING, say: keep the raw annotations
        return dict(getattr(fn, "__annotations__", {}))


_SPELLED = {"float": float, "int": int, "bool": bool, "str": str, "None": type(None),
            "Tensor": torch.Tensor, "torch.Tensor": torch.Tensor, "torch.dtype": torch.dtype}


def _accepted_types(annotation: Any) -> tuple[type, ...] | None:
    """The classes an annotation admits, or None when it says nothing checkable
    (``list[int]``, callables, ``Any``, names it cannot resolve)."""
    if isinstance(annotation, str):
        parts = [p.strip() for p in annotation.removeprefix("Optional[").removesuffix("]").split("|")]
        if annotation.startswith("Optional["):
            parts.append("None")
        types_ = [_SPELLED.get(p) for p in parts]
        return None if any(t is None for t in types_) else tuple(types_)  # type: ignore[misc]
    if annotation is None:
        return (type(None),)
    if annotation in (float, int, bool, str, torch.Tensor, torch.dtype, type(None)):
        return (annotation,)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [_accepted_types(a) for a in typing.get_args(annotation)]
        return None if any(m is None for m in members) else tuple(t for m in members for t in m)  # type: ignore[union-attr]
    return None


def _fit(name: str, value: Any, annotation: Any, default: Any) -> Any:
    """``value`` for parameter ``name``: an int made a float where the parameter is a float,
    anything else checked against the annotation."""
    accepted = _accepted_types(annotation) if annotation is not inspect.Parameter.empty else None
    if accepted is None and isinstance(default, float):
        accepted = (float,)
    if accepted is None:
        return value
    if float in accepted and type(value) is int:
        return value if int in accepted else float(value)
    if not isinstance(value, accepted):
        wanted = " or ".join(_type_name(t) for t in accepted)
        example = " (a tensor is written like f32[128,256])" if torch.Tensor in accepted else ""
        raise ArgumentsError(f"parameter '{name}' takes {wanted}, got {describe_value(value)} "
                             f"({type(value).__name__}){example}")
    return value


def _type_name(cls: type) -> str:
    return {type(None): "None", torch.Tensor: "a tensor", torch.dtype: "a dtype"}.get(cls, cls.__name__)


def describe_value(value: Any) -> str:
    """A value in the ``--args`` syntax: ``f32[64,128]``, ``1e-05``, ``'sum'``, ``(f32[8], 2)``."""
    if isinstance(value, torch.Tensor):
        name = _DTYPE_NAMES.get(value.dtype, str(value.dtype).removeprefix("torch."))
        return f"{name}[{','.join(map(str, value.shape))}]"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(describe_value(v) for v in value)
        return f"({inner},)" if isinstance(value, tuple) and len(value) == 1 else (
            f"({inner})" if isinstance(value, tuple) else f"[{inner}]")
    if callable(value):
        return getattr(value, "__name__", repr(value))
    return repr(value)


def describe_call(kernel: helion.Kernel, args: tuple[Any, ...]) -> str:
    """``x=f32[64,128], eps=1e-05``: every parameter with the value it gets."""
    names = list(inspect.signature(kernel.fn).parameters)
    return ", ".join(f"{name}={describe_value(value)}" for name, value in zip(names, args))
