"""The table of lowering rules, keyed by FX node target.

A lowering rule is a function ``rule(visitor, node) -> value`` registered for one or
more targets with :func:`register_lowering`; the visitor looks the rule up by
``node.target``. Whole families of targets (every ATen overload) are covered by one rule
registered with :func:`register_family`, consulted when no exact rule exists. Adding
support for a node target is one registered function in the :mod:`..rules` module for
its kind of op; the rules register themselves when :mod:`helion_mlir.lowering.rules` is
imported, which :mod:`helion_mlir.generate` does once. Targets the tool refuses on purpose
are registered with :func:`register_rejection`: the visitor raises their error, and
listings show them apart from the supported targets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UnsupportedNodeError, describe_target

if TYPE_CHECKING:
    from torch import fx

    from .visitor import IRVisitor

__all__ = [
    "LoweringRule",
    "register_lowering",
    "register_rejection",
    "register_family",
    "lookup_lowering",
    "registered_targets",
    "rejected_targets",
]

LoweringRule = Callable[["IRVisitor", "fx.Node"], Any]

_LOWERINGS: dict[Any, LoweringRule] = {}
_REJECTED: dict[Any, str] = {}  # target -> why it is refused
_FAMILIES: list[tuple[Callable[[Any], bool], LoweringRule]] = []  # (is_member, rule)


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


def register_family(is_member: Callable[[Any], bool]) -> Callable[[LoweringRule], LoweringRule]:
    """Register ``rule`` for every target ``is_member`` accepts that has no exact rule."""

    def decorate(rule: LoweringRule) -> LoweringRule:
        _FAMILIES.append((is_member, rule))
        return rule

    return decorate


def lookup_lowering(target: Any) -> LoweringRule | None:
    """The rule for ``target``: its own, else its family's, else ``None``."""
    rule = _LOWERINGS.get(target)
    if rule is not None:
        return rule
    return next((family_rule for is_member, family_rule in _FAMILIES if is_member(target)), None)


def registered_targets() -> list[str]:
    """Readable names of every target with a rule that lowers it, sorted."""
    return sorted(describe_target(t) for t in _LOWERINGS if t not in _REJECTED)


def rejected_targets() -> dict[str, str]:
    """Readable name -> reason of every target refused on purpose, sorted by name."""
    return dict(sorted((describe_target(t), reason) for t, reason in _REJECTED.items()))
