"""Small MLIR emission helpers shared by the lowering rules.

The :class:`Emitter` wraps an :class:`MLIRBuilder` with the vocabulary the rules need:
constants (cached per region so a constant always dominates its uses), scalar casts,
elementwise ``linalg.generic`` with broadcasting, fills, and ``scf.for`` loops that
carry values. Every op it emits gets the current kernel source location.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch

from ..errors import HelionMLIRError
from ..importer.bf16_conversions import bf16_from_f32_lines
from ..inliner.builder import MLIRBuilder
from ..mlir_types import (
    LOW_PRECISION_FLOATS,
    PACKED_PAIR_DTYPES,
    UNSIGNED_DTYPES,
    bit_width,
    element_type,
    is_float_type,
    is_int_type,
    literal,
    tensor_type,
)
from .values import Scalar, Tensor, Value, results_named

__all__ = ["Emitter", "broadcast_shapes", "scalar_convert_op"]

# Formats converted with saturation to their largest finite value: float8_e4m3fn as torch
# does; f4E2M1FN (which torch cannot convert to) as the GPU's satfinite conversions do, having
# neither inf nor NaN.
_SATURATE_AT = {"f8E4M3FN": 448.0, "f4E2M1FN": 6.0}


def _narrow_from_f32(dst: str, ssa: str, out: str, fresh: Callable[[], str]) -> list[str]:
    """f32 -> f8/f4 as torch converts: round to nearest even, after making torch's
    saturation explicit (a clamp that keeps NaN) and, for f8E8M0FNU, taking the magnitude
    (it has no sign); MLIR's ``truncf`` alone would give NaN on overflow."""
    lines: list[str] = []
    if dst in _SATURATE_AT:
        bound = _SATURATE_AT[dst]
        low, high, raised, clamped = fresh(), fresh(), fresh(), fresh()
        lines += [
            f"{low} = arith.constant {-bound!r} : f32",
            f"{high} = arith.constant {bound!r} : f32",
            f"{raised} = arith.maximumf {ssa}, {low} : f32",
            f"{clamped} = arith.minimumf {raised}, {high} : f32",
        ]
        ssa = clamped
    elif dst == "f8E8M0FNU":
        magnitude = fresh()
        lines.append(f"{magnitude} = math.absf {ssa} : f32")
        ssa = magnitude
    return lines + [f"{out} = arith.truncf {ssa} : f32 to {dst}"]


