"""Values the kernel's host code reads from tensor data (``n = int(offsets[-1].item())``).

Helion types ``t.item()`` on the host as a fresh unbacked symbol whose size hint is a
placeholder (8192), since the value is not known until the call. The host code computes
the real value at each call, but the trace can lose track of it in three ways:

* Helion **pins the symbol to its placeholder** when something asks for a concrete value:
  ``int(t.item())`` (the form Helion's own examples use), ``torch.tensor([n])``. The shape
  environment then replaces the symbol by 8192 everywhere: host tensors allocated from it
  get the static size 8192, loops run to 8192, device code compares with 8192.
* A decision about the value is made with the placeholder and recorded as a **guard**
  (``bool(n)`` is ``True`` under ``Ne(u0, 0)``; Python's ``max(n, 1)`` is ``n`` under
  ``u0 >= 1``).
* A host **slice by the value** (``xs = x[:n]``) gets the full size of ``x``: Helion types
  host subscripts with guards suppressed, so no guard records the choice.

Importing ``helion_mlir`` installs hooks on Helion's type propagation (:func:`install`):
every symbol ``.item()`` creates on the host is recorded with its source line (so is every
fresh symbol a host call derives from one, such as ``helion.next_power_of_2(n)``);
``int()``, ``float()``, ``bool()``, ``max()`` and ``min()`` of such values stay symbolic
(``torch.sym_int``, ``sym_float``, ``!= 0``, ``sym_max``, ``sym_min``) instead of asking for
a number; and pins and read-dependent slices are recorded where they happen. The value then
reaches the device IR as a symbol with a host origin, which the lowering makes a run-time
value (docs/abi.md); the kernel model refuses what is still pinned or sliced
(:func:`refuse_lost_reads`), and compiled kernels check the guards at each call.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import inspect
import textwrap
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import sympy
import torch
from helion._compiler.compile_environment import CompileEnvironment
from helion._compiler.source_location import current_location
from helion.runtime.kernel import BoundKernel
from helion._compiler.type_info import (
    CallableType,
    NumericType,
    SymBoolType,
    SymFloatType,
    SymIntType,
    TensorAttributeType,
    TensorType,
    TypeInfo,
)
from torch.utils._sympy.symbol import SymT, symbol_is_type

from ..errors import DataDependentValueError

__all__ = ["SourceLine", "TensorRead", "install", "read_guards", "refuse_lost_reads", "tensor_reads"]

_INSTALLED = False


@dataclasses.dataclass(frozen=True)
class SourceLine:
    """A line of the kernel's host code."""

    filename: str | None
    lineno: int | None
    text: str

    @classmethod
    def current(cls) -> "SourceLine":
        """The host statement Helion is typing now."""
        location = current_location()
        try:
            text = (location.line or "").strip()
        except (AttributeError, OSError):  # Helion's unknown location has no line
            text = ""
        return cls(getattr(location, "filename", None), getattr(location, "lineno", None), text)

    def __str__(self) -> str:
        place = f"{self.filename}:{self.lineno}" if self.filename else "the kernel's host code"
        return f"{place} (`{self.text}`)" if self.text else place


@dataclasses.dataclass
class TensorRead:
    """A symbol standing for a value the host code reads from tensor data."""

    symbol: sympy.Symbol
    line: SourceLine  # where it is read (or derived from a read)
    pinned_at: SourceLine | None = None  # where Helion replaced it by a number, if it did


@dataclasses.dataclass
class _Reads:
    """What the binding of one kernel recorded."""

    symbols: dict[sympy.Symbol, TensorRead] = dataclasses.field(default_factory=dict)
    sliced: dict[int, tuple[Any, SourceLine]] = dataclasses.field(default_factory=dict)  # id(fake) -> (fake, line)
    # How many guards the shape environment held when the bind ended: later ones come from
    # code generators (Helion's Triton code generation decides with the placeholder too).
    bind_guards: int | None = None
    # Guards made inside torch ops on host tensors (``out.view(total, features)`` assumes
    # ``features * total >= 2``): the host code runs those ops again at each call, on the
    # real values, so they decide nothing the emitted code depends on.
    torch_op_guards: set[int] = dataclasses.field(default_factory=set)


# Per compile environment (one per bound kernel).
_RECORDS: "weakref.WeakKeyDictionary[CompileEnvironment, _Reads]" = weakref.WeakKeyDictionary()


def tensor_reads(env: CompileEnvironment) -> dict[sympy.Symbol, TensorRead]:
    """The tensor-data reads recorded while ``env``'s kernel was bound (none when it was
    bound before :func:`install`)."""
    record = _RECORDS.get(env)
    return record.symbols if record is not None else {}


