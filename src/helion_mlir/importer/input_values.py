"""Inputs of a node import: tensors, tensor specs and scalars, and the fake values that
stand for them while a node's graph is built (static inputs need no shape environment)."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import (
    FakeTensor,
    FakeTensorMode,
    unset_fake_temporarily,
)
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ..errors import NodeNormalizationError
from .normalize import (
    SCALAR_TYPES,
    node_inputs,
    to_fake_tensor,
)

InputValue = Any  # torch.Tensor | TensorSpec | int | float | bool | torch.SymInt | torch.SymFloat | torch.SymBool
SYMBOLIC_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool)


@dataclass(frozen=True)
class TensorSpec:
    """A contiguous tensor input given by shape and dtype; each ``None`` size is dynamic.

    ``same_as`` names the dynamic sizes: those with equal keys, across all inputs of one
    node, are one size (``baddbmm`` must know that its accumulator and the product agree);
    a dynamic size without a key (``None``, or no entry) is independent of every other.
    """

    shape: tuple[int | None, ...]
    dtype: torch.dtype
    same_as: tuple[Hashable | None, ...] = ()

    def size_key(self, axis: int) -> Hashable | None:
        """The key of dynamic size ``axis`` (None: independent, or not dynamic)."""
        return self.same_as[axis] if axis < len(self.same_as) and self.shape[axis] is None else None


# --------------------------------------------------------------------------------------
# Inputs and fake values
# --------------------------------------------------------------------------------------


def default_input_values(node: fx.Node) -> list[InputValue]:
    values = []
    for inp in node_inputs(node):
        if "val" not in inp.meta:
            raise NodeNormalizationError(
                inp,
                f"it has no meta['val'], so the type of this input of node '{node.name}' is unknown",
                hint="import nodes of a bound kernel's device IR, or pass input_tensors explicitly",
            )
        values.append(inp.meta["val"])
    return values


def check_input_values(node: fx.Node, values: Sequence[InputValue]) -> list[InputValue]:
    inputs = node_inputs(node)
    if len(values) != len(inputs):
        raise NodeNormalizationError(
            node,
            f"input_tensors has {len(values)} entries but the node reads {len(inputs)} FX nodes "
            f"({', '.join(i.name for i in inputs) or 'none'})",
            hint="pass one entry per node_inputs(node) entry, in that order",
        )
    for inp, value in zip(inputs, values):
        if not isinstance(value, (torch.Tensor, TensorSpec, *SCALAR_TYPES)):
            raise NodeNormalizationError(
                node,
                f"input '{inp.name}' is given as a {type(value).__name__}",
                hint="each input must be a torch.Tensor, a TensorSpec, a SymInt/SymFloat/SymBool or a "
                "Python int/float/bool (which is baked in as a literal)",
            )
    return list(values)


def tensors_for_specs(values: Sequence[InputValue]) -> list[InputValue]:
    """``values`` with each TensorSpec made a tensor: a meta tensor when its sizes are all
    static, else a fake tensor whose dynamic sizes are unbacked symbols of a shape
    environment of this call (so no fact learned about them outlives the import), one
    symbol per ``same_as`` key."""
    specs = [v for v in values if isinstance(v, TensorSpec)]
    if not specs:
        return list(values)
    if all(d is not None for spec in specs for d in spec.shape):
        with unset_fake_temporarily():  # a caller may have a fake mode active (Helion does)
            return [torch.empty(v.shape, dtype=v.dtype, device="meta") if isinstance(v, TensorSpec) else v
                    for v in values]
    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)

    named: dict[Hashable, torch.SymInt] = {}

    def size(spec: TensorSpec, axis: int) -> int | torch.SymInt:
        static, key = spec.shape[axis], spec.size_key(axis)
        if static is not None:
            return static
        if key is None:
            return shape_env.create_unbacked_symint()
        if key not in named:
            named[key] = shape_env.create_unbacked_symint()
        return named[key]

    def fake(spec: TensorSpec) -> torch.Tensor:
        with mode:
            return torch.empty([size(spec, axis) for axis in range(len(spec.shape))], dtype=spec.dtype)

    return [fake(v) if isinstance(v, TensorSpec) else v for v in values]


_FAKE_MODES_BY_SHAPE_ENV: "weakref.WeakKeyDictionary[ShapeEnv, FakeTensorMode]" = weakref.WeakKeyDictionary()


def _is_static(values: Sequence[InputValue]) -> bool:
    """No symbolic size, stride or scalar among the inputs."""
    for value in values:
        if isinstance(value, SYMBOLIC_SCALARS):
            return False
        if isinstance(value, torch.Tensor) and any(
            isinstance(d, torch.SymInt) for d in (*value.shape, *value.stride())
        ):
            return False
    return True


def evaluation_mode(node: fx.Node, values: Sequence[InputValue]) -> FakeTensorMode | None:
    """How to compute with the inputs: None for static inputs, computed on meta tensors
    (several times cheaper than a fake mode meeting an op for the first time); else the
    inputs' own fake mode, whose ShapeEnv their symbols live in."""
    if _is_static(values):
        return None
    modes = {id(v.fake_mode): v.fake_mode for v in values if isinstance(v, FakeTensor)}
    if len(modes) > 1:
        raise NodeNormalizationError(
            node,
            "its input tensors come from different FakeTensorModes",
            hint="pass inputs traced together (one kernel's device IR) or concrete tensors",
        )
    if modes:
        return next(iter(modes.values()))
    for v in values:
        if isinstance(v, SYMBOLIC_SCALARS):
            env = v.node.shape_env
            mode = _FAKE_MODES_BY_SHAPE_ENV.get(env)
            if mode is None:
                mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
                _FAKE_MODES_BY_SHAPE_ENV[env] = mode
            return mode
    raise AssertionError("symbolic inputs without a shape environment")


@contextlib.contextmanager
def evaluating(mode: FakeTensorMode | None) -> Iterator[None]:
    """Context in which ops run on the placeholder values (see evaluation_mode). Static
    values are computed on meta tensors outside any fake mode the caller has active
    (Helion's compile environment keeps one)."""
    if mode is not None:
        with mode:
            yield
        return
    with unset_fake_temporarily(), torch.device("meta"):
        yield


def placeholder_value(value: torch.Tensor, mode: FakeTensorMode | None) -> torch.Tensor:
    """``value`` as the graph carries it: a meta tensor (static) or a fake tensor of ``mode``."""
    if mode is None:
        if value.is_meta and not isinstance(value, FakeTensor):
            return value
        with unset_fake_temporarily():
            return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return to_fake_tensor(value, mode)