def scalar_convert_op(src: str, dst: str, ssa: str, fresh: Callable[[], str], signed: bool = True) -> tuple[list[str], str]:
    """Lines converting scalar ``ssa`` from MLIR type ``src`` to ``dst`` (torch cast semantics)."""
    if src == dst:
        return [], ssa
    out = fresh()
    if src == "index" or dst == "index":
        if src == "index" and is_int_type(dst):
            return [f"{out} = arith.index_cast {ssa} : index to {dst}"], out
        if dst == "index" and is_int_type(src):
            # A bool is 0 or 1 (index_cast would sign-extend true to -1).
            op = "arith.index_castui" if src == "i1" or not signed else "arith.index_cast"
            return [f"{out} = {op} {ssa} : {src} to index"], out
        mid_lines, mid = scalar_convert_op(src, "i64", ssa, fresh, signed)
        tail_lines, res = scalar_convert_op("i64", dst, mid, fresh, signed)
        return mid_lines + tail_lines, res
    if (src in LOW_PRECISION_FLOATS or dst in LOW_PRECISION_FLOATS) and "f32" not in (src, dst):
        # torch converts to and from f8 through f32 (f64 is rounded to f32 first).
        mid_lines, mid = scalar_convert_op(src, "f32", ssa, fresh, signed)
        tail_lines, res = scalar_convert_op("f32", dst, mid, fresh, signed)
        return mid_lines + tail_lines, res
    if src == "f32" and dst in LOW_PRECISION_FLOATS:
        return _narrow_from_f32(dst, ssa, out, fresh), out
    if dst in ("f16", "bf16") and (src == "f64" or is_int_type(src)):
        # torch's Half and BFloat16 are built from a float: f64 and integers round to f32 first;
        # an integer's f32 is rounded to bf16 on its bits (importer.bf16_conversions says why).
        mid_lines, mid = scalar_convert_op(src, "f32", ssa, fresh, signed)
        if dst == "bf16" and src != "f64":
            tail_lines, res = bf16_from_f32_lines(mid, fresh)
        else:
            tail_lines, res = scalar_convert_op("f32", dst, mid, fresh, signed)
        return mid_lines + tail_lines, res
    if is_float_type(src) and is_float_type(dst):
        if src in ("f16", "bf16") and dst in ("f16", "bf16"):
            mid = fresh()
            return [f"{mid} = arith.extf {ssa} : {src} to f32", f"{out} = arith.truncf {mid} : f32 to {dst}"], out
        op = "arith.extf" if bit_width(dst) > bit_width(src) else "arith.truncf"
        return [f"{out} = {op} {ssa} : {src} to {dst}"], out
    if is_int_type(src) and is_float_type(dst):
        op = "arith.uitofp" if (src == "i1" or not signed) else "arith.sitofp"
        return [f"{out} = {op} {ssa} : {src} to {dst}"], out
    if is_float_type(src) and is_int_type(dst):
        if dst == "i1":
            zero = fresh()
            return [f"{zero} = arith.constant {literal(0, src)} : {src}", f"{out} = arith.cmpf une, {ssa}, {zero} : {src}"], out
        return [f"{out} = arith.fptosi {ssa} : {src} to {dst}"], out
    if is_int_type(src) and is_int_type(dst):
        if dst == "i1":
            zero = fresh()
            return [f"{zero} = arith.constant {literal(0, src)} : {src}", f"{out} = arith.cmpi ne, {ssa}, {zero} : {src}"], out
        if bit_width(dst) > bit_width(src):
            op = "arith.extui" if (src == "i1" or not signed) else "arith.extsi"
        else:
            op = "arith.trunci"
        return [f"{out} = {op} {ssa} : {src} to {dst}"], out
    raise HelionMLIRError(f"no conversion from {src} to {dst}")


def broadcast_shapes(*shapes: Sequence[int | None]) -> tuple[int | None, ...]:
    """The shape numpy broadcasting gives ``shapes`` (a dynamic size wins over 1)."""
    rank = max(len(s) for s in shapes)
    result: list[int | None] = [1] * rank
    for shape in shapes:
        for axis, size in enumerate((1,) * (rank - len(shape)) + tuple(shape)):
            if size != 1:
                result[axis] = size
    return tuple(result)


