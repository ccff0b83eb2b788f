"""Representative calls of every ATen and prims target Helion kernels produce.

One place, shared by ``scripts/op-support`` (which measures what lowers for each output
type and writes ``docs/op-support.md``) and the tests (which check that the importer
handles all of them and that the document is current). The target list follows the
census of device-IR targets in real Helion kernels.

Each :class:`OpCase` builds, for a dtype and for static or symbolic sizes, a real FX
node shaped like a device-IR node: its inputs are FX nodes with fake values, sizes in
list arguments are FX nodes holding SymInts when symbolic (as Helion's tile sizes are),
and its own ``meta["val"]`` comes from running the op on fake tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ..mlir_types import element_type
from .normalize import normalize_helion_node

__all__ = [
    "ALL_DTYPES",
    "CATALOG",
    "CENSUS_TARGETS",
    "CaseBuilder",
    "CaseSizes",
    "OpCase",
    "dtype_name",
    "iter_case_nodes",
]

aten = torch.ops.aten
prims = torch.ops.prims

FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INTS = (torch.int32, torch.int64)
NUMERIC = FLOATS + INTS
ALL_DTYPES = NUMERIC + (torch.bool,)
# Kernels move float8 tiles around (transpose, reshape, select) before converting them.
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu)

#: ATen and prims targets met in Helion's example kernels (helion 1.5.1), most used first;
#: the catalogue has a case for each.
CENSUS_TARGETS: tuple[str, ...] = (
    "aten.mul.Tensor", "aten.add.Tensor", "aten.bitwise_and.Scalar", "aten.__rshift__.Scalar",
    "aten.sub.Tensor", "aten.sym_size.int", "aten.sum.dim_IntList", "aten.permute.default",
    "aten.unsqueeze.default", "aten.bitwise_xor.Tensor", "aten.where.self", "aten.exp2.default",
    "aten.scalar_tensor.default", "aten.div.Tensor", "aten.exp.default", "aten.amax.default",
    "aten.bitwise_or.Tensor", "aten.__lshift__.Scalar", "aten.view.default", "aten.div.Tensor_mode",
    "aten.remainder.Scalar", "aten.ge.Tensor", "aten.eq.Scalar", "aten.full.default",
    "aten.lt.Tensor", "aten.lt.Scalar", "aten.maximum.default", "aten.neg.default",
    "aten.addmm.default", "aten.log.default", "aten.rsqrt.default", "aten.baddbmm.default",
    "aten.gt.Tensor", "aten.mm.default", "aten.bmm.dtype", "aten.gt.Scalar", "aten.sigmoid.default",
    "aten.bitwise_and.Tensor", "aten.clone.default", "aten.log2.default", "aten.squeeze.dim",
    "aten.clamp_min.default", "aten.eq.Tensor", "aten.expand.default", "aten.mean.dim",
    "aten.bmm.default", "aten.sqrt.default", "aten.sum.default", "aten.tanh.default",
    "aten.clamp_max.default", "aten.ge.Scalar", "aten.minimum.default", "aten.ne.Scalar",
    "aten.ne.Tensor", "aten.pow.Tensor_Scalar", "aten.relu.default", "aten.remainder.Scalar_Tensor",
    "aten.stack.default", "prims.convert_element_type.default", "prims.iota.default",
)  # fmt: skip

# Static sizes: distinct, so a transposition bug cannot hide behind a square shape.
_STATIC_SIZES = {"m": 8, "n": 16, "k": 12, "b": 3}


def dtype_name(dtype: torch.dtype) -> str:
    """Short spelling used in case ids and the op-support table: the MLIR element type
    (``f32``, ``bf16``, ``i64``), ``bool``, and a float8 format's name (``e4m3fn``)."""
    if dtype == torch.bool:
        return "bool"
    if dtype in FLOAT8:
        return str(dtype).removeprefix("torch.float8_")
    return element_type(dtype)


class CaseSizes:
    """The sizes m, n, k, b cases are built with, and the fake mode their tensors live in.

    Symbolic sizes are unbacked SymInts of one ShapeEnv, like the tile sizes ``u0``, ``u1``
    of one Helion kernel; sharing the environment across cases (as a kernel does) also
    lets the fake mode reuse its work. Static sizes are small distinct integers.
    """

    def __init__(self, symbolic: bool) -> None:
        self.symbolic = symbolic
        if symbolic:
            shape_env = ShapeEnv()
            self.mode = FakeTensorMode(shape_env=shape_env)
            self.values: dict[str, Any] = {name: shape_env.create_unbacked_symint() for name in _STATIC_SIZES}
            shape_env.pending_fresh_unbacked_symbols.clear()
        else:
            self.mode = FakeTensorMode()
            self.values = dict(_STATIC_SIZES)