def install() -> None:
    """Wrap Helion's typing of ``Tensor.item()``, host calls and host subscripts (once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return
    attribute_call = TensorAttributeType.propagate_call
    callable_call = CallableType.propagate_call
    getitem = TensorType.propagate_getitem
    bind = BoundKernel.__init__

    @functools.wraps(bind)
    def bind_recording_guards(self: BoundKernel, *args: Any, **kwargs: Any) -> None:
        bind(self, *args, **kwargs)
        if getattr(self, "env", None) is not None:  # ref-mode kernels bind without one
            _RECORDS.setdefault(self.env, _Reads()).bind_guards = len(self.env.shape_env.guards)

    @functools.wraps(attribute_call)
    def propagate_attribute_call(self: TensorAttributeType, args: Any, kwargs: Any, origin: Any) -> TypeInfo:
        if not origin.is_host():
            return attribute_call(self, args, kwargs, origin)
        with _torch_op_guards():  # a tensor method: torch's own guards, made again at each call
            result = attribute_call(self, args, kwargs, origin)
        if self.attr() == "item" and isinstance(result, NumericType):
            _record(_symbols(result.value))
        _note_pins()
        return result

    @functools.wraps(callable_call)
    def propagate_host_call(self: CallableType, args: Any, kwargs: Any, origin: Any) -> TypeInfo | None:
        record = _current_record()
        if record is None or not record.symbols or not origin.is_host():
            return callable_call(self, args, kwargs, origin)
        torch_op = (getattr(self.value, "__module__", None) or "").startswith("torch")
        with _torch_op_guards() if torch_op else contextlib.nullcontext():
            if any(_depends_on(a, record) for a in args):
                kept = _kept_symbolic(self.value, args, kwargs, origin)
                if kept is not None:
                    return kept
                result = callable_call(self, args, kwargs, origin)
                if isinstance(result, NumericType):  # a fresh symbol computed from a read is one too
                    known = {s for a in args if isinstance(a, NumericType) for s in _symbols(a.value)}
                    _record(s for s in _symbols(result.value) if s not in known)
            else:
                result = callable_call(self, args, kwargs, origin)
        _note_pins()
        return result

    @functools.wraps(getitem)
    def propagate_host_getitem(self: TensorType, key: TypeInfo, origin: Any) -> TypeInfo:
        result = getitem(self, key, origin)
        record = _current_record()
        if record is not None and record.symbols and origin.is_host() and isinstance(result, TensorType):
            if _slices_by_read(key, record):
                record.sliced[id(result.fake_value)] = (result.fake_value, SourceLine.current())
        return result

    TensorAttributeType.propagate_call = propagate_attribute_call  # type: ignore[method-assign]
    CallableType.propagate_call = propagate_host_call  # type: ignore[method-assign]
    TensorType.propagate_getitem = propagate_host_getitem  # type: ignore[method-assign]
    BoundKernel.__init__ = bind_recording_guards  # type: ignore[method-assign]
    _INSTALLED = True


def _kept_symbolic(fn: Any, args: tuple[TypeInfo, ...], kwargs: dict[str, Any], origin: Any) -> TypeInfo | None:
    """``int``/``float``/``bool`` of a read, or ``max``/``min`` of numbers one of which is a
    read, as a symbolic value (None for any other call)."""
    if kwargs or not all(isinstance(a, NumericType) or _is_number(a) for a in args):
        return None
    values = [a.value if isinstance(a, NumericType) else a.proxy() for a in args]
    if fn in (int, float, bool) and len(values) == 1:
        conversions = {int: torch.sym_int, float: torch.sym_float, bool: _sym_bool}
        value = conversions[fn](values[0])
    elif fn in (max, min) and len(values) >= 2:
        value = functools.reduce(torch.sym_max if fn is max else torch.sym_min, values)
    else:
        return None
    if isinstance(value, torch.SymInt):
        return SymIntType(origin, value)
    if isinstance(value, torch.SymFloat):
        return SymFloatType(origin, value)
    if isinstance(value, torch.SymBool):
        return SymBoolType(origin, value)
    return TypeInfo.from_example(value, origin)


def _sym_bool(value: Any) -> Any:
    return value if isinstance(value, torch.SymBool) else value != 0


def _is_number(info: TypeInfo) -> bool:
    try:
        value = info.proxy()
    except NotImplementedError:
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _current_record() -> _Reads | None:
    try:
        env = CompileEnvironment.current()
    except Exception:  # Helion raises its own NoCurrentEnvironment outside a bind
        return None
    return _RECORDS.get(env)


def _record(symbols: Iterable[sympy.Symbol]) -> None:
    record = _RECORDS.setdefault(CompileEnvironment.current(), _Reads())
    line = SourceLine.current()
    for symbol in symbols:
        if symbol_is_type(symbol, (SymT.UNBACKED_INT, SymT.UNBACKED_FLOAT)):
            record.symbols.setdefault(symbol, TensorRead(symbol, line))


@contextlib.contextmanager
def _torch_op_guards() -> Iterator[None]:
    """Record the guards made inside the enclosed torch op as torch's own."""
    record = _current_record()
    if record is None:
        yield
        return
    guards = CompileEnvironment.current().shape_env.guards
    first = len(guards)
    try:
        yield
    finally:
        record.torch_op_guards.update(range(first, len(guards)))


