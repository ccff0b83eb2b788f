"""The table of lowering rules, keyed by FX node target.

A lowering rule is a function ``rule(visitor, node) -> value`` registered for one or
more targets with :func:`register_lowering`; the visitor looks the rule up by
``node.target``. Adding support for a node target is one registered function in the
``lowerings`` module for its kind of op. Targets the tool refuses on purpose are
registered with :func:`register_rejection`: the visitor raises their error, and listings
show them apart from the supported targets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import UnsupportedNodeError, describe_target

if TYPE_CHECKING:
    from torch import fx

    from .visitor import IRVisitor

__all__ = [
    "LoweringRule",
    "register_lowering",
    "register_rejection",
    "lookup_lowering",
    "registered_targets",
    "rejected_targets",
]

LoweringRule = Callable[["IRVisitor", "fx.Node"], Any]

_LOWERINGS: dict[Any, LoweringRule] = {}
_REJECTED: dict[Any, str] = {}  # target -> why it is refused


def register_lowering(*targets: Any) -> Callable[[LoweringRule], LoweringRule]:
    """Register ``rule`` as the lowering of every target given; a target has one rule."""

    def decorate(rule: LoweringRule) -> LoweringRule:
        for target in targets:
            if target in _LOWERINGS and _LOWERINGS[target] is not rule:
                raise ValueError(f"{describe_target(target)} already has a lowering rule")
            _LOWERINGS[target] = rule
        return rule

    return decorate


def register_rejection(target: Any, reason: str, hint: str) -> None:
    """Refuse ``target`` on purpose: lowering it raises ``UnsupportedNodeError`` with
    ``reason`` and ``hint`` (which says what to write instead)."""

    def reject(v: "IRVisitor", node: "fx.Node") -> Any:
        raise UnsupportedNodeError(node, reason, hint=hint)

    register_lowering(target)(reject)
    _REJECTED[target] = reason


def lookup_lowering(target: Any) -> LoweringRule | None:
    """The rule registered for ``target``, if any (the lowerings package is loaded first)."""
    from . import lowerings  # noqa: F401  (registers every rule)

    return _LOWERINGS.get(target)


def registered_targets() -> list[str]:
    """Readable names of every target with a rule that lowers it, sorted."""
    from . import lowerings  # noqa: F401

    return sorted(describe_target(t) for t in _LOWERINGS if t not in _REJECTED)


def rejected_targets() -> dict[str, str]:
    """Readable name -> reason of every target refused on purpose, sorted by name."""
    from . import lowerings  # noqa: F401

    return dict(sorted((describe_target(t), reason) for t, reason in _REJECTED.items()))
