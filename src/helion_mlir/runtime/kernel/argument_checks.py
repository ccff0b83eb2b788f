"""Does a call match what a compiled kernel was compiled for?

A :class:`~.compiled_kernel.CompiledKernel` runs the code emitted for one bound
kernel, so it serves exactly the calls that Helion would serve with that bound kernel:
the same tensors' dtypes and ranks (and sizes, with static shapes), and the same values
of everything Helion specializes on at bind time: strings, ``None`` for optional
arguments, callables (their code), ``hl.specialize``-d sizes and scalars, and the
module-level values the kernel was emitted with. Floats, ints and bools that Helion keeps
symbolic may change from call to call. A call that does not match raises
:class:`~helion_mlir.errors.ArgumentError` naming the parameter before anything runs;
the ``mlir`` Helion backend never gets there, because Helion binds again first.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import sympy
import torch
from torch._dynamo.source import AttrSource, GetItemSource, LocalSource, TensorPropertySource

from ...errors import ArgumentError, DataDependentValueError, HelionMLIRError
from ...lowering.host_values import HostValue, describe_origin, evaluate_origin, imported_modules
from ...lowering.tensor_reads import read_guards, tensor_reads
from ...caches import LRUCache
from .launch_checks import HostCondition

__all__ = ["ArgumentChecks", "ReadGuards", "describe_value"]


#: Types of values whose Helion specialization key is a function of their type and value
#: alone: a value of these that passed the check passes it again without a new key (the
#: most recently used such values are remembered per compiled kernel).
_PLAIN_VALUE_TYPES = (int, float, bool, str, type(None), torch.dtype)
_ACCEPTED_VALUES_CAPACITY = 64

_NUMBER_TYPES = {
    torch.SymInt: "an int", int: "an int", torch.SymFloat: "a float", float: "a float",
    torch.SymBool: "a bool", bool: "a bool",
}


def describe_value(value: Any) -> str:
    """A short description of an argument: ``float32[37, 100]``, ``'mean'``, ``function softcap``."""
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}[{', '.join(map(str, value.shape))}]"
    if value is None or isinstance(value, (str, bool)):
        return repr(value)
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return f"function {value.__qualname__}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe_value(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {torch.SymInt: "int", torch.SymFloat: "float", torch.SymBool: "bool"}[type(value)]
    return type(value).__name__


class ArgumentChecks:
    """The checks of one compiled kernel's calls."""

    def __init__(self, bound: Any, model: Any) -> None:
        self.kernel = bound.kernel
        self.name: str = model.name
        self.params = list(bound.host_function.params.arguments)
        self.fakes = list(bound.fake_args)
        self.bound_key = getattr(bound, "_base_spec_key", None)
        # hl.specialize-d values: where they come from, and their value in the bound arguments
        # (Helion replaces each by an int there).
        env, fakes_by_param = bound.env, dict(zip(self.params, self.fakes))
        self.specialized: list[tuple[Any, int]] = []
        for symbol in sorted(env.specialized_vars, key=str):
            for source in env.shape_env.var_to_sources.get(symbol, [])[:1]:
                try:
                    value = _source_value(source, fakes_by_param)
                except (KeyError, IndexError, AttributeError, TypeError):
                    continue
                if isinstance(value, torch.SymInt) and value.node.expr.is_Integer:
                    value = int(value.node.expr)
                if isinstance(value, int):
                    self.specialized.append((source, value))
        self.module_values = [(model.symbol_origin(s), value) for s, value in model.module_values.items()]
        self.module_name = getattr(self.kernel.fn, "__module__", None)
        self.imports = imported_modules(bound)
        # Per tensor parameter: (position, name, fake, its shape when every size is static).
        self.tensors = [
            (i, name, fake, tuple(fake.shape) if all(isinstance(d, int) for d in fake.shape) else None)
            for i, (name, fake) in enumerate(zip(self.params, self.fakes))
            if isinstance(fake, torch.Tensor)
        ]
        # Dynamic dims that were 1 where a tile indexes them (it broadcasts): (name, dim, the tile
        # loop's extent and the host values it is computed from, None if not all are known).
        self.unit_dims = [(name, axis, loop, _host_values(model, loop))
                          for (name, axis), loop in sorted(model.unit_dims.items())]
        self.value_positions = [i for i, fake in enumerate(self.fakes) if not isinstance(fake, torch.Tensor)]
        self.accepted_values: LRUCache[bool] = LRUCache(_ACCEPTED_VALUES_CAPACITY)
        # When every parameter may be passed by position, a positional call of at least
        # ``fewest_positional`` arguments needs no signature binding: the rest take
        # ``defaults``. (Otherwise ``fewest_positional`` is past the end.)
        parameters = list(self.kernel.signature.parameters.values())
        self.defaults = tuple(p.default for p in parameters)
        self.fewest_positional = len(parameters)
        while self.fewest_positional and self.defaults[self.fewest_positional - 1] is not inspect.Parameter.empty:
            self.fewest_positional -= 1
        if any(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters):
            self.fewest_positional = len(parameters) + 1

    def normalize(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Positional arguments with keywords placed and defaults applied, as Helion does."""
        if not kwargs and self.fewest_positional <= len(args) <= len(self.defaults):
            return (*args, *self.defaults[len(args):])
        try:
            return tuple(self.kernel.normalize_args(*args, **kwargs))
        except TypeError as err:
            raise ArgumentError(
                f"{self.name} takes {len(self.params)} arguments ({', '.join(self.params)}): {err}"
            ) from None

    def check(self, args: tuple[Any, ...]) -> None:
        """Raise :class:`ArgumentError` naming the first argument the kernel was not compiled for."""
        for index, name, fake, static_shape in self.tensors:
            value = args[index]
            if not (
                static_shape is not None
                and isinstance(value, torch.Tensor)
                and value.is_cpu
                and value.dtype == fake.dtype
                and value.shape == static_shape
            ):  # not the common case: the checks one by one, with the message of the first that fails
                self._check_tensor(name, value, fake)
        if self.unit_dims:
            self._check_unit_dims(args)
        if self.value_positions:
            self._check_specialized_values(args)
        if self.specialized or self.module_values:
            by_param = dict(zip(self.params, args))
            self._check_hl_specialize(by_param)
            self._check_module_values(by_param)

    def _where(self, name: str) -> str:
        return f"argument '{name}' of {self.name}"

    def _check_tensor(self, name: str, value: Any, fake: torch.Tensor) -> None:
        if not isinstance(value, torch.Tensor):
            raise ArgumentError(f"{self._where(name)} must be a tensor, got {describe_value(value)}")
        if value.device.type != "cpu":
            raise ArgumentError(f"{self._where(name)} must be on the CPU, got {value.device}")
        if value.dtype != fake.dtype:
            raise ArgumentError(f"{self._where(name)} must have dtype {fake.dtype}, got {value.dtype}")
        if value.dim() != fake.dim():
            raise ArgumentError(
                f"{self._where(name)} must have {fake.dim()} dimensions, got shape {tuple(value.shape)}"
            )
        for axis, (want, got) in enumerate(zip(fake.shape, value.shape)):
            if isinstance(want, int) and want != got:
                raise ArgumentError(
                    f"{self._where(name)} must have size {want} in dimension {axis}, got shape "
                    f"{tuple(value.shape)}; compile the kernel again for other shapes (or use static_shapes=False)"
                )

    def _check_unit_dims(self, args: tuple[Any, ...]) -> None:
        """A dim that was 1 where a tile indexes it must be 1 at a call (the compiled tile reads
        its one element in every lane), unless the tile's loop is one lane wide at this call."""
        by_param = dict(zip(self.params, args))
        for name, axis, loop, host_values in self.unit_dims:
            value = by_param[name]
            if value.size(axis) == 1 or _at_most_one(loop, host_values, by_param):
                continue
            raise ArgumentError(
                f"{self._where(name)} had size 1 in dimension {axis} when the kernel was compiled, got shape "
                f"{tuple(value.shape)}; a tile indexing a dimension of size 1 reads its one element in every "
                "lane, so Helion compiles the kernel again for this shape"
            )

    def _check_specialized_values(self, args: tuple[Any, ...]) -> None:
        """Non-tensor arguments: Helion's specialization key of each must be the bound one."""
        if self.bound_key is None:
            return
        remembered = _plain_key(tuple(args[i] for i in self.value_positions))
        if remembered is not None and self.accepted_values.get(remembered):
            return
        try:
            key = self.kernel._base_specialization_key(args)
        except TypeError as err:  # a value of a type Helion does not take
            raise ArgumentError(f"{self.name}: {err}") from None
        # Tensor entries are left to the checks above (dtypes and static sizes).
        differing = [i for i in self.value_positions if i < len(key) and key[i] != self.bound_key[i]]
        if not differing:
            if remembered is not None:
                self.accepted_values.put(remembered, True)
            return
        name, value, fake = self.params[differing[0]], args[differing[0]], self.fakes[differing[0]]
        number_type = _NUMBER_TYPES.get(type(fake))
        if number_type is not None:  # Helion keys numbers by type: any value of the type will do
            raise ArgumentError(f"{self._where(name)} must be {number_type}, got {type(value).__name__} {value!r}")
        raise ArgumentError(
            f"{self._where(name)} was {describe_value(fake)} when the kernel was compiled, got "
            f"{describe_value(value)}; Helion specializes the kernel on it, so compile the kernel "
            "again for this value (the mlir backend does so itself)"
        )

    def _check_hl_specialize(self, by_param: dict[str, Any]) -> None:
        """Sizes and scalars the kernel ``hl.specialize``-d must have their bound values."""
        for source, bound_value in self.specialized:
            try:
                value = _source_value(source, by_param)
            except (KeyError, IndexError, AttributeError, TypeError):
                continue
            if value != bound_value:
                raise ArgumentError(
                    f"{self._where(_source_root(source))}: {_source_text(source)} was {bound_value} when the "
                    f"kernel was compiled (the kernel hl.specialize-s it), got {value}; compile the kernel again"
                )

    def _check_module_values(self, by_param: dict[str, Any]) -> None:
        """Module-level values are constants of the emitted code: they must not have changed."""
        for origin, baked in self.module_values:
            try:
                now = evaluate_origin(origin, by_param, self.kernel.fn, self.imports)
            except (HelionMLIRError, LookupError, AttributeError):
                now = "<undefined>"
            if now != baked:
                raise ArgumentError(
                    f"{self.name} was compiled with {describe_origin(origin, self.module_name)} = {baked!r}, "
                    f"which is now {now!r}; module-level values are constants of the compiled code: "
                    "compile the kernel again"
                )


def _host_values(model: Any, expr: sympy.Expr | None) -> dict[sympy.Symbol, HostValue] | None:
    """How a call gives each symbol of ``expr``; None when one has no name there."""
    if expr is None:
        return None
    found = {symbol: HostValue.of(model, symbol) for symbol in expr.free_symbols}
    return None if any(v is None for v in found.values()) else found  # type: ignore[return-value]


def _at_most_one(expr: sympy.Expr | None, host_values: dict[sympy.Symbol, HostValue] | None,
                 by_param: dict[str, Any]) -> bool:
    """Whether ``expr`` is at most 1 for this call (False when it cannot be evaluated)."""
    if expr is None or host_values is None:
        return False
    try:
        return bool(expr.subs({s: v.read(by_param) for s, v in host_values.items()}) <= 1)
    except (KeyError, IndexError, AttributeError, TypeError):
        return False


def _plain_key(value: Any) -> Any:
    """A hashable stand-in for a value built only of plain values, lists and tuples (each
    item with its type: 1, 1.0 and True are equal in Python), else None."""
    kind = type(value)
    if kind in _PLAIN_VALUE_TYPES:
        return kind, value
    if kind is list or kind is tuple:
        items = tuple(_plain_key(item) for item in value)
        return None if None in items else (kind, items)
    return None


def _source_value(source: Any, by_param: dict[str, Any]) -> Any:
    """The value a torch source (``L['x'].size()[1]``) has among ``by_param``."""
    kind = type(source)
    if kind is LocalSource:
        return by_param[source.local_name]
    base = _source_value(source.base, by_param)
    if kind is TensorPropertySource:
        return base.size(source.idx) if source.prop.name == "SIZE" else base.stride(source.idx)
    if kind is GetItemSource:
        return base[source.index]
    if kind is AttrSource:
        return getattr(base, source.member)
    raise TypeError(kind)


def _source_root(source: Any) -> str:
    while hasattr(source, "base"):
        source = source.base
    return getattr(source, "local_name", "?")


def _source_text(source: Any) -> str:
    kind = type(source)
    if kind is LocalSource:
        return source.local_name
    base = _source_text(source.base)
    if kind is TensorPropertySource:
        return f"{base}.{'size' if source.prop.name == 'SIZE' else 'stride'}({source.idx})"
    if kind is GetItemSource:
        return f"{base}[{source.index!r}]"
    return f"{base}.{getattr(source, 'member', '?')}"


class ReadGuards:
    """The assumptions Helion's trace makes about values the host code reads from tensor
    data (its guards on them, :func:`~helion_mlir.lowering.tensor_reads.read_guards`),
    checked at each launch with the values the host code computed.

    A guard is decided with Helion's placeholder for the value (``sorted([a, b])`` keeps the
    placeholders' order under ``b >= a``), so the emitted code is right only for the values
    that satisfy it; a launch with other values raises :class:`ArgumentError` naming the
    values, the line of the read and the assumption. A guard on a value the host code does
    not name cannot be checked: the kernel is refused when it is compiled
    (:class:`DataDependentValueError`).
    """

    def __init__(self, model: Any) -> None:
        self.name: str = model.name
        env = model.bound.env
        reads = tensor_reads(env)
        self.checks: list[tuple[HostCondition, str]] = []
        for guard in read_guards(env):
            condition = HostCondition(model, guard)
            line = next(str(reads[s].line) for s in sorted(guard.free_symbols, key=str) if s in reads)
            if not condition.complete:
                raise DataDependentValueError(
                    f"Helion's trace of {self.name} assumes `{condition.text}` about the value read from tensor "
                    f"data at {line}, and a call cannot check it: the value has no name in the host code",
                    hint="assign the value to a host variable (`n = int(t.item())`) and use the variable",
                )
            self.checks.append((condition, line))

    @property
    def names(self) -> set[str]:
        """The host variables the checks read."""
        return {v.key for condition, _line in self.checks for v in condition.values if v.key is not None}

    def check(self, values: dict[str, Any]) -> None:
        """Raise :class:`ArgumentError` when a guard is false for this launch's ``values``."""
        for condition, line in self.checks:
            holds, shown = condition.holds(values)
            if not holds:
                raise ArgumentError(
                    f"{self.name}: Helion traced the kernel assuming `{condition.text}` about the value read from "
                    f"tensor data at {line}, which is false for this call ({shown}); its compiled code is not right "
                    "for such values. Keep the value symbolic in the host code: a Python decision on it (a "
                    "comparison, `bool`, `if`) is made once, when Helion binds the kernel"
                )
