"""Run a Helion kernel's host code with a launcher of our own.

Helion generates, for every kernel, a host function: the kernel's Python code outside
its tile loops (``out = torch.empty_like(x)``, views, sizes) followed by one call
``_launcher(device_fn, grid, *device_args)`` whose ``device_args`` are named by the
device function's parameters (host variable names). We take that host function from
Helion's generated source, make each launch also pass the host code's variables
(``locals()``: the emitted function can need a host value Helion's device function does not
take, such as a value read from tensor data), execute it, and receive the device arguments
and variables by name; the kernel's return value is then exactly what Helion's host code
returns.

Helion generates the host function together with GPU device code, which can fail for
reasons that do not concern us (an op its Triton code generator lacks). Then the host
code comes from the kernel's own source instead: the function with its top-level tile
loops replaced by one launch that receives the host variables by name.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import logging
import math
import sys
import textwrap
import types
from collections.abc import Callable, Collection
from typing import Any

import helion
import helion.language
import helion.runtime
import torch
from torch._inductor import inductor_prims

from ...errors import HelionMLIRError
from ...front_end_lock import FRONT_END_LOCK, under_front_end_lock
from ...lowering.host_values import SOURCE_MODULE, imported_modules
from ...lowering.kernel_model import RNG_SEED_HOST_NAME
from .host_code_cache import host_source

__all__ = ["GENERATED_HOST_CODE", "HostCode", "Launch"]

log = logging.getLogger(__name__)

Launch = Callable[[dict[str, Any]], None]

# The file name tracebacks give Helion's generated host code (its lines are HostCode.source's).
GENERATED_HOST_CODE = "<helion host code of {}>"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


# Host code computes grids with these helpers; grids are irrelevant to the emitted
# function (it loops over every tile itself), but the expressions must evaluate.
_TRITON_HOST_HELPERS = types.SimpleNamespace(cdiv=_cdiv, next_power_of_2=_next_power_of_2)


class _HelionOnCPU(types.SimpleNamespace):
    """``helion`` as host code sees it, where device queries have CPU answers (one
    streaming multiprocessor: persistent grids collapse to one program, which the
    emitted function ignores anyway)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(helion, name)


def _make_helion_on_cpu() -> _HelionOnCPU:
    runtime = types.SimpleNamespace(**{k: getattr(helion.runtime, k) for k in dir(helion.runtime) if not k.startswith("__")})
    runtime.get_num_sm = lambda _device=None, *_a, **_k: 1
    return _HelionOnCPU(runtime=runtime)


_HELION_ON_CPU = _make_helion_on_cpu()


class _SeedsOnCPU:
    """``inductor_prims`` as host code sees it: the seeds of random ops drawn on the CPU as
    Helion's reference mode draws them (Helion's host code asks the current accelerator's
    generator, a GPU's where there is one).

    Reference mode draws seed ``i`` when a random op first asks for it, as element ``i`` of
    ``seeds(i + 1)`` drawn again from the generator's state at the call's start; on CUDA that
    is element ``i`` of ``seeds(count)``, but the CPU generator's ``randint`` does not give
    the same first elements for different counts. The generator ends where ``seeds(count)``
    leaves it, in both modes.
    """

    @staticmethod
    def seeds(count: int, _device: Any = None) -> torch.Tensor:
        cpu = torch.device("cpu")
        start = torch.random.get_rng_state()
        drawn = []
        for i in range(count):
            torch.random.set_rng_state(start)
            drawn.append(inductor_prims.seeds(i + 1, cpu)[i])
        return torch.stack(drawn) if drawn else inductor_prims.seeds(0, cpu)


_INDUCTOR_PRIMS_ON_CPU = _SeedsOnCPU()


def _language_module() -> Any:
    return helion.language