class CaseBuilder:
    """Builds one FX graph whose last node is the case's call."""

    def __init__(self, sizes: CaseSizes) -> None:
        self.symbolic = sizes.symbolic
        self.mode = sizes.mode
        self._sizes = sizes.values
        self.graph = fx.Graph()
        self._size_nodes: dict[tuple[str, int], fx.Node] = {}
        self._count = 0

    def _placeholder(self, value: Any) -> fx.Node:
        node = self.graph.placeholder(f"in{self._count}")
        self._count += 1
        node.meta["val"] = value
        return normalize_helion_node(node)

    def dim(self, size: str | int) -> Any:
        """A size for a tensor shape: an int, or the named size (SymInt when symbolic)."""
        return self._sizes[size] if isinstance(size, str) else size

    def size(self, name: str, scale: int = 1) -> Any:
        """``scale`` times a named size, for a list argument: an int, or (symbolic) an FX
        node holding the SymInt, as device IR holds tile sizes and size arithmetic."""
        value = self._sizes[name] * scale
        if not self.symbolic:
            return value
        key = (name, scale)
        if key not in self._size_nodes:
            self._size_nodes[key] = self._placeholder(value)
        return self._size_nodes[key]

    def tensor(self, *shape: str | int, dtype: torch.dtype) -> fx.Node:
        """An input node holding a contiguous fake tensor of ``shape``."""
        with self.mode:
            value = torch.empty([self.dim(s) for s in shape], dtype=dtype)
        return self._placeholder(value)

    def call(self, target: Any, args: tuple, kwargs: dict, fake_result: Callable[..., Any] | None = None) -> fx.Node:
        """The case node, with ``meta["val"]`` computed on fake values (by ``fake_result``
        instead of the op when given)."""

        def fake(arg: fx.Node) -> Any:
            return arg.meta["val"]

        with self.mode:
            value = (fake_result or target)(*fx.map_arg(args, fake), **fx.map_arg(kwargs, fake))
        node = self.graph.call_function(target, args, kwargs)
        node.meta["val"] = value
        self.graph.output(node)
        return normalize_helion_node(node)


def scalar_for(dtype: torch.dtype) -> bool | int | float:
    """A representative Python scalar of ``dtype``'s kind."""
    if dtype == torch.bool:
        return True
    return 3 if not dtype.is_floating_point else 1.5


Build = Callable[[CaseBuilder, torch.dtype], tuple[tuple, dict]]


@dataclass(frozen=True)
class OpCase:
    """A target with a representative call per dtype.

    ``variant`` tells apart several calls of one target (e.g. rounding modes).
    ``fake_result`` computes the node's fake value where the op's own meta function
    fails (as it does for symbolic sizes in some torch releases).
    """

    target: Any
    dtypes: tuple[torch.dtype, ...]
    build: Build
    variant: str = ""
    fake_result: Callable[..., Any] | None = None

    @property
    def target_name(self) -> str:
        """Census spelling, e.g. ``aten.add.Tensor``."""
        packet = self.target._schema.name.replace("::", ".")
        overload = self.target._overloadname
        return f"{packet}.{overload}"

    @property
    def name(self) -> str:
        return self.target_name + (f"[{self.variant}]" if self.variant else "")

    def node(self, dtype: torch.dtype, *, symbolic: bool, sizes: CaseSizes | None = None) -> fx.Node:
        """A fresh FX node calling the target on inputs of ``dtype`` (sizes from ``sizes``
        when given, else from a new :class:`CaseSizes`)."""
        if sizes is None:
            sizes = CaseSizes(symbolic)
        elif sizes.symbolic != symbolic:
            raise ValueError("sizes.symbolic disagrees with symbolic")
        builder = CaseBuilder(sizes)
        args, kwargs = self.build(builder, dtype)
        return builder.call(self.target, args, kwargs, self.fake_result)


