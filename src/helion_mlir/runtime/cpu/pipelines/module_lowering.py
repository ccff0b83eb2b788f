"""One module on its way to LLVM: the module, the function asked for, and what the
pipeline's steps learn about its boundary (its signature, which arguments hold which
results). The boundary steps are methods here; each is a step of the pipelines by its name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from torch_mlir import ir

from ....errors import ExecutionError
from ....mlir_types import DTYPES_OF_ELEMENT_TYPES, PACKED_PAIR_DTYPES
from ....output_type import OutputType
from ...params import SCALAR_KINDS, Param, ScalarParam, TensorParam
from ..openmp import unsupported_constructs
from ..rewrites.llvm.failed_checks import Check
from ..rewrites.llvm.failed_checks import (
    return_on_failed_checks as _return_on_failed_checks,
)
from ..rewrites.tensor.in_place_results import (
    destinations,
    drop_argument_results,
    mark_writable,
    store_results_in_destinations,
)
from .options import PipelineOptions

__all__ = ["SOURCE_DIALECTS", "ModuleLowering"]

# Dialects none of whose ops may survive the first stage, per output type.
SOURCE_DIALECTS: dict[OutputType, frozenset[str]] = {
    OutputType.LINALG_ON_TENSORS: frozenset(),
    OutputType.TOSA: frozenset({"tosa"}),
    OutputType.STABLEHLO: frozenset({"stablehlo", "shape"}),
    OutputType.RAW: frozenset({"torch", "torch_c"}),
}


@dataclass
class ModuleLowering:
    """A module being lowered, and what an error about it must mention."""

    module: ir.Module
    func_name: str
    options: PipelineOptions
    diagnostics: list[str]
    params: tuple[Param, ...] = ()
    results: tuple[TensorParam, ...] = ()
    #: Result -> the argument it is computed in and written into (``in_place``).
    destination: dict[int, int] = field(default_factory=dict)
    #: Per result, the argument whose buffer holds it after a call, or None if returned.
    held_by: tuple[int | None, ...] = ()
    #: Checked mode: the run-time checks by the number a failed one reports.
    checks: tuple[Check, ...] = ()

    def error(
        self, message: str, diagnostics: Sequence[str] = (), *, pass_name: str | None = None
    ) -> ExecutionError:
        return ExecutionError(
            message,
            func_name=self.func_name,
            output_type=self.options.output_type.value,
            pass_name=pass_name,
            diagnostics=diagnostics,
        )

    def function(self) -> ir.OpView:
        functions = {
            ir.StringAttr(op.attributes["sym_name"]).value: op
            for op in self.module.body.operations
            if op.operation.name == "func.func"
        }
        if self.func_name not in functions:
            names = ", ".join(sorted(functions)) or "none"
            raise self.error(f"the module has no func.func of that name (it has: {names})")
        return functions[self.func_name]

    # ------------------------------------------------------------------ boundary steps
    def make_the_function_public(self) -> None:
        """Check that the function exists and make it public: kept, and given a C interface."""
        target = self.function()  # fails early on a wrong name
        if "sym_visibility" in target.attributes:
            del target.attributes["sym_visibility"]

    def read_signature(self) -> None:
        """Read the tensor-level signature (no torch types left): the types that cross from Python."""
        func_type = ir.FunctionType(ir.TypeAttr(self.function().attributes["function_type"]).value)
        self.params = tuple(self._param(t, f"argument #{i}") for i, t in enumerate(func_type.inputs))
        results: list[TensorParam] = []
        for i, type_ in enumerate(func_type.results):
            result = self._param(type_, f"result #{i}")
            if not isinstance(result, TensorParam):
                raise self.error(f"result #{i} has type {type_}; only tensors can be returned")
            results.append(result)
        self.results = tuple(results)
        self.held_by = (None,) * len(results)

    def prepare_boundary(self) -> None:
        """Ask for a C interface and forbid writes into the caller's tensors."""
        func = self.function()
        func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        existing = (
            list(ir.ArrayAttr(func.attributes["arg_attrs"]))
            if "arg_attrs" in func.attributes
            else [ir.DictAttr.get({}) for _ in self.params]
        )
        updated = []
        for param, attrs in zip(self.params, existing):
            entries = {named.name: named.attr for named in ir.DictAttr(attrs)}
            if isinstance(param, TensorParam):
                entries["bufferization.writable"] = ir.BoolAttr.get(False)
            updated.append(ir.DictAttr.get(entries))
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(updated)

    def write_results_in_place(self) -> None:
        """Let bufferization write each result into the argument it is computed in.

        Packed float4 arguments cross the boundary as unpacked copies, never the caller's
        tensor, so they are never written in place.
        """
        packed = {i for i, p in enumerate(self.params) if isinstance(p, TensorParam) and p.dtype in PACKED_PAIR_DTYPES}
        func = self.function()
        self.destination = {r: a for r, a in destinations(func).items() if a not in packed}
        mark_writable(func, set(self.destination.values()))

    def store_results_in_destinations(self) -> None:
        """Store a result no longer computed in its destination argument into it (before bufferization)."""
        store_results_in_destinations(self.function(), self.destination)

    def drop_argument_results(self) -> None:
        """Stop returning the results that are now a writable argument's buffer (after bufferization)."""
        self.held_by = drop_argument_results(self.function(), set(self.destination.values()))

    def return_on_failed_checks(self) -> None:
        """Failed run-time checks call back with their number and return early instead of aborting."""
        self.checks = _return_on_failed_checks(self.module, self.function())

    # ------------------------------------------------------------------ checks
    def check_lowered_to_linalg(self) -> None:
        """Fail, listing them, if ops of the source dialects are left: the bundled MLIR cannot lower them."""
        source = SOURCE_DIALECTS[self.options.output_type]
        self._reject_ops(
            lambda name: name.split(".", 1)[0] in source,
            "torch-mlir's bundled MLIR has no lowering to linalg for {ops}; "
            "a module using them cannot be executed",
        )

    def check_lowered_to_llvm(self) -> None:
        """Fail, listing them, if ops other than the LLVM and OpenMP dialects' are left."""
        self._reject_ops(
            lambda name: name != "builtin.module" and not name.startswith(("llvm.", "omp.")),
            "these ops were not lowered to the LLVM dialect: {ops}",
        )

    def check_openmp_constructs(self) -> None:
        """Fail, listing them, if OpenMP constructs are left that torch's runtime is not driven for."""
        unsupported = unsupported_constructs(self.module)
        if unsupported:
            raise self.error("parallel loops use OpenMP constructs the package does not run on torch's "
                             f"OpenMP runtime: {', '.join(unsupported)}")

    def _reject_ops(self, is_left_over: Callable[[str], bool], message: str) -> None:
        left: set[str] = set()

        def visit(op: ir.Operation) -> ir.WalkResult:
            if is_left_over(op.name):
                left.add(op.name)
            return ir.WalkResult.ADVANCE

        self.module.operation.walk(visit)
        if left:
            raise self.error(message.format(ops=", ".join(sorted(left))))

    def _param(self, type_: ir.Type, what: str) -> Param:
        if isinstance(type_, ir.RankedTensorType):
            element = str(type_.element_type)
            if element not in DTYPES_OF_ELEMENT_TYPES:
                raise self.error(
                    f"{what} has type {type_}: element type {element} has no torch dtype here"
                )
            dims = tuple(None if ir.ShapedType.is_dynamic_size(d) else d for d in type_.shape)
            return TensorParam(str(type_), dims, DTYPES_OF_ELEMENT_TYPES[element])
        if str(type_) in SCALAR_KINDS:
            ctype, accepted = SCALAR_KINDS[str(type_)]
            return ScalarParam(str(type_), ctype, accepted)
        raise self.error(
            f"{what} has type {type_}; only ranked tensors and "
            f"{', '.join(SCALAR_KINDS)} scalars can be passed"
        )