def _note_pins() -> None:
    """Record where a read was replaced by a number, the first time it is."""
    record = _current_record()
    if record is None:
        return
    replacements = CompileEnvironment.current().shape_env.replacements
    for symbol, read in record.symbols.items():
        if read.pinned_at is None and symbol in replacements and not replacements[symbol].free_symbols:
            read.pinned_at = SourceLine.current()


def _symbols(value: Any) -> list[sympy.Symbol]:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return sorted(value.node.expr.free_symbols, key=str)
    return []


def _depends_on(info: TypeInfo, record: _Reads) -> bool:
    return isinstance(info, NumericType) and any(s in record.symbols for s in _symbols(info.value))


def _slices_by_read(key: TypeInfo, record: _Reads) -> bool:
    try:
        index = key.proxy()
    except NotImplementedError:
        return False
    for item in index if isinstance(index, tuple) else (index,):
        if isinstance(item, slice) and any(
            s in record.symbols for bound in (item.start, item.stop, item.step) for s in _symbols(bound)
        ):
            return True
    return False


def _calls_item(fn: Any) -> bool:
    """Whether the kernel's source calls ``.item()`` (its host code may read tensor data)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True  # unknown: assume it may
    return any(isinstance(node, ast.Attribute) and node.attr == "item" for node in ast.walk(tree))


def read_guards(env: CompileEnvironment) -> list[sympy.Basic]:
    """The decisions the bind made with the placeholders of values read from tensor data (its
    guards on them, but for torch's own inside host tensor ops), in the order it made them."""
    record = _RECORDS.get(env)
    if record is None:
        return []
    guards = env.shape_env.guards[:record.bind_guards]
    return [g.expr for i, g in enumerate(guards)
            if i not in record.torch_op_guards and any(s in record.symbols for s in g.expr.free_symbols)]


def refuse_lost_reads(env: CompileEnvironment, host_tensors: dict[str, Any], fn: Any) -> None:
    """Raise :class:`DataDependentValueError` when the trace of ``env``'s kernel (function
    ``fn``) replaced a value read from tensor data by a number, when one of ``host_tensors``
    (the device code's, by name) is a host slice by such a value, or when the kernel reads
    tensor data but was bound before :func:`install` (nothing was recorded)."""
    if env not in _RECORDS and _calls_item(fn):
        raise DataDependentValueError(
            f"kernel '{getattr(fn, '__name__', fn)}' reads values from tensor data (`.item()`) and was bound "
            "before helion_mlir was imported, so where Helion replaced them by its placeholder is unknown",
            hint="import helion_mlir before binding (or first calling) the kernel",
        )
    reads = tensor_reads(env)
    for symbol, read in reads.items():
        value = env.shape_env.replacements.get(symbol)
        if value is not None and not value.free_symbols:
            where = f" at {read.pinned_at}" if read.pinned_at is not None and read.pinned_at != read.line else ""
            raise DataDependentValueError(
                f"the value read from tensor data at {read.line} was replaced{where} by the number {value} "
                "(Helion's placeholder for values it cannot know when it binds the kernel), so code emitted "
                "from this trace would use that number for every call",
                hint="keep the value a Python number computed on the host (`n = int(t.item())`, arithmetic, "
                "`max`/`min`) and pass it to torch functions that take sizes; build tensors from it in the "
                "device code rather than with `torch.tensor(...)` on the host",
            )
    record = _RECORDS.get(env)
    for name, fake in host_tensors.items():
        sliced = record.sliced.get(id(fake)) if record is not None else None
        if sliced is not None and sliced[0] is fake:
            raise DataDependentValueError(
                f"host tensor '{name}' is sliced by a value read from tensor data at {sliced[1]}: Helion's "
                f"trace gives it the fixed shape {tuple(fake.shape)}, not a size that follows the value",
                hint="pass the whole tensor to the device code and bound the loop by the value "
                "(`for tile in hl.tile(n)`) or mask with it",
            )