def _binary(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    # Broadcast the second operand along n, as a row statistic is in Helion kernels.
    return (b.tensor("m", "n", dtype=dt), b.tensor("m", 1, dtype=dt)), {}


def _same_shape(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    return (b.tensor("m", "n", dtype=dt), b.tensor("m", "n", dtype=dt)), {}


def _with_scalar(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    return (b.tensor("m", "n", dtype=dt), scalar_for(dt)), {}


def _unary(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    return (b.tensor("m", "n", dtype=dt),), {}


def _shift(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    return (b.tensor("m", "n", dtype=dt), 3), {}


def _mask(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    return (b.tensor("m", "n", dtype=dt), 0xFF), {}


def _reduce_dim(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    return (b.tensor("m", "n", dtype=dt), [1], True), {}


def _matmul(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    return (b.tensor("m", "k", dtype=dt), b.tensor("k", "n", dtype=dt)), {}


def _batched_matmul(b: CaseBuilder, dt: torch.dtype) -> tuple[tuple, dict]:
    return (b.tensor("b", "m", "k", dtype=dt), b.tensor("b", "k", "n", dtype=dt)), {}


CATALOG: tuple[OpCase, ...] = (
    # Elementwise arithmetic.
    OpCase(aten.mul.Tensor, ALL_DTYPES, _binary),
    OpCase(aten.add.Tensor, ALL_DTYPES, _binary),
    OpCase(aten.sub.Tensor, NUMERIC, _binary),
    OpCase(aten.div.Tensor, NUMERIC, _binary),
    OpCase(
        aten.div.Tensor_mode,
        NUMERIC,
        lambda b, dt: (_binary(b, dt)[0], {"rounding_mode": "floor"}),
        variant="floor",
    ),
    OpCase(
        aten.div.Tensor_mode,
        NUMERIC,
        lambda b, dt: (_binary(b, dt)[0], {"rounding_mode": "trunc"}),
        variant="trunc",
    ),
    OpCase(aten.remainder.Scalar, NUMERIC, _with_scalar),
    OpCase(aten.remainder.Scalar_Tensor, NUMERIC, lambda b, dt: ((scalar_for(dt), b.tensor("m", "n", dtype=dt)), {})),
    OpCase(aten.maximum.default, NUMERIC, _binary),
    OpCase(aten.minimum.default, NUMERIC, _binary),
    OpCase(aten.neg.default, NUMERIC, _unary),
    OpCase(aten.pow.Tensor_Scalar, NUMERIC, lambda b, dt: ((b.tensor("m", "n", dtype=dt), 2), {})),
    OpCase(aten.clamp_min.default, NUMERIC, _with_scalar),
    OpCase(aten.clamp_max.default, NUMERIC, _with_scalar),
    OpCase(aten.relu.default, NUMERIC, _unary),
    OpCase(aten.where.self, ALL_DTYPES + FLOAT8, lambda b, dt: ((b.tensor("m", "n", dtype=torch.bool),) + _binary(b, dt)[0], {})),
    # Transcendental functions.
    OpCase(aten.exp.default, FLOATS, _unary),
    OpCase(aten.exp2.default, FLOATS, _unary),
    OpCase(aten.log.default, FLOATS, _unary),
    OpCase(aten.log2.default, FLOATS, _unary),
    OpCase(aten.rsqrt.default, FLOATS, _unary),
    OpCase(aten.sqrt.default, FLOATS, _unary),
    OpCase(aten.sigmoid.default, FLOATS, _unary),
    OpCase(aten.tanh.default, FLOATS, _unary),
    # Bitwise and shifts (Helion's hl.rand is Philox integer arithmetic).
    OpCase(aten.bitwise_and.Scalar, INTS, _mask),
    OpCase(aten.bitwise_and.Tensor, INTS + (torch.bool,), _same_shape),
    OpCase(aten.bitwise_or.Tensor, INTS + (torch.bool,), _same_shape),
    OpCase(aten.bitwise_xor.Tensor, INTS + (torch.bool,), _same_shape),
    OpCase(aten.__rshift__.Scalar, INTS, _shift),
    OpCase(aten.__lshift__.Scalar, INTS, _shift),
    # Comparisons.
    OpCase(aten.eq.Tensor, ALL_DTYPES, _binary),
    OpCase(aten.ne.Tensor, ALL_DTYPES, _binary),
    OpCase(aten.ge.Tensor, NUMERIC, _binary),
    OpCase(aten.gt.Tensor, NUMERIC, _binary),
    OpCase(aten.lt.Tensor, NUMERIC, _binary),
    OpCase(aten.eq.Scalar, ALL_DTYPES, _with_scalar),
    OpCase(aten.ne.Scalar, ALL_DTYPES, _with_scalar),
    OpCase(aten.ge.Scalar, NUMERIC, _with_scalar),
    OpCase(aten.gt.Scalar, NUMERIC, _with_scalar),
    OpCase(aten.lt.Scalar, NUMERIC, _with_scalar),
    # Reductions.
    OpCase(aten.sum.dim_IntList, NUMERIC, _reduce_dim),
    OpCase(aten.sum.default, NUMERIC, _unary),
    OpCase(aten.amax.default, NUMERIC, _reduce_dim),
    OpCase(aten.mean.dim, FLOATS, _reduce_dim),
    # Shapes and views.
    OpCase(aten.sym_size.int, (torch.float32,), lambda b, dt: ((b.tensor("m", "n", dtype=dt), 1), {})),
    OpCase(aten.permute.default, ALL_DTYPES + FLOAT8, lambda b, dt: ((b.tensor("m", "n", dtype=dt), [1, 0]), {})),
    OpCase(aten.unsqueeze.default, ALL_DTYPES, lambda b, dt: ((b.tensor("m", "n", dtype=dt), 1), {})),
    OpCase(aten.squeeze.dim, ALL_DTYPES, lambda b, dt: ((b.tensor("m", 1, dtype=dt), 1), {})),
    OpCase(
        aten.view.default,
        ALL_DTYPES + FLOAT8,
        # Merge two dims: the size list holds m and 2*n (FX nodes when symbolic).
        lambda b, dt: ((b.tensor("m", 2, "n", dtype=dt), [b.size("m"), b.size("n", scale=2)]), {}),
    ),
    OpCase(
        aten.expand.default,
        ALL_DTYPES,
        lambda b, dt: ((b.tensor("m", 1, dtype=dt), [b.size("m"), b.size("n")]), {}),
    ),
    OpCase(aten.clone.default, ALL_DTYPES + FLOAT8, _unary),
    OpCase(aten.stack.default, ALL_DTYPES, lambda b, dt: (([b.tensor("m", "n", dtype=dt), b.tensor("m", "n", dtype=dt)], 1), {})),
    # Creation and conversion.
    OpCase(
        aten.full.default,
        ALL_DTYPES,
        lambda b, dt: (([b.size("m"), b.size("n")], scalar_for(dt)), {"dtype": dt}),
    ),
    OpCase(aten.scalar_tensor.default, ALL_DTYPES, lambda b, dt: ((scalar_for(dt),), {"dtype": dt})),
    OpCase(
        prims.iota.default,
        INTS,
        lambda b, dt: (
            (b.size("m"),),
            {"start": 0, "step": 1, "dtype": dt, "device": torch.device("cpu"), "requires_grad": False},
        ),
    ),
    OpCase(
        prims.convert_element_type.default,
        ALL_DTYPES,
        # To f32 from everything else; f32 goes to bf16 (the common downcast before a store).
        lambda b, dt: ((b.tensor("m", "n", dtype=dt), torch.bfloat16 if dt == torch.float32 else torch.float32), {}),
    ),
    # Matrix products.
    OpCase(aten.mm.default, NUMERIC, _matmul),
    OpCase(aten.bmm.default, NUMERIC, _batched_matmul),
    OpCase(
        aten.addmm.default,
        NUMERIC,
        lambda b, dt: ((b.tensor("m", "n", dtype=dt),) + _matmul(b, dt)[0], {}),
    ),
    OpCase(
        aten.baddbmm.default,
        NUMERIC,
        lambda b, dt: ((b.tensor("b", "m", "n", dtype=dt),) + _batched_matmul(b, dt)[0], {}),
    ),
    OpCase(
        aten.bmm.dtype,
        FLOATS,
        # Helion's dot with an f32 accumulator: low-precision inputs, f32 result.
        lambda b, dt: (_batched_matmul(b, dt)[0] + (torch.float32,), {}),
        # torch 2.13's meta function of bmm.dtype hits an internal assert on symbolic sizes.
        fake_result=lambda x, y, out_dtype: aten.bmm.default(x, y).to(out_dtype),
    ),
)


def iter_case_nodes(*, symbolic: bool) -> Iterator[tuple[str, OpCase, torch.dtype, fx.Node]]:
    """``(case id, case, dtype, node)`` for every case and dtype, ids like ``aten.add.Tensor/f32``.

    All nodes share one :class:`CaseSizes`, as the nodes of one kernel share its sizes.
    """
    sizes = CaseSizes(symbolic)
    for case in CATALOG:
        for dtype in case.dtypes:
            yield f"{case.name}/{dtype_name(dtype)}", case, dtype, case.node(dtype, symbolic=symbolic, sizes=sizes)