class Emitter:
    """Emits ops into a builder with the current source location attached."""

    def __init__(self, builder: MLIRBuilder, *, checked: bool = False, launch_checks: bool = False) -> None:
        self.builder = builder
        #: Whether indices the kernel computes are checked at run time (:meth:`check`).
        self.checked = checked
        #: Whether accesses may rely on relations of host values a launch checks
        #: (:func:`~helion_mlir.lowering.bounds.assumed_inside`) instead of being clipped.
        self.launch_checks = launch_checks
        self.location: str | None = None  # an MLIR location body, e.g. '"k.py":12:4'
        self._constant_scopes: list[dict[tuple[str, str], Scalar]] = [{}]
        self.arguments: set[str] = set()  # SSA names of the function's arguments
        self._narrowed_units: dict[str, int] = {}  # narrowed loop-carried values -> unit dims dropped
        # Order facts about index values (a tile's offset lies in its loop's range ...), by SSA name.
        self._at_most: dict[str, list[Scalar | int]] = {}
        self._at_least: dict[str, list[Scalar | int]] = {}

    # -- basics ----------------------------------------------------------------------------
    def fresh(self, hint: str = "v") -> str:
        return self.builder.fresh(hint)

    def loc_suffix(self) -> str:
        return f" loc({self.location})" if self.location else ""

    def op(self, text: str) -> None:
        """Emit a single-line op, with the current location."""
        self.builder.emit(text + self.loc_suffix())

    def assign(self, hint: str, op: str) -> str:
        """Emit ``%<fresh> = op`` (an op with one result, with the current location); its name."""
        name = self.fresh(hint)
        self.op(f"{name} = {op}")
        return name

    @contextlib.contextmanager
    def region(self, header: str, footer: str = "}", *, locate_footer: bool = True) -> Iterator[None]:
        """Emit ``header``, an indented region body, then ``footer``.

        The footer closes the op and gets the location, unless it only separates two
        regions of one op (``} else {``, ``} do {``): pass ``locate_footer=False``.
        """
        if header:
            self.builder.emit(header)
        self._constant_scopes.append({})
        try:
            with self.builder.indented():
                yield
        finally:
            self._constant_scopes.pop()
        self.builder.emit(footer + (self.loc_suffix() if locate_footer else ""))

    def block_header(self, arguments: str) -> None:
        """The label of a region's entry block with its ``arguments`` (``%a: f32, ...``)."""
        self.builder.emit(f"^bb0({arguments}):")

    # -- scalars ------------------------------------------------------------------------------
    def const(self, value: float | int | bool, mlir_type: str) -> Scalar:
        """An ``arith.constant``, reused while still in scope."""
        text = literal(value, mlir_type)
        key = (text, mlir_type)
        for scope in reversed(self._constant_scopes):
            if key in scope:
                return scope[key]
        ssa = self.fresh("c")
        typed = text if mlir_type == "i1" else f"{text} : {mlir_type}"  # `true`/`false` carry their type
        self.op(f"{ssa} = arith.constant {typed}")
        result = Scalar(ssa, mlir_type)
        self._constant_scopes[-1][key] = result
        return result

    def index(self, value: "Scalar | int") -> Scalar:
        """``value`` as an ``index`` SSA value."""
        if isinstance(value, Scalar):
            return self.convert(value, "index")
        return self.const(int(value), "index")

    def convert(self, value: "Scalar | int | float | bool", mlir_type: str) -> Scalar:
        """Scalar conversion with torch's cast semantics."""
        if not isinstance(value, Scalar):
            return self.const(value, mlir_type)
        lines, ssa = scalar_convert_op(value.type, mlir_type, value.ssa, lambda: self.fresh("cv"))
        for line in lines:
            self.op(line)
        return Scalar(ssa, mlir_type)

    def binary(self, opname: str, a: Scalar, b: Scalar, result_type: str | None = None) -> Scalar:
        out = self.fresh("s")
        if opname.startswith("arith.cmp"):
            pred_op, pred = opname.rsplit(" ", 1)
            self.op(f"{out} = {pred_op} {pred}, {a.ssa}, {b.ssa} : {a.type}")
            return Scalar(out, "i1")
        self.op(f"{out} = {opname} {a.ssa}, {b.ssa} : {a.type}")
        return Scalar(out, result_type or a.type)

    def lanes_in_bounds(self, bounds: Sequence[tuple[str, "Scalar | int"]]) -> str | None:
        """An ``i1`` that is true when every ``lane < extent`` (lanes are ``index`` SSA names);
        None when there is nothing to check."""
        cond: str | None = None
        for lane, extent in bounds:
            inside = self.assign("inb", f"arith.cmpi slt, {lane}, {self.index(extent).ssa} : index")
            if cond is not None:
                both = self.assign("inb", f"arith.andi {cond}, {inside} : i1")
                inside = both
            cond = inside
        return cond

    def min_index(self, a: Scalar, b: Scalar) -> Scalar:
        return self.binary("arith.minsi", a, b)

    # -- order facts ------------------------------------------------------------------------
    def know_at_most(self, a: "Scalar | int", b: "Scalar | int") -> None:
        """Record that ``a <= b`` holds wherever both are defined (values of one kernel)."""
        if isinstance(a, Scalar):
            self._at_most.setdefault(a.ssa, []).append(b)
        if isinstance(b, Scalar):
            self._at_least.setdefault(b.ssa, []).append(a)

    def known_at_most(self, a: "Scalar | int | None", b: "Scalar | int | None") -> bool:
        """Whether ``a <= b`` follows from the recorded facts (and equal values, and ints)."""
        if a is None or b is None:
            return False
        above = self._closure(a, self._at_most)  # values a is at most
        below = self._closure(b, self._at_least)  # values b is at least
        if isinstance(b, Scalar) and b.ssa in {v.ssa for v in above if isinstance(v, Scalar)}:
            return True
        lowest_above = min((v for v in above if isinstance(v, int)), default=None)
        highest_below = max((v for v in below if isinstance(v, int)), default=None)
        return lowest_above is not None and highest_below is not None and lowest_above <= highest_below

    @staticmethod
    def _closure(start: "Scalar | int", edges: dict[str, list["Scalar | int"]]) -> list["Scalar | int"]:
        found: list[Scalar | int] = [start]
        seen: set[str] = set()
        for value in found:
            if isinstance(value, Scalar) and value.ssa not in seen:
                seen.add(value.ssa)
                found.extend(edges.get(value.ssa, ()))
        return found

    def check(self, condition: str | None, message: str) -> None:
        """In checked mode, a run-time check that the ``i1`` ``condition`` holds
        (``cf.assert``, which the checked pipeline turns into an error naming this op's
        kernel line); nothing otherwise, or when ``condition`` is None (known to hold)."""
        if self.checked and condition is not None:
            self.op(f'cf.assert {condition}, "{message}"')

    def branch(self, condition: str, then: Callable[[], Sequence[Value]],
               otherwise: Callable[[], Sequence[Value]], *, hint: str = "if") -> list[Value]:
        """``scf.if`` on the ``i1`` ``condition`` yielding what ``then()`` or ``otherwise()``
        (each emitting its branch) returns: values of the same types, named as ``then``'s.
        The header, which states the types, is written once ``then`` has given them."""
        header = self.builder.slot()
        yielded: list[Sequence[Value]] = []
        for side, footer in ((then, "} else {"), (otherwise, "}")):
            with self.region("", footer, locate_footer=footer == "}"):
                values = list(side())
                if yielded and [v.type for v in values] != [v.type for v in yielded[0]]:
                    raise HelionMLIRError("the two sides of a branch yield values of different types")
                yielded.append(values)
                self.op(f"scf.yield {', '.join(v.ssa for v in values)} : {', '.join(v.type for v in values)}")
        templates = yielded[0]
        result = self.fresh(hint)
        names = f"{result}:{len(templates)}" if len(templates) > 1 else result
        with self.builder.filling(header):
            self.builder.emit(f"{names} = scf.if {condition} -> ({', '.join(v.type for v in templates)}) {{")
        return results_named(result, templates)

    # -- tensors ------------------------------------------------------------------------------
    def empty(self, shape: Sequence[int | None], dtype: torch.dtype, dynamic_sizes: Sequence[Scalar] = ()) -> Tensor:
        ssa = self.fresh("empty")
        sizes = ", ".join(s.ssa for s in dynamic_sizes)
        self.op(f"{ssa} = tensor.empty({sizes}) : {tensor_type(shape, dtype)}")
        return Tensor(ssa, tuple(shape), dtype)

    def fill(self, shape: Sequence[int | None], dtype: torch.dtype, value: "Scalar | int | float | bool",
             dynamic_sizes: Sequence[Scalar] = ()) -> Tensor:
        scalar = self.convert(value, element_type(dtype)) if isinstance(value, Scalar) else self.const(value, element_type(dtype))
        empty = self.empty(shape, dtype, dynamic_sizes)
        ssa = self.assign("full", f"linalg.fill ins({scalar.ssa} : {scalar.type}) outs({empty.ssa} : {empty.type}) -> {empty.type}")
        return Tensor(ssa, tuple(shape), dtype)

    def dim(self, tensor: Tensor, axis: int) -> "Scalar | int":
        """Size of one dimension: an int when static, else ``tensor.dim``."""
        size = tensor.shape[axis]
        if size is not None:
            return size
        if tensor.sizes is not None:
            return tensor.sizes[axis]
        idx = self.index(axis)
        ssa = self.assign("dim", f"tensor.dim {tensor.ssa}, {idx.ssa} : {tensor.type}")
        return Scalar(ssa, "index")

    def restated(self, value: Tensor) -> tuple[Tensor, int]:
        """``value`` with its sizes stated explicitly, for a loop to carry, and the number
        of unit dimensions the carried form has (see :meth:`_carried_form`)."""
        units = self._carried_form(value)
        if units is None:
            return value, 0
        if units == 0:
            sizes = [self.index(s) for s in value.sizes or [self.dim(value, a) for a in range(value.rank)]]
            shape = self.assign("shape", f"tensor.from_elements {', '.join(s.ssa for s in sizes)} : tensor<{value.rank}xindex>")
            result = value.renamed(self.fresh("sized"))
            self.op(f"{result.ssa} = tensor.reshape {value.ssa}({shape}) : ({value.type}, tensor<{value.rank}xindex>) -> {value.type}")
            return result, 0
        return self.widened(value, units), units

    def widened(self, value: Tensor, units: int) -> Tensor:
        """``value`` with ``units`` trailing unit dimensions (``tensor.expand_shape`` with
        the sizes read at function entry)."""
        sizes = value.sizes if value.sizes is not None else tuple(self.dim(value, a) for a in range(value.rank))
        last = value.rank - 1
        groups = ", ".join([f"[{a}]" for a in range(last)] + [f"[{', '.join(str(last + u) for u in range(units + 1))}]"])
        shape = ", ".join([str(s) if isinstance(s, int) else s.ssa for s in sizes] + ["1"] * units)
        result = Tensor(self.fresh("wide"), value.shape + (1,) * units, value.dtype, tuple(sizes) + (1,) * units)
        self.op(f"{result.ssa} = tensor.expand_shape {value.ssa} [{groups}] output_shape [{shape}] : {value.type} into {result.type}")
        return result

    def narrowed(self, value: Tensor, units: int) -> Tensor:
        """Undo :meth:`widened`: drop ``units`` trailing unit dimensions."""
        rank = value.rank - units
        groups = ", ".join([f"[{a}]" for a in range(rank - 1)] + [f"[{', '.join(str(rank - 1 + u) for u in range(units + 1))}]"])
        sizes = value.sizes[:rank] if value.sizes is not None else None
        result = Tensor(self.fresh("narrow"), value.shape[:rank], value.dtype, sizes)
        self.op(f"{result.ssa} = tensor.collapse_shape {value.ssa} [{groups}] : {value.type} into {result.type}")
        self._narrowed_units[result.ssa] = units
        return result

    def _carried_form(self, value: Value) -> int | None:
        """How a loop carries ``value``: None as it is, 0 through a ``tensor.reshape`` to
        its own shape, n > 0 with n trailing unit dimensions.

        A loop's initial value that is a function argument carries its sizes; any other
        dynamically shaped tensor (typically the iteration argument of an enclosing
        loop) has them stated again with the sizes read at function entry, in a form no
        canonicalization folds away: compilers that track the sizes of loop-carried
        tensors from a loop's initial and yielded values, inner loops first (IREE), find
        them there. A reshape to the same type states them when two or more sizes are
        dynamic; with one dynamic size that reshape folds (the element count fixes the
        size), so the loop carries the tensor with extra unit dimensions instead, one
        more than the loop it comes from, so that no collapse meets its inverse expand.
        Both are views after bufferization.
        """
        if not isinstance(value, Tensor) or value.ssa in self.arguments:
            return None
        dynamic = sum(1 for s in value.shape if s is None)
        if dynamic == 0:
            return None
        return 0 if dynamic > 1 else self._narrowed_units.get(value.ssa, 0) + 1

    def elementwise(
        self,
        inputs: Sequence[Tensor],
        out_shape: Sequence[int | None],
        out_dtype: torch.dtype,
        body: Callable[[list[str], Callable[[int], str]], str],
        *,
        hint: str = "ew",
        dynamic_sizes: Sequence[Scalar] = (),
    ) -> Tensor:
        """A parallel ``linalg.generic`` over ``out_shape`` with numpy broadcasting of inputs.

        ``body(block_args, index_of)`` emits the scalar computation (through ``self.op``)
        and returns the SSA name of the result; ``index_of(d)`` gives ``linalg.index d``.
        Dynamic output dimensions take their size from an input, else from ``dynamic_sizes``.
        """
        rank = len(out_shape)
        dims = [f"d{i}" for i in range(rank)]
        maps = [self.broadcast_map(t.shape, out_shape) for t in inputs]
        maps.append(f"affine_map<({', '.join(dims)}) -> ({', '.join(dims)})>")
        dynamic = list(dynamic_sizes) or [
            self._dynamic_size(inputs, rank, axis) for axis, s in enumerate(out_shape) if s is None
        ]
        init = self.empty(out_shape, out_dtype, dynamic)
        result = self.fresh(hint)
        out_type = tensor_type(out_shape, out_dtype)
        ins = ""
        if inputs:
            ins = f" ins({', '.join(t.ssa for t in inputs)} : {', '.join(t.type for t in inputs)})"
        iterators = ", ".join(['"parallel"'] * rank)
        header = (
            f"{result} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iterators}]}}"
            f"{ins} outs({init.ssa} : {init.type}) {{"
        )
        block_args = [self.fresh("in") for _ in inputs]
        out_arg = self.fresh("out")
        arg_decls = ", ".join(
            [f"{a}: {element_type(t.dtype)}" for a, t in zip(block_args, inputs)] + [f"{out_arg}: {element_type(out_dtype)}"]
        )
        index_cache: dict[int, str] = {}

        def index_of(d: int) -> str:
            if d not in index_cache:
                ssa = self.assign("i", f"linalg.index {d} : index")
                index_cache[d] = ssa
            return index_cache[d]

        with self.region(header, f"}} -> {out_type}"):
            self.block_header(arg_decls)
            value = body(block_args, index_of)
            self.op(f"linalg.yield {value} : {element_type(out_dtype)}")
        return Tensor(result, tuple(out_shape), out_dtype)

    @staticmethod
    def broadcast_map(shape: Sequence[int | None], out_shape: Sequence[int | None]) -> str:
        """The indexing map that reads a ``shape`` operand at each point of ``out_shape`` with
        numpy broadcasting (trailing dims aligned, unit dims repeated)."""
        rank = len(out_shape)
        lead = rank - len(shape)
        if lead < 0:
            raise HelionMLIRError(f"cannot broadcast a value of shape {tuple(shape)} to rank {rank}")
        dims = [f"d{i}" for i in range(rank)]
        exprs = ["0" if size == 1 and out_shape[lead + i] != 1 else dims[lead + i] for i, size in enumerate(shape)]
        return f"affine_map<({', '.join(dims)}) -> ({', '.join(exprs)})>"

    def _dynamic_size(self, inputs: Sequence[Tensor], rank: int, axis: int) -> Scalar:
        for t in inputs:
            lead = rank - t.rank
            if axis >= lead and t.shape[axis - lead] is None:
                size = self.dim(t, axis - lead)
                assert isinstance(size, Scalar)
                return size
        raise HelionMLIRError("a dynamic output dimension has no input to take its size from")

    def slice_prefix(self, value: Tensor, extents: Sequence["Scalar | int"]) -> Tensor:
        """The leading ``extents`` lanes of every dimension (the in-bounds part of a tile)."""
        shape = tuple(e if isinstance(e, int) else None for e in extents)
        if shape == value.shape:
            return value
        if 0 in shape:  # no lanes: MLIR refuses a slice at offset 0 of a dimension of size 0
            return self.empty(shape, value.dtype, [self.index(e) for e in extents if not isinstance(e, int)])
        zeros = ", ".join("0" for _ in extents)
        sizes = ", ".join(str(e) if isinstance(e, int) else e.ssa for e in extents)
        ones = ", ".join("1" for _ in extents)
        result = Tensor(self.fresh("valid"), shape, value.dtype)
        self.op(f"{result.ssa} = tensor.extract_slice {value.ssa}[{zeros}] [{sizes}] [{ones}] : {value.type} to {result.type}")
        return result

    def cast(self, value: Tensor, dtype: torch.dtype) -> Tensor:
        """Elementwise dtype conversion with torch semantics (no-op when equal)."""
        if value.dtype == dtype:
            return value
        if dtype in PACKED_PAIR_DTYPES:
            raise HelionMLIRError(
                f"torch has no conversion from {value.dtype} to {dtype}; pack the values into "
                "uint8 with integer ops and view the bytes as float4_e2m1fn_x2 on the host"
            )
        src, dst = element_type(value.dtype), element_type(dtype)
        signed = value.dtype is not torch.bool and value.dtype not in UNSIGNED_DTYPES

        def body(args: list[str], _index: Callable[[int], str]) -> str:
            lines, ssa = scalar_convert_op(src, dst, args[0], lambda: self.fresh("cv"), signed)
            for line in lines:
                self.op(line)
            return ssa

        return self.elementwise([value], value.shape, dtype, body, hint="cast")

    def broadcast_to(self, value: Tensor, shape: Sequence[int | None]) -> Tensor:
        if tuple(value.shape) == tuple(shape):
            return value
        return self.elementwise([value], shape, value.dtype, lambda args, _i: args[0], hint="bcast")

    # -- loops --------------------------------------------------------------------------------
    def for_loop(
        self,
        lower: "Scalar | int",
        upper: "Scalar | int",
        step: "Scalar | int",
        carried: Sequence[Value],
        body: Callable[[Scalar, list[Value]], Sequence[Value]],
        *,
        hint: str = "loop",
    ) -> list[Value]:
        """``scf.for`` from ``lower`` to ``upper`` carrying ``carried``; returns their final values.

        ``body(iv, current)`` emits the loop body and returns the next values, which must
        have the types of ``carried``.
        """
        lower, upper, step = self.index(lower), self.index(upper), self.index(step)
        restated = [self.restated(v) if isinstance(v, Tensor) else (v, 0) for v in carried]
        inits = [r for r, _ in restated]
        units = [u for _, u in restated]
        iv = Scalar(self.fresh("iv"), "index")
        iter_names = [self.fresh("it") for _ in carried]
        types = [v.type for v in inits]
        result = self.fresh(hint)
        header = f"scf.for {iv.ssa} = {lower.ssa} to {upper.ssa} step {step.ssa}"
        if carried:
            init_text = ", ".join(f"{n} = {v.ssa}" for n, v in zip(iter_names, inits))
            results = f"{result}:{len(carried)}" if len(carried) > 1 else result
            header = f"{results} = {header} iter_args({init_text}) -> ({', '.join(types)})"
        with self.region(header + " {"):
            current = [
                self.narrowed(i.renamed(n), u) if u else i.renamed(n)  # type: ignore[arg-type]
                for i, n, u in zip(inits, iter_names, units)
            ]
            nexts = list(body(iv, current))
            if len(nexts) != len(carried):
                raise HelionMLIRError("loop body returned a different number of values than it carries")
            for n, v in zip(nexts, carried):
                if n.type != v.type:
                    raise HelionMLIRError(f"loop-carried value changes type: {v.type} -> {n.type}")
            yields = [self.widened(n, u) if u else n for n, u in zip(nexts, units)]  # type: ignore[arg-type]
            if carried:
                self.op(f"scf.yield {', '.join(v.ssa for v in yields)} : {', '.join(types)}")
        finals = results_named(result, inits)
        return [self.narrowed(f, u) if u else f for f, u in zip(finals, units)]  # type: ignore[arg-type]

