"""What a node's target does besides computing its value: the host tensor it writes, the
graphs it runs, whether it must be lowered when nothing reads it. Declared where the
target's rule is registered (:func:`~.registry.register_lowering`); the kernel model reads
writes and called graphs from here, and the walker reads which nodes matter.

Apart from the rule table so that what reads effects (the kernel model, the rule context)
does not depend on the rules, whose type names the rule context.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import fx

__all__ = ["NO_EFFECTS", "Effects", "called_graph_ids", "declare_effects", "effects_of"]


@dataclasses.dataclass(frozen=True)
class Effects:
    """What a target does besides computing its value."""

    writes: int | None = None  # position of the argument naming the host tensor it writes
    graphs: tuple[int, ...] = ()  # positions of the arguments that are ids of graphs it runs
    side_effects: bool = False  # lowered even when nothing reads its value (writes imply it)

    @property
    def lowered_when_unused(self) -> bool:
        return self.side_effects or self.writes is not None


NO_EFFECTS = Effects()
_EFFECTS: dict[Any, Effects] = {}


def declare_effects(target: Any, effects: Effects) -> None:
    """Record ``target``'s effects (nothing to record for none)."""
    if effects != NO_EFFECTS:
        _EFFECTS[target] = effects


def effects_of(target: Any) -> Effects:
    """The effects registered for ``target`` (none for a target without a rule)."""
    return _EFFECTS.get(target, NO_EFFECTS)


def called_graph_ids(node: "fx.Node") -> list[int]:
    """Ids of the graphs a node runs (loop bodies, branches, combine functions)."""
    if node.op != "call_function":
        return []
    return [int(node.args[i]) for i in effects_of(node.target).graphs]
