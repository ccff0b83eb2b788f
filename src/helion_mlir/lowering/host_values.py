"""Where the values the device code reads from the host come from, and how to get them.

Helion records, for every symbol of the device IR, the host expression it stands for
(``HostFunction.expr_to_origin``): a kernel parameter (``eps``), a host local
(``block_k = helion.next_power_of_2(helion.cdiv(k, split_k))``), an item or attribute of a
parameter (``clamp[0]``), a cell of a callable parameter's closure (a ``score_mod`` that
captured a float), or a number defined at the kernel's module level (``EPS``, ``CHUNK``).
Host tensors carry the same kind of origin (``HostFunction.tensor_to_origin``).

The lowering sorts them in two groups:

* **module-level values** (the origin's root is a module global) are read once, when the
  kernel is emitted, and become constants: the kernel is specialized on them, as Helion
  specializes its own constant expressions. A compiled kernel reads them again at each
  call and refuses to run when one has changed;
* **per-call values** (everything else that is not a kernel parameter) are arguments of
  the emitted function, because one bound kernel serves every value of them (Helion keys
  floats, ints and closure cells by type only). The host code, or the compiled kernel from
  the call's arguments, supplies them at each call.
"""

from __future__ import annotations

import builtins
import dataclasses
import re
import sys
from collections.abc import Mapping
from typing import Any

import sympy
from helion._compiler import variable_origin as vo

from ..errors import HelionMLIRError

__all__ = [
    "SOURCE_MODULE",
    "HostValue",
    "describe_origin",
    "evaluate_origin",
    "imported_modules",
    "is_module_level",
    "is_per_call",
    "origin_arg_name",
]

# The name Helion gives the kernel's own module in origins (``_source_module.EPS``).
SOURCE_MODULE = "_source_module"

# Origins the lowering resolves itself: tiles, grids, tensor sizes, device values.
_LOWERING_ORIGINS = (
    vo.BlockSizeOrigin,
    vo.ReductionDimensionOrigin,
    vo.GridOrigin,
    vo.TensorSizeOrigin,
    vo.TensorStrideOrigin,
    vo.DeviceOrigin,
    vo.SourceOrigin,
)


def _root(origin: vo.Origin) -> vo.Origin:
    while isinstance(origin, vo.WrappedOrigin):
        origin = origin.value
    return origin


def is_module_level(origin: Any) -> bool:
    """Whether ``origin`` is rooted in a module global (``EPS``, ``CFG.eps``, ``math.pi``)."""
    return isinstance(origin, vo.Origin) and isinstance(_root(origin), (vo.GlobalOrigin, vo.BuiltinOrigin))


def is_per_call(origin: Any, params: Mapping[str, Any]) -> bool:
    """Whether ``origin`` is a host value computed per call that is not itself a kernel
    parameter: a host local, or an item, attribute or closure cell of a parameter."""
    if not isinstance(origin, vo.HostOrigin | vo.WrappedOrigin) or isinstance(origin, _LOWERING_ORIGINS):
        return False
    if is_module_level(origin):
        return False
    if isinstance(origin, vo.NameOrigin):
        return origin.name not in params
    return isinstance(_root(origin), vo.NameOrigin)


def origin_arg_name(origin: vo.Origin) -> str:
    """The argument name Helion's device code gives this value (``clamp_item_0``), made a
    valid MLIR SSA suffix."""
    try:
        name = origin.suggest_var_name()
    except NotImplementedError:
        name = origin.host_str()
    return re.sub(r"[^A-Za-z0-9_$.-]", "_", name)


def describe_origin(origin: vo.Origin, module_name: str | None = None) -> str:
    """The origin as the user wrote it: ``EPS`` (or ``mymodule.EPS``), ``clamp[0]``."""
    if isinstance(origin, vo.AttributeOrigin):
        base = origin.value
        if isinstance(base, vo.GlobalOrigin) and base.name == SOURCE_MODULE:
            return f"{module_name}.{origin.key}" if module_name else origin.key
        return f"{describe_origin(base, module_name)}.{origin.key}"
    if isinstance(origin, vo.GetItemOrigin):
        return f"{describe_origin(origin.value, module_name)}[{origin.key!r}]"
    if isinstance(origin, vo.ClosureOrigin):
        return f"{describe_origin(origin.value, module_name)}.__closure__[{origin.key}]"
    if isinstance(origin, vo.NameOrigin):
        return origin.name
    return repr(origin)


