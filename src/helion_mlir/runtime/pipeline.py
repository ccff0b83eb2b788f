"""The CPU lowering of an emitted module: from its output type to the LLVM dialect.

Functions that the requested one does not call are dropped first, so a module holding
many kernels costs only the one asked for. Lowering then runs in three stages, one pass
at a time so that a failure names its pass:

1. *To linalg-on-tensors*, depending on the output type. ``linalg-on-tensors``: nothing.
   ``tosa``: the TOSA-to-linalg/arith/tensor/scf conversions, then ``canonicalize`` to
   drop the dead ``tosa.const_shape`` operands they leave. ``stablehlo``: the shape
   dialect's broadcast checks become asserts and index arithmetic, then
   ``stablehlo-legalize-to-linalg``. ``raw`` (torch dialect): torch-mlir's
   backend-contract and linalg backend pipelines. Source-dialect ops that survive this
   stage have no lowering in the bundled MLIR; they are listed in an
   :class:`~helion_mlir.errors.ExecutionError`.
2. *Bufferization*: named linalg ops are generalized and elementwise chains fused,
   affine ops lowered (``affine.for``/``affine.if`` carrying tensors do not bufferize,
   their scf forms do), ``tm_tensor`` ops bufferized by torch-mlir's own pass, then
   one-shot bufferization across function boundaries with identity layouts, and the
   ownership-based deallocation pipeline.
3. *To LLVM*: ``memref.copy`` becomes loops (the wheel ships no MLIR runtime library
   that would implement it), ``tm_tensor``, linalg and vector transfer ops become
   loops, ``scf.forall`` becomes ``scf.parallel`` and then sequential loops, and every
   remaining dialect is converted to LLVM.

"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from ..errors import ExecutionError
from ..mlir_context import format_diagnostic
from ..mlir_types import DTYPES_OF_ELEMENT_TYPES
from ..output_type import TORCH_BACKEND_PIPELINE, OutputType
from .ir_walk import defining_op, ops_where
from .params import SCALAR_KINDS, Param, ScalarParam, TensorParam

log = logging.getLogger(__name__)

_PASS_MANAGERS: dict[str, PassManager] = {}

# Pipelines whose pass instances carry state from one run into the next, so they get a new
# pass manager per run: convert-math-to-funcs remembers the functions it generated (per op
# and type) and would call those of a module already freed (a crash, or wrong code) when
# a second module needs the same one (a vector ``math.fpowi``, as in tanh GELU).
_NOT_REUSABLE = frozenset({"builtin.module(convert-math-to-funcs)"})

#: LLVM optimization level of the JIT. Measured on this package's test kernels: O3 neither
#: compiled nor ran faster than O2; O0 compiled 3-4x faster but ran a matmul 2-3x slower.
JIT_OPT_LEVEL = 2

# One entry per pass run: (name shown in errors, full pipeline text).
Step = tuple[str, str]


def steps(*passes: str) -> tuple[Step, ...]:
    """One step per pass, each run on its own so that a failure names its pass."""
    return tuple((p, f"builtin.module({p})") for p in passes)


def _named_pipeline(pipeline: str) -> Step:
    return (pipeline.removeprefix("builtin.module(").removesuffix(")"), pipeline)


_LINALG_BACKEND_PIPELINE = OutputType.LINALG_ON_TENSORS.backend_pipeline
assert _LINALG_BACKEND_PIPELINE is not None

TO_LINALG_STEPS: dict[OutputType, tuple[Step, ...]] = {
    OutputType.LINALG_ON_TENSORS: (),
    OutputType.TOSA: steps(
        "func.func(tosa-optional-decompositions)",
        "func.func(tosa-to-linalg-named)",
        "func.func(tosa-to-linalg)",
        "func.func(tosa-to-arith)",
        "func.func(tosa-to-tensor)",
        "func.func(tosa-to-scf)",
        "func.func(canonicalize)",
    ),
    OutputType.STABLEHLO: steps(
        "func.func(convert-shape-constraints)",
        "convert-shape-to-std",
        "func.func(canonicalize)",  # removes shape.assuming regions with a true witness
        "func.func(stablehlo-legalize-to-linalg)",
        "convert-shape-to-std",  # the legalization creates shape.shape_of for dynamic sizes
    ),
    OutputType.RAW: (
        _named_pipeline(TORCH_BACKEND_PIPELINE),
        _named_pipeline(_LINALG_BACKEND_PIPELINE),
    ),
}

# Dialects none of whose ops may survive the first stage, per output type.
SOURCE_DIALECTS: dict[OutputType, frozenset[str]] = {
    OutputType.LINALG_ON_TENSORS: frozenset(),
    OutputType.TOSA: frozenset({"tosa"}),
    OutputType.STABLEHLO: frozenset({"stablehlo", "shape"}),
    OutputType.RAW: frozenset({"torch", "torch_c"}),
}

PRE_BUFFERIZE_STEPS: tuple[Step, ...] = steps(
    "func.func(linalg-generalize-named-ops)",
    "func.func(linalg-fuse-elementwise-ops)",
    "func.func(lower-affine)",
    "func.func(tm-tensor-bufferize)",
)

BUFFERIZE_STEPS: tuple[Step, ...] = steps(
    # allow-return-allocs-from-loops: an scf.while whose condition forwards its tensor
    # carries a new buffer per iteration, which is refused without it.
    "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map}",
    "buffer-deallocation-pipeline",
    "convert-bufferization-to-memref",
)

TO_LLVM_STEPS: tuple[Step, ...] = steps(
    "func.func(refback-munge-memref-copy)",
    "func.func(tm-tensor-to-loops)",
    "func.func(convert-linalg-to-loops)",
    "func.func(convert-vector-to-scf)",
    "scf-forall-to-parallel",
    "func.func(lower-affine)",
    "convert-scf-to-cf",
    "expand-strided-metadata",
    "lower-affine",
    "convert-vector-to-llvm",
    "finalize-memref-to-llvm",
    # bf16 arithmetic (and half-precision math) runs in f32 and bf16 conversions become integer ops, so the
    # JIT never needs compiler-rt helpers such as __truncsfbf2 (absent in-process).
    "func.func(math-extend-to-supported-types{target-type=f32})",
    "func.func(arith-emulate-unsupported-floats{source-types=bf16 target-type=f32})",
    "func.func(arith-expand{include-bf16=true})",
    "func.func(convert-math-to-llvm)",
    "convert-math-to-libm",
    "convert-arith-to-llvm",
    "convert-index-to-llvm",
    "convert-func-to-llvm",
    "convert-cf-to-llvm",
    "convert-ub-to-llvm",
    "reconcile-unrealized-casts",
)


def mark_fresh_buffers_restrict(module: ir.Module) -> None:
    """Let one-shot bufferization accept the ``to_tensor`` ops ``tm-tensor-bufferize`` leaves.

    That pass wraps each output buffer it allocates in a ``bufferization.to_tensor``
    without the ``restrict`` flag, which one-shot analysis refuses. A buffer straight
    from ``memref.alloc`` with a single ``to_tensor`` user is aliased by no other
    tensor, which is what ``restrict`` asserts.
    """

    def sole_view_of_fresh_buffer(op: ir.Operation) -> bool:
        if op.name != "bufferization.to_tensor" or "restrict" in op.attributes:
            return False
        buffer = op.operands[0]
        source = defining_op(buffer)
        views = [use for use in buffer.uses if use.owner.name == "bufferization.to_tensor"]
        return source is not None and source.name == "memref.alloc" and len(views) == 1

    for op in ops_where(module, sole_view_of_fresh_buffer):
        op.attributes["restrict"] = ir.UnitAttr.get()


def store_single_elements_in_place(module: ir.Module) -> None:
    """Turn one-element ``tensor.insert_slice`` ops of a ``tensor.from_elements`` into ``tensor.insert``.

    Kernels store through tensor indices one element at a time, emitted as one-element
    slices (which IREE runs correctly, see docs/downstream.md). Bufferized as they are, each
    store allocates its one-element buffer on the heap; as ``tensor.insert`` it is a
    ``memref.store`` in place.
    """
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()

    def one_element_store(op: ir.Operation) -> bool:
        if op.name != "tensor.insert_slice":
            return False
        source = defining_op(op.operands[0])
        return (
            source is not None
            and source.name == "tensor.from_elements"
            and len(source.operands) == 1
            and all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
            and all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
        )

    found = ops_where(module, one_element_store)
    index = ir.IndexType.get()
    for op in found:
        source, dest, dynamic_offsets = op.operands[0], op.operands[1], list(op.operands[2:])
        with ir.InsertionPoint(op), op.location:
            indices = []
            for offset in ir.DenseI64ArrayAttr(op.attributes["static_offsets"]):
                if offset == dynamic:
                    indices.append(dynamic_offsets.pop(0))
                else:
                    constant = ir.Operation.create(
                        "arith.constant", results=[index], attributes={"value": ir.IntegerAttr.get(index, offset)})
                    indices.append(constant.result)
            insert = ir.Operation.create(
                "tensor.insert", results=[dest.type], operands=[source.owner.operands[0], dest, *indices])
        op.result.replace_all_uses_with(insert.result)
        element = source.owner
        op.erase()
        if not list(element.result.uses):
            element.erase()


def move_bf16_through_memory_as_i16(module: ir.Module) -> None:
    """Load and store bf16 values (and vectors of them) as i16 of the same bits.

    x86 instruction selection on CPUs with AVX512-BF16 but no AVX512-FP16 has no pattern for
    some bf16 stores that LLVM's loop vectorizer creates (``LLVM ERROR: Cannot select ...
    store (s16)``, which aborts the process). The arithmetic on bf16 is already integer code
    (``arith-emulate-unsupported-floats``, ``arith-expand``); with this, a bf16 copy is an
    i16 copy and no bf16 value is loaded or stored.
    """
    bf16, i16 = ir.BF16Type.get(), ir.IntegerType.get_signless(16)

    def as_i16(type_: ir.Type) -> ir.Type | None:
        if type_ == bf16:
            return i16
        if isinstance(type_, ir.VectorType) and type_.element_type == bf16:
            return ir.VectorType.get(type_.shape, i16, loc=ir.Location.unknown())
        return None

    found = ops_where(module, lambda op: (op.name == "llvm.load" and as_i16(op.result.type) is not None) or (
        op.name == "llvm.store" and as_i16(op.operands[0].type) is not None))
    for op in found:
        attributes = {name: op.attributes[name] for name in op.attributes}
        with ir.InsertionPoint(op), op.location:
            if op.name == "llvm.load":
                bits = ir.Operation.create("llvm.load", results=[as_i16(op.result.type)],
                                           operands=list(op.operands), attributes=attributes)
                value = ir.Operation.create("llvm.bitcast", results=[op.result.type], operands=[bits.result])
                op.result.replace_all_uses_with(value.result)
            else:
                value, address = op.operands[0], op.operands[1]
                bits = ir.Operation.create("llvm.bitcast", results=[as_i16(value.type)], operands=[value])
                ir.Operation.create("llvm.store", operands=[bits.result, address], attributes=attributes)
        op.erase()


@dataclass
class ModuleLowering:
    """One module on its way to LLVM, and what an error about it must mention."""

    module: ir.Module
    func_name: str
    kind: OutputType
    diagnostics: list[str]

    def error(
        self, message: str, diagnostics: Sequence[str] = (), *, pass_name: str | None = None
    ) -> ExecutionError:
        return ExecutionError(
            message,
            func_name=self.func_name,
            output_type=self.kind.value,
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

    def keep_only_the_function(self) -> None:
        """Drop every function ``@func_name`` does not call: no time spent compiling them."""
        target = self.function()  # fails early on a wrong name
        for op in self.module.body.operations:
            is_function = op.operation.name == "func.func"
            if is_function and ir.StringAttr(op.attributes["sym_name"]).value != self.func_name:
                op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        if "sym_visibility" in target.attributes:
            del target.attributes["sym_visibility"]  # public: kept, and given a C interface
        self.run(steps("symbol-dce"))

    def define_bf16_truncation(self) -> None:
        """Define ``__truncsfbf2`` (f32 -> bf16, round to nearest even) in the module.

        bf16 conversions are expanded to integer ops, but LLVM's optimizer recognizes that
        idiom and turns it back into an ``fptrunc``, which x86 lowers to a call of this
        compiler-rt helper; the JIT has no compiler-rt. Our definition is ``optnone`` so the
        optimizer cannot fold it into a call of itself.
        """
        if "bf16" not in str(self.module.operation):
            return
        helper = ir.Module.parse(_TRUNCSFBF2)
        for op in helper.body.operations:
            op.operation.clone(ir.InsertionPoint(self.module.body))

    def run(self, to_run: Sequence[Step]) -> None:
        for name, pipeline in to_run:
            manager = _PASS_MANAGERS.get(pipeline)
            if manager is None:
                manager = PassManager.parse(pipeline)
                if pipeline not in _NOT_REUSABLE:
                    _PASS_MANAGERS[pipeline] = manager
            already_reported = len(self.diagnostics)
            try:
                manager.run(self.module.operation)
            except ir.MLIRError as err:
                found = self.diagnostics[already_reported:] + [
                    format_diagnostic(d) for d in err.error_diagnostics
                ]
                raise self.error("the pass failed", found or [str(err)], pass_name=name) from None

    def reject_ops(self, is_left_over: Callable[[str], bool], message: str) -> None:
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

    def signature(self) -> tuple[tuple[Param, ...], tuple[TensorParam, ...]]:
        """The tensor-level signature, read after the first stage (no torch types left)."""
        func_type = ir.FunctionType(ir.TypeAttr(self.function().attributes["function_type"]).value)
        params = tuple(self._param(t, f"argument #{i}") for i, t in enumerate(func_type.inputs))
        results: list[TensorParam] = []
        for i, type_ in enumerate(func_type.results):
            result = self._param(type_, f"result #{i}")
            if not isinstance(result, TensorParam):
                raise self.error(f"result #{i} has type {type_}; only tensors can be returned")
            results.append(result)
        return params, tuple(results)

    def prepare_boundary(self, params: Sequence[Param]) -> None:
        """Ask for a C interface and forbid writes into the caller's tensors."""
        func = self.function()
        func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        existing = (
            list(ir.ArrayAttr(func.attributes["arg_attrs"]))
            if "arg_attrs" in func.attributes
            else [ir.DictAttr.get({}) for _ in params]
        )
        updated = []
        for param, attrs in zip(params, existing):
            entries = {named.name: named.attr for named in ir.DictAttr(attrs)}
            if isinstance(param, TensorParam):
                entries["bufferization.writable"] = ir.BoolAttr.get(False)
            updated.append(ir.DictAttr.get(entries))
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(updated)


_TRUNCSFBF2 = """
func.func private @__truncsfbf2(%x: f32) -> bf16 attributes {passthrough = ["noinline", "optnone"]} {
  %bits = arith.bitcast %x : f32 to i32
  %c16 = arith.constant 16 : i32
  %c1 = arith.constant 1 : i32
  %bias = arith.constant 32767 : i32
  %quiet_nan = arith.constant 32704 : i16
  %high = arith.shrui %bits, %c16 : i32
  %lsb = arith.andi %high, %c1 : i32
  %rounding = arith.addi %bias, %lsb : i32
  %rounded = arith.addi %bits, %rounding : i32
  %shifted = arith.shrui %rounded, %c16 : i32
  %narrow = arith.trunci %shifted : i32 to i16
  %is_nan = arith.cmpf uno, %x, %x : f32
  %result = arith.select %is_nan, %quiet_nan, %narrow : i16
  %as_bf16 = arith.bitcast %result : i16 to bf16
  return %as_bf16 : bf16
}
"""