class _HostLanguage(types.SimpleNamespace):
    """``helion.language`` for host code run from the kernel source: ``hl.specialize``
    is the identity on the host, ``hl.register_tunable`` gives the config's value (as
    Helion's generated host code does); everything else is Helion's own."""

    def __init__(self, config: Any = None) -> None:
        super().__init__()
        self._tunables = dict(getattr(config, "config", None) or {})

    @staticmethod
    def specialize(value: Any) -> Any:
        return value

    def register_tunable(self, name: str, fragment: Any) -> Any:
        if name in self._tunables:
            return self._tunables[name]
        return fragment.default()

    def __getattr__(self, name: str) -> Any:
        return getattr(_language_module(), name)


@dataclasses.dataclass
class HostCode:
    """The host function of one bound kernel under one config."""

    function: Callable[..., Any]
    device_params: tuple[str, ...]
    source: str

    @classmethod
    def from_bound(cls, bound: Any, config: Any, wanted: Collection[str] = (), rng_seeds: int = 0) -> "HostCode":
        """Helion's generated host function, or the kernel's source when generation fails.

        ``wanted`` names the host values a launch must provide (the emitted function's
        arguments, the values the call checks): those Helion's device function does not take
        are passed from the host code's variables. ``rng_seeds``: how many seeds the device
        code reads, which host code from the kernel source draws itself.

        Under the front-end lock: Helion's code generator works in the bound kernel's
        shared compile environment, and both it and this module parse Python source."""
        with FRONT_END_LOCK:
            try:
                source = host_source(bound, config, lambda: bound.to_triton_code(config))
            except Exception as err:  # Helion's GPU code generator: any failure is its own
                log.info("Helion's code generator failed (%s); running host code from the kernel source", err)
                return cls.from_kernel_source(bound, config, rng_seeds)
            return cls._from_generated(bound, source, wanted)

    @classmethod
    @under_front_end_lock  # CPython 3.11's parser and compiler of ASTs are not safe in two threads at once
    def from_kernel_source(cls, bound: Any, config: Any = None, rng_seeds: int = 0) -> "HostCode":
        """The kernel function with its top-level device loops replaced by one launch; first,
        as in Helion's host code, the ``rng_seeds`` seeds of its random ops are drawn."""
        fn = bound.kernel.fn
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
        launch = ast.parse("_launcher(None, None, **{k: v for k, v in locals().items() if k != '_launcher'})").body[0]
        func = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
        func.decorator_list = []
        body: list[ast.stmt] = []
        if rng_seeds:
            body.append(ast.parse(f"{RNG_SEED_HOST_NAME} = _inductor_prims.seeds({rng_seeds})").body[0])
        launched = False
        for stmt in func.body:
            if _is_device_loop(stmt) or _is_barrier(stmt):
                if not launched:
                    body.append(launch)
                    launched = True
                continue
            body.append(stmt)
        if not launched:
            raise HelionMLIRError(f"kernel '{func.name}' has no top-level hl.tile / hl.grid loop")
        func.body = body
        func.args.kwonlyargs.append(ast.arg(arg="_launcher"))
        func.args.kw_defaults.append(None)
        ast.fix_missing_locations(tree)
        language = _HostLanguage(config)
        namespace = {k: language if v is _language_module() else v for k, v in fn.__globals__.items()}
        namespace["_inductor_prims"] = _INDUCTOR_PRIMS_ON_CPU
        exec(compile(tree, inspect.getsourcefile(fn) or "<kernel>", "exec"), namespace)  # noqa: S102
        return cls(namespace[func.name], (), source)

    @classmethod
    def _from_generated(cls, bound: Any, source: str, wanted: Collection[str]) -> "HostCode":
        tree = ast.parse(source)
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        host = next(
            (f for f in functions.values() if any(a.arg == "_launcher" for a in f.args.kwonlyargs)), None
        )
        if host is None:
            raise HelionMLIRError(f"Helion generated no host function for kernel '{bound.host_function.name}'")
        device_name = _launched_function(host)
        device = functions.get(device_name)
        if device is None:
            raise HelionMLIRError(f"host code launches '{device_name}', which Helion did not generate")
        params = tuple(a.arg for a in device.args.args)
        if set(wanted) - set(params):
            _pass_host_locals(host)
        _draw_seeds_on_cpu(host)
        module = ast.Module(body=[host], type_ignores=[])
        fn = bound.kernel.fn
        namespace = dict(getattr(fn, "__globals__", {}))
        namespace.update(torch=torch, math=math, triton=_TRITON_HOST_HELPERS, helion=_HELION_ON_CPU, _default_launcher=None,
                         inductor_prims=_INDUCTOR_PRIMS_ON_CPU)
        # Helion's host code reads module-level values through the kernel's module (``_source_module.EPS``)
        # and those of another file through an alias of its module (``_global_source0.OFFSET``).
        namespace[SOURCE_MODULE] = sys.modules.get(fn.__module__)
        namespace.update(imported_modules(bound))
        namespace[device_name] = device_name
        exec(compile(module, GENERATED_HOST_CODE.format(host.name), "exec"), namespace)  # noqa: S102
        return cls(namespace[host.name], params, source)

    def run(self, args: tuple[Any, ...], launch: Launch) -> Any:
        """Run the host code on ``args``; each launch calls ``launch(values)`` with the host
        code's variables by name, the device arguments under their parameter names."""

        def launcher(_device_fn: Any, _grid: Any, *device_args: Any, **options: Any) -> None:
            if not self.device_params:  # host code from the kernel source: variables by name
                launch(options)
                return
            if len(device_args) != len(self.device_params):
                raise HelionMLIRError(
                    f"host code passed {len(device_args)} device arguments, expected {len(self.device_params)}"
                )
            host_locals = options.get(_HOST_LOCALS)
            if host_locals is None:
                launch(dict(zip(self.device_params, device_args)))
                return
            values = dict(host_locals)
            values.update(zip(self.device_params, device_args))
            launch(values)

        return self.function(*args, _launcher=launcher)

    def run_with_launcher(self, args: tuple[Any, ...], launcher: Callable[..., Any]) -> Any:
        """Run the host code on ``args`` with the caller's own launcher, called as Helion's
        host code calls one (the host variables this module adds to a launch left out)."""

        def caller_launcher(device_fn: Any, grid: Any, *device_args: Any, **options: Any) -> Any:
            options.pop(_HOST_LOCALS, None)
            return launcher(device_fn, grid, *device_args, **options)

        return self.function(*args, _launcher=caller_launcher)