def imported_modules(bound: Any) -> dict[str, Any]:
    """The modules Helion's host code imports under an alias of its own (``_global_source0``:
    the module of a helper function from another file that reads that file's globals)."""
    return {imported.alias: imported.value for imported in bound.host_function.global_imports.values()}


def evaluate_origin(origin: vo.Origin, params: Mapping[str, Any], fn: Any,
                    imports: Mapping[str, Any] | None = None) -> Any:
    """The value ``origin`` has now: parameters from ``params``, globals from the module of
    the kernel function ``fn`` or the host code's ``imports`` (:func:`imported_modules`). A
    host local has no value outside the host code: raises :class:`HelionMLIRError`."""
    if isinstance(origin, vo.AttributeOrigin):
        return getattr(evaluate_origin(origin.value, params, fn, imports), origin.key)
    if isinstance(origin, vo.GetItemOrigin):
        return evaluate_origin(origin.value, params, fn, imports)[origin.key]
    if isinstance(origin, vo.ClosureOrigin):
        closure = evaluate_origin(origin.value, params, fn, imports).__closure__ or ()
        return closure[origin.key].cell_contents
    if isinstance(origin, (vo.GlobalOrigin, vo.BuiltinOrigin)):
        if imports and origin.name in imports:
            return imports[origin.name]
        return _global(origin.name, fn)
    if isinstance(origin, vo.NameOrigin) and origin.name in params:
        return params[origin.name]
    raise HelionMLIRError(f"the host value {describe_origin(origin)} is only known to the kernel's host code")


def _global(name: str, fn: Any) -> Any:
    if name == SOURCE_MODULE:
        module = sys.modules.get(getattr(fn, "__module__", "") or "")
        if module is None:
            raise HelionMLIRError(f"the module of kernel '{getattr(fn, '__name__', fn)}' is not loaded")
        return module
    namespace = getattr(fn, "__globals__", {})
    if name in namespace:
        return namespace[name]
    if hasattr(builtins, name):
        return getattr(builtins, name)
    raise HelionMLIRError(f"the module-level name '{name}' is not defined")


@dataclasses.dataclass(frozen=True)
class HostValue:
    """A symbol of the kernel as a launch sees it, for checks before the launch: a host
    variable (``key``), a size of one (``axis``), or a constant block size."""

    text: str  # how messages name it: ``n``, ``out.size(0)``, ``block_size_0``
    key: str | None
    axis: int | None = None
    constant: int | None = None

    @classmethod
    def of(cls, model: Any, symbol: sympy.Symbol) -> "HostValue | None":
        """How a launch reads ``symbol`` (a :class:`~.kernel_model.KernelModel`'s); None
        when the host code does not name it."""
        origin = model.symbol_origin(symbol)
        block_id = model.block_vars.get(symbol)
        if block_id is None and isinstance(origin, vo.BlockSizeOrigin):
            block_id = origin.block_id
        if block_id is not None:
            if block_id in model.block_sizes:
                return cls(f"block_size_{block_id}", None, constant=model.block_sizes[block_id])
            return cls(f"_BLOCK_SIZE_{block_id}", f"_BLOCK_SIZE_{block_id}")
        if isinstance(origin, vo.NameOrigin) and not isinstance(origin, (vo.GlobalOrigin, vo.BuiltinOrigin)):
            return cls(origin.name, origin.name)
        if isinstance(origin, vo.TensorSizeOrigin) and isinstance(origin.value, vo.NameOrigin):
            name, axis = origin.value.name, int(origin.key)
            return cls(f"{name}.size({axis})", name, axis=axis)
        return None

    def read(self, values: Mapping[str, Any]) -> Any:
        """Its value among a launch's host values (by host name)."""
        if self.key is None:
            return self.constant
        value = values[self.key]
        return value.size(self.axis) if self.axis is not None else value
