"""Parse and verify MLIR text in-process with torch-mlir's bundled MLIR.

Everything the package returns goes through :func:`verify_module_text` first, so a
caller never receives text that another MLIR tool would reject as malformed.

Verification says a module is well formed, not that it is well defined:
:func:`undefined_reads` finds reads of tensor elements that no op has written (a
``tensor.empty``'s contents).

The elements of a ``tensor.empty`` are undefined in MLIR: a compiler may hand out any
memory for it. One that happens to be zeroed (a fresh page from the system allocator, as
the in-process JIT often gets) hides a read of them, and another compiler's allocator
(IREE's pools) then gives a wrong answer with no error. Every module the package emits
must therefore write each element of a fresh tensor before anything reads it.

:func:`undefined_reads` proves this for one module at the tensor level, for every output
type (the ops torch-mlir produced count as reads of all their operands). It follows the
contents of each ``tensor.empty`` forward:

- a linalg op writes every element of its ``outs``: the result is defined unless its body
  reads the out block argument (``linalg.matmul`` accumulates, a ``linalg.generic`` may
  read it); an ``ins`` operand is read;
- views (``extract_slice``, ``cast``, reshapes) and partial writes (``insert_slice``,
  ``insert``) keep the contents as undefined as they were, except ``insert_slice``s that
  provably cover their whole destination: one at offset 0 with the destination's sizes,
  or a chain of slices (the halves of ``hl.join``) whose union is every element: static
  offsets, sizes and strides along the static axes, and each axis of run-time size taken
  whole (offset 0, the ``tensor.empty``'s own size value);
- ``scf.for``, ``scf.while`` and ``scf.if`` carry undefined contents through their
  iteration arguments, yields and results (to a fixpoint);
- any other use reads the value: ``tensor.extract``, a ``func.return`` (the caller reads
  it), an op of another dialect.

The analysis is conservative: a tensor filled piece by piece by a loop counts as
undefined after it, since covering cannot be proven in general. An emission that fills
a tensor that way starts from ``linalg.fill`` instead, which costs one pass over a tile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch_mlir import ir

from .errors import MLIRVerificationError
from .mlir_context import format_diagnostic, mlir_session

__all__ = ["UndefinedRead", "parse_module", "undefined_reads", "verify_module_text"]


def parse_module(text: str, *, what: str = "module") -> ir.Module:
    """Parse (which also verifies) ``text`` in the shared context.

    The caller must hold :func:`mlir_session` for as long as it uses the returned module.
    Unregistered dialects are rejected, so opaque placeholder ops cannot slip through.
    """
    with mlir_session() as (_ctx, diagnostics):
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as err:
            found = [format_diagnostic(d) for d in err.error_diagnostics] or [str(err)]
            raise MLIRVerificationError(what, diagnostics + found, text) from None
        if not module.operation.verify():
            raise MLIRVerificationError(what, diagnostics or ["verifier failed"], text)
        return module


def verify_module_text(text: str, *, what: str = "module") -> str:
    """Raise :class:`MLIRVerificationError` unless ``text`` parses and verifies; return it."""
    with mlir_session():
        parse_module(text, what=what)
    return text


# Ops whose result is a view or a partial update of operand 0: undefined stays undefined.
_PASS_THROUGH = frozenset({
    "tensor.extract_slice", "tensor.cast", "tensor.expand_shape", "tensor.collapse_shape", "tensor.reshape",
    "tensor.pad", "tensor.insert", "tensor.insert_slice",
})
# Uses that read nothing of the elements.
_METADATA = frozenset({"tensor.dim", "tensor.rank"})
_LOOP_ROUNDS = 4
# Static tensors up to this many elements have their written elements tracked one by one.
_MAX_TRACKED_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class UndefinedRead:
    """One op reading elements that may not have been written: its name, its location and
    which operand (or what) reads them."""

    op: str
    location: str
    what: str

    def __str__(self) -> str:
        return f"{self.location}: {self.op} reads {self.what} of a tensor.empty that was never written"


def _segments(op: ir.Operation) -> tuple[int, int]:
    """A linalg op's number of ``ins`` and ``outs`` operands."""
    if "operandSegmentSizes" in op.attributes:
        ins, outs = (int(x) for x in ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        return ins, outs
    return len(op.operands) - len(op.results), len(op.results)


def _reads_init(op: ir.Operation, out_index: int, n_ins: int) -> bool:
    """Whether a linalg op's body reads its ``out_index``-th init (named ops have bodies too)."""
    if not op.regions or not op.regions[0].blocks:
        return True
    block = op.regions[0].blocks[0]
    position = n_ins + out_index
    if position >= len(block.arguments):
        return False  # linalg.map: the body sees the inputs only
    return any(True for _ in block.arguments[position].uses)


def _constant_index(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def _covers_destination(op: ir.Operation) -> bool:
    """Whether a ``tensor.insert_slice`` writes every element of its destination: offsets
    0, unit strides, and sizes equal to the destination's (static, or the same values as
    the destination ``tensor.empty``'s dynamic sizes)."""
    dest = op.operands[1]
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    dynamic = ir.ShapedType.get_dynamic_size()
    if any(o != 0 for o in offsets) or any(s != 1 for s in strides):
        return False  # dynamic offsets and strides are marked too, and count as not covering
    shape = ir.RankedTensorType(dest.type).shape
    dynamic_sizes = list(op.operands)[2:]  # no dynamic offsets or strides (checked above)
    empty = dest.owner
    empty_sizes = list(empty.operands) if not isinstance(empty, ir.Block) and empty.name == "tensor.empty" else None
    taken = 0
    for dim, size in enumerate(sizes):
        if size != dynamic:
            if size != shape[dim]:
                return False
            continue
        given = dynamic_sizes[taken]
        taken += 1
        if shape[dim] != dynamic:
            if _constant_index(given) != shape[dim]:
                return False
        elif empty_sizes is None or given not in empty_sizes:
            return False
    return empty_sizes is not None or all(s != dynamic for s in shape)


class _Analysis:
    """The set of values whose elements may be undefined, and the reads found."""

    def __init__(self) -> None:
        self.undefined: set[ir.Value] = set()
        # For undefined tensors built by insert_slices: which elements of the static axes
        # are written (an axis of run-time size counts as one element, written whole), and
        # the tensor.empty's size values of those axes.
        self.written: dict[ir.Value, tuple[np.ndarray, list[ir.Value]]] = {}
        self.reads: dict[tuple[str, str, str], UndefinedRead] = {}

    def read(self, op: ir.Operation, what: str) -> None:
        found = UndefinedRead(op.name, str(op.location), what)
        self.reads.setdefault((found.op, found.location, found.what), found)

    def mark(self, value: ir.Value, undefined: bool) -> bool:
        """Record ``value``'s state; whether it changed."""
        if undefined and value not in self.undefined:
            self.undefined.add(value)
            return True
        return False

    def block(self, block: ir.Block) -> None:
        for op in block.operations:
            self.op(op.operation)

    def op(self, op: ir.Operation) -> None:
        name = op.name
        bad = [i for i, v in enumerate(op.operands) if v in self.undefined]
        if name == "tensor.empty":
            self.mark(op.results[0], True)
            dynamic = ir.ShapedType.get_dynamic_size()
            shape = [1 if s == dynamic else s for s in ir.RankedTensorType(op.results[0].type).shape]
            if int(np.prod(shape)) <= _MAX_TRACKED_ELEMENTS:
                self.written[op.results[0]] = (np.zeros(shape, dtype=bool), list(op.operands))
        elif name.startswith("linalg.") and op.regions:
            self._linalg(op, bad)
        elif name == "scf.for":
            self._for(op)
        elif name == "scf.while":
            self._while(op)
        elif name == "scf.if":
            for region in op.regions:
                for block in region.blocks:
                    self.block(block)
            self._results_from_yields(op, [0, 1])
        elif name in ("scf.yield", "scf.condition") or name in _METADATA:
            pass  # the parent reads the yields; metadata reads no element
        elif name in _PASS_THROUGH:
            if name == "tensor.insert_slice" and 0 not in bad and (_covers_destination(op) or self._fills(op)):
                return
            if any(i in bad for i in (0, 1)):
                self.mark(op.results[0], True)
            for i in bad:
                if i > 1 or (i == 1 and name not in ("tensor.insert", "tensor.insert_slice")):
                    self.read(op, f"operand #{i}")
        else:
            for i in bad:
                self.read(op, "its results" if name == "func.return" else f"operand #{i}")
            for region in op.regions:
                for block in region.blocks:
                    self.block(block)

    def _fills(self, op: ir.Operation) -> bool:
        """Track an ``insert_slice`` into a tracked tensor; whether it completes it."""
        tracked = self.written.get(op.operands[1])
        if tracked is None:
            return False
        before, empty_sizes = tracked
        dynamic = ir.ShapedType.get_dynamic_size()
        offsets, sizes, strides = (list(ir.DenseI64ArrayAttr(op.attributes[f"static_{k}"]))
                                   for k in ("offsets", "sizes", "strides"))
        if dynamic in offsets or dynamic in strides:
            return False
        dynamic_sizes = iter(list(op.operands)[2:])  # the sizes' (offsets and strides are static)
        empty_sizes_left = iter(empty_sizes)
        shape = ir.RankedTensorType(op.operands[1].type).shape
        region = []
        for extent, o, s, t in zip(shape, offsets, sizes, strides):
            if extent == dynamic:
                if s != dynamic or o != 0 or t != 1 or next(dynamic_sizes) != next(empty_sizes_left):
                    return False  # an axis of run-time size counts only when taken whole
                region.append(slice(0, 1))
            elif s == dynamic:
                return False
            else:
                region.append(slice(o, o + s * t, t))
        written = before.copy()
        written[tuple(region)] = True
        if written.all():
            return True
        self.written[op.results[0]] = (written, empty_sizes)
        return False

    def _linalg(self, op: ir.Operation, bad: list[int]) -> None:
        n_ins, n_outs = _segments(op)
        for i in bad:
            if i < n_ins:
                self.read(op, f"input #{i}")
            elif i < n_ins + n_outs and _reads_init(op, i - n_ins, n_ins):
                self.read(op, f"init #{i - n_ins}")

    def _iterate(self, op: ir.Operation, body: list[ir.Block], feed) -> None:
        """Visit ``body`` until no carried value becomes undefined (``feed`` marks the
        region arguments from the current yields and returns whether anything changed)."""
        for _ in range(_LOOP_ROUNDS):
            for block in body:
                self.block(block)
            if not feed():
                return

    def _for(self, op: ir.Operation) -> None:
        block = op.regions[0].blocks[0]
        inits = list(op.operands)[3:]
        carried = list(block.arguments)[1:]
        for init, arg in zip(inits, carried):
            self.mark(arg, init in self.undefined)
        yielded = list(block.operations)[-1]

        def feed() -> bool:
            return any([self.mark(arg, v in self.undefined) for arg, v in zip(carried, yielded.operands)])

        self._iterate(op, [block], feed)
        for result, arg, v in zip(op.results, carried, yielded.operands):
            self.mark(result, arg in self.undefined or v in self.undefined)

    def _while(self, op: ir.Operation) -> None:
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        for init, arg in zip(op.operands, before.arguments):
            self.mark(arg, init in self.undefined)
        condition = list(before.operations)[-1]
        yielded = list(after.operations)[-1]

        def feed() -> bool:
            forwarded = list(condition.operands)[1:]
            changed = [self.mark(arg, v in self.undefined) for arg, v in zip(after.arguments, forwarded)]
            changed += [self.mark(arg, v in self.undefined) for arg, v in zip(before.arguments, yielded.operands)]
            return any(changed)

        self._iterate(op, [before, after], feed)
        for result, v in zip(op.results, list(condition.operands)[1:]):
            self.mark(result, v in self.undefined)

    def _results_from_yields(self, op: ir.Operation, regions: list[int]) -> None:
        for index in regions:
            if index >= len(op.regions) or not op.regions[index].blocks:
                continue
            terminator = list(op.regions[index].blocks[0].operations)[-1]
            for result, v in zip(op.results, terminator.operands):
                self.mark(result, v in self.undefined)


def undefined_reads(module: str | ir.Module) -> list[UndefinedRead]:
    """Every op of ``module`` (text, or a module parsed in the shared context) that may
    read an element of a ``tensor.empty`` no op has written, in program order.

    Print the module with its locations (``generate_mlir(..., debug_info=True)``) for the
    reads to name kernel source lines.
    """
    with mlir_session():
        parsed = parse_module(module, what="module checked for undefined reads") if isinstance(module, str) else module
        analysis = _Analysis()
        for op in parsed.body.operations:
            analysis.op(op.operation)
        return list(analysis.reads.values())