# The keyword under which generated host code passes its variables to the launcher.
_HOST_LOCALS = "_host_locals"


def _pass_host_locals(host: ast.FunctionDef) -> None:
    """Make each launch of ``host`` also pass ``locals()``, for the host values (a value read
    from tensor data, a local a guard of the trace is about) that Helion's device function
    does not take."""
    for node in ast.walk(host):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_launcher":
            node.keywords.append(ast.keyword(arg=_HOST_LOCALS, value=ast.parse("locals()", mode="eval").body))
    ast.fix_missing_locations(host)


def _draw_seeds_on_cpu(host: ast.FunctionDef) -> None:
    """Drop the host function's own ``from torch._inductor import inductor_prims``, so that its
    seeds come from :data:`_INDUCTOR_PRIMS_ON_CPU` (the name in its namespace)."""
    for node in ast.walk(host):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            node.body = [stmt for stmt in body if not _imports_inductor_prims(stmt)] or [ast.Pass()]
    ast.fix_missing_locations(host)


def _imports_inductor_prims(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and any(alias.name == "inductor_prims" for alias in stmt.names)


def _is_device_loop(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.For) or not isinstance(stmt.iter, ast.Call):
        return False
    callee = ast.unparse(stmt.iter.func)
    return callee.rsplit(".", 1)[-1] in ("tile", "grid") and callee != "range"


def _is_barrier(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and ast.unparse(stmt.value.func).rsplit(".", 1)[-1] == "barrier"
    )


def _launched_function(host: ast.FunctionDef) -> str:
    for node in ast.walk(host):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_launcher":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Name):
                return first.id
    raise HelionMLIRError(f"host function '{host.name}' does not launch a device function")

