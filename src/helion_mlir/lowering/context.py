"""What a lowering rule gets besides its node: a :class:`RuleContext`.

The walker makes one for every node it lowers and calls ``rule(ctx, node)``. The context
carries the emitter (its location already the node's kernel source line), the node's
operands as lowered values, the tile, symbol and kernel facts a rule may read, and the
few ways a rule acts beyond returning the node's value: a new value for the host tensor
its target is registered as writing (:meth:`RuleContext.write`), a nested graph run
(:meth:`RuleContext.run_graph`, with loop-carried host tensors threaded by
:meth:`RuleContext.carried`), tile loops, and rule overrides for a region.

Host tensors are references in the walk (:class:`~.values.HostRef`: a store replaces a
host tensor's value, not the reference); :meth:`RuleContext.value` is the one place that
turns them into their current values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import torch
from torch import fx

from ..errors import HelionMLIRError
from ..mlir_types import element_type
from ..output_type import OutputType
from .deferred_inline import DeferredInliner
from .effects import Effects
from .emitter import Emitter
from .kernel_model import KernelModel
from .kernel_state import CarriedTensors, KernelState
from .values import HostRef, HostTensor, JaggedEnds, Scalar, Tensor, Tile, Value

__all__ = ["LoweringRule", "RuleContext", "Walker"]

#: A lowering rule: ``rule(ctx, node) -> value`` (registered in :mod:`.registry`).
LoweringRule = Callable[["RuleContext", fx.Node], Any]


class RuleOverrides(Protocol):
    def override(self, node: fx.Node, rule: LoweringRule) -> None: ...


class Walker(Protocol):
    """What a rule may ask of the walk through its context (the
    :class:`~.visitor.IRVisitor` is one): the emission's emitter, model and deferred ATen
    imports; node values, lowered on demand; nested graphs; overrides."""

    emit: Emitter
    model: KernelModel
    deferred: DeferredInliner
    rules: RuleOverrides

    def value(self, arg: Any) -> Any: ...

    def visit(self, node: fx.Node) -> Any: ...

    def is_read(self, node: fx.Node) -> bool: ...

    def run_graph(self, graph_id: int, inputs: Sequence[Any] = (),
                  overrides: Mapping[fx.Node, LoweringRule] | None = None) -> list[Any]: ...


class RuleContext:
    """The context of one rule applied to one node (see the module docstring)."""

    def __init__(self, walker: Walker, state: KernelState, node: fx.Node, effects: Effects) -> None:
        self._walker = walker
        self._state = state
        self._node = node
        self._effects = effects
        self._written: Tensor | None = None
        self.emit: Emitter = walker.emit
        self.model: KernelModel = walker.model
        self.deferred: DeferredInliner = walker.deferred

    @property
    def output_type(self) -> OutputType:
        """The output type ATen ops are lowered to (the emission's, kept in its state)."""
        return self._state.output_type

    @property
    def location(self) -> str | None:
        """The MLIR location body every op emitted now gets (the node's source line)."""
        return self.emit.location

    # -- operands ------------------------------------------------------------------------
    def value(self, arg: Any) -> Any:
        """The lowered value of a node argument: nodes looked up (a host tensor is its
        current value), containers mapped, literals kept."""
        return self._resolved(self._walker.value(arg))

    def _resolved(self, value: Any) -> Any:
        if isinstance(value, HostRef):
            return self._state.host_tensor(value.name)
        if isinstance(value, (list, tuple)):
            return type(value)(self._resolved(x) for x in value)
        return value

    def recorded(self, arg: Any) -> Any:
        """The value as its node recorded it: a host tensor stays a reference (for rules
        that pass a value on, which must see later stores into it)."""
        return self._walker.value(arg)

    def host(self, arg: Any) -> HostTensor | None:
        """The host tensor ``arg`` refers to, with its current value; None if it is not one."""
        ref = self._walker.value(arg)
        return HostTensor(ref.name, self._state.host_tensor(ref.name)) if isinstance(ref, HostRef) else None

    def tensor(self, arg: Any) -> Tensor:
        """The value of ``arg`` as a tensor."""
        value = self.value(arg)
        if not isinstance(value, Tensor):
            raise HelionMLIRError(f"expected a tensor, got {value!r}")
        return value

    def scalar(self, arg: Any, mlir_type: str) -> Scalar:
        """The value of ``arg`` as a scalar SSA value of ``mlir_type`` (a one-element tensor's element)."""
        value = self.value(arg)
        if isinstance(value, Tensor):
            if value.rank and any(d != 1 for d in value.shape):
                raise HelionMLIRError(f"expected a scalar, got a tensor of shape {value.shape}")
            zeros = ", ".join(self.emit.index(0).ssa for _ in value.shape)
            ssa = self.emit.assign("elt", f"tensor.extract {value.ssa}[{zeros}] : {value.type}")
            value = Scalar(ssa, element_type(value.dtype))
        if isinstance(value, (bool, int, float, Scalar)):
            return self.emit.convert(value, mlir_type)
        raise HelionMLIRError(f"expected a scalar, got {value!r}")

    def static_int(self, arg: Any) -> int | None:
        """``arg`` as a Python int when it is known at compile time."""
        value = self.value(arg)
        if isinstance(value, bool):
            return int(value)
        return value if isinstance(value, int) else None

    def lowered(self, node: fx.Node) -> Any:
        """The value of ``node``, lowered now if the walk has not lowered it (a node only
        another form of its user reads)."""
        return self._resolved(self._walker.visit(node))

    # -- facts ---------------------------------------------------------------------------
    def tile(self, block_id: int) -> Tile | None:
        """The active tile of a block, if any."""
        return self._state.tiles.get(block_id)

    def tile_of(self, size: Any) -> Tile | None:
        """The active tile of the block whose tile-size symbol ``size`` is, if any."""
        return self._state.tile_of(size)

    def static_shape(self, meta: torch.Tensor) -> list[int | None]:
        """The shape a value described by ``meta`` has here: tile dims take their static tile size."""
        return self._state.static_shape(meta)

    def eval_symbolic(self, expr: Any) -> Any:
        """An int, SymInt or sympy expression as an int or an ``index`` Scalar."""
        return self._state.eval_symbolic(expr)

    def block_size(self, block_id: int) -> Scalar | int:
        return self._state.block_size(block_id)

    def is_read(self, node: fx.Node) -> bool:
        """Whether a node that matters reads ``node``'s value (a write's result may be unused)."""
        return self._walker.is_read(node)

    # -- effects -------------------------------------------------------------------------
    @property
    def destination(self) -> HostTensor:
        """The host tensor the node writes (its target is registered with ``writes=``)."""
        if self._effects.writes is None:
            raise TypeError(f"{self._node.target} is not registered as writing a host tensor")
        destination = self.host(self._node.args[self._effects.writes])
        if destination is None:
            raise HelionMLIRError("memory operations need a host tensor as their first argument")
        return destination

    def write(self, value: Tensor) -> None:
        """Record the destination's new value; the walker makes it current when the rule returns."""
        self.destination  # noqa: B018  (checks that the target writes)
        self._written = value

    def commit(self) -> None:
        """Apply what the rule recorded (called by the walker after the rule returns)."""
        if self._written is not None:
            self._state.write(self.destination.name, self._written)

    def run_graph(self, graph_id: int, inputs: Sequence[Any] = (),
                  overrides: Mapping[fx.Node, LoweringRule] | None = None) -> list[Any]:
        """Lower a graph here with its placeholders bound to ``inputs`` (and ``overrides``
        for some of its nodes); its output values."""
        return self._walker.run_graph(graph_id, inputs, overrides)

    def carried(self, *graph_ids: int) -> CarriedTensors:
        """The host tensors the graphs write, which a loop or branch running them carries."""
        return self._state.carried(*graph_ids)

    def tile_loops(self, block_ids: Sequence[int], begins: Sequence[Any], ends: Sequence[Any],
                   steps: Sequence[int | None], carried: list[Value],
                   body: Callable[[list[Value]], Sequence[Value]],
                   ranges: Sequence[tuple[Any, Any] | None] | None = None,
                   jagged: Mapping[int, JaggedEnds] | None = None) -> list[Value]:
        """A nest of ``scf.for`` over the tiles of ``block_ids`` carrying ``carried``;
        ``body(current) -> next`` runs with the tiles active (``ranges``: the loops' begins
        and ends as expressions of the kernel's symbols, where known; ``jagged``: the ends
        of jagged tiles)."""
        return self._state.tile_loops(block_ids, begins, ends, steps, carried, body, ranges, jagged)

    def override(self, node: fx.Node, rule: LoweringRule) -> None:
        """Lower ``node`` with ``rule`` instead of its own for the rest of the emission
        (unless a rule overrides it already)."""
        self._walker.rules.override(node, rule)
