"""The one table of lowering rules: which rule lowers a node, and what its target does
besides computing a value.

A lowering rule is a function ``rule(ctx, node) -> value`` (``ctx`` is the node's
:class:`~helion_mlir.lowering.context.RuleContext`) registered for one or more targets with
:func:`register_lowering`. Where it is registered, a target declares its effects
(:class:`~.effects.Effects`): the argument naming the host tensor it writes, the arguments
that are graphs it runs, whether it must be lowered even when nothing reads its value. The
kernel model reads writes and called graphs from :mod:`.effects`, and the walker reads
which nodes matter.

A rule is chosen, most specific first, by:

1. a per-node override in scope (:class:`RuleScopes`): a rule that lowers a region
   itself replaces the rules of some of its nodes for as long as it lowers them (a rolled
   reduction loop folds its reduction nodes into accumulators), or for the rest of the
   emission (the reduction's tails);
2. a rule registered for the target and the kind of graph the node runs
   (``register_lowering(_for_loop, graph_kind=ReductionLoopGraphInfo)``);
3. the rule registered for the target;
4. the rule of a family the target belongs to (:func:`register_family`: every ATen overload).

Targets the tool refuses on purpose are registered with :func:`register_rejection`.
Adding support for a node target is one registered function in the :mod:`.rules` module
for its kind of op; importing :mod:`helion_mlir.lowering` registers them all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import UnsupportedNodeError, describe_target
from .context import LoweringRule, RuleContext
from .effects import NO_EFFECTS, Effects, called_graph_ids, declare_effects

if TYPE_CHECKING:
    from torch import fx

__all__ = [
    "RuleScopes",
    "register_family",
    "register_lowering",
    "register_rejection",
    "registered_targets",
    "rejected_targets",
    "rule_for",
    "target_rule",
]

_LOWERINGS: dict[Any, LoweringRule] = {}
_BY_GRAPH_KIND: dict[Any, dict[type, LoweringRule]] = {}  # target -> kind of the graph it runs -> rule
_REJECTED: dict[Any, str] = {}  # target -> why it is refused
_FAMILIES: list[tuple[Callable[[Any], bool], LoweringRule]] = []  # (is_member, rule)


def register_lowering(
    *targets: Any,
    writes: int | None = None,
    graphs: tuple[int, ...] = (),
    side_effects: bool = False,
    graph_kind: type | None = None,
) -> Callable[[LoweringRule], LoweringRule]:
    """Register ``rule`` as the lowering of every target given, with the targets' effects.

    A target has one rule, and one more per ``graph_kind``: the class of the first graph
    it runs (its own effects say which argument that is). Effects are the target's, so
    a rule for a graph kind declares none and inherits them.
    """
    effects = Effects(writes, tuple(graphs), side_effects)

    def decorate(rule: LoweringRule) -> LoweringRule:
        for target in targets:
            if graph_kind is not None:
                if effects != NO_EFFECTS:
                    raise ValueError(f"a rule for a kind of graph of {describe_target(target)} declares no effects")
                by_kind = _BY_GRAPH_KIND.setdefault(target, {})
                if by_kind.get(graph_kind, rule) is not rule:
                    raise ValueError(f"{describe_target(target)} already has a rule for {graph_kind.__name__} graphs")
                by_kind[graph_kind] = rule
                continue
            if _LOWERINGS.get(target, rule) is not rule:
                raise ValueError(f"{describe_target(target)} already has a lowering rule")
            _LOWERINGS[target] = rule
            declare_effects(target, effects)
        return rule

    return decorate


def register_rejection(target: Any, reason: str, hint: str) -> None:
    """Refuse ``target`` on purpose: lowering it raises ``UnsupportedNodeError`` with
    ``reason`` and ``hint`` (which says what to write instead). It is lowered even when its
    value is unused, so that the refusal is never skipped."""

    def reject(ctx: RuleContext, node: "fx.Node") -> Any:
        raise UnsupportedNodeError(node, reason, hint=hint)

    register_lowering(target, side_effects=True)(reject)
    _REJECTED[target] = reason


def register_family(is_member: Callable[[Any], bool]) -> Callable[[LoweringRule], LoweringRule]:
    """Register ``rule`` for every target ``is_member`` accepts that has no exact rule."""

    def decorate(rule: LoweringRule) -> LoweringRule:
        _FAMILIES.append((is_member, rule))
        return rule

    return decorate


def rule_for(node: "fx.Node", graph_kind: Callable[[int], type]) -> LoweringRule | None:
    """The registered rule for ``node``: for its target and the kind of graph it runs
    (``graph_kind(graph_id)``), else for its target, else its family's, else ``None``."""
    by_kind = _BY_GRAPH_KIND.get(node.target)
    if by_kind:
        graph_ids = called_graph_ids(node)
        rule = by_kind.get(graph_kind(graph_ids[0])) if graph_ids else None
        if rule is not None:
            return rule
    return target_rule(node.target)


def target_rule(target: Any) -> LoweringRule | None:
    """The rule registered for ``target`` itself, else its family's, else ``None``."""
    rule = _LOWERINGS.get(target)
    if rule is not None:
        return rule
    return next((family_rule for is_member, family_rule in _FAMILIES if is_member(target)), None)


class RuleScopes:
    """The rules of one emission: the registry's, under scopes of per-node overrides.

    A scope opened with overrides (:meth:`scope`; the walker opens one for every graph
    it walks) covers exactly the region walked inside it; :meth:`override` lasts for the
    rest of the emission.
    """

    def __init__(self, graph_kind: Callable[[int], type]) -> None:
        self._graph_kind = graph_kind
        self._scopes: list[dict[fx.Node, LoweringRule]] = [{}]

    @contextlib.contextmanager
    def scope(self, overrides: Mapping["fx.Node", LoweringRule] | None = None) -> Iterator[None]:
        self._scopes.append(dict(overrides or {}))
        try:
            yield
        finally:
            self._scopes.pop()

    def override(self, node: "fx.Node", rule: LoweringRule) -> None:
        """Lower ``node`` with ``rule`` from now on, unless it is overridden already."""
        if self._overriding(node) is None:
            self._scopes[0][node] = rule

    def _overriding(self, node: "fx.Node") -> LoweringRule | None:
        return next((scope[node] for scope in reversed(self._scopes) if node in scope), None)

    def rule_for(self, node: "fx.Node") -> LoweringRule | None:
        return self._overriding(node) or rule_for(node, self._graph_kind)


def registered_targets() -> list[str]:
    """Readable names of every target with a rule that lowers it, sorted."""
    return sorted(describe_target(t) for t in _LOWERINGS if t not in _REJECTED)


def rejected_targets() -> dict[str, str]:
    """Readable name -> reason of every target refused on purpose, sorted by name."""
    return dict(sorted((describe_target(t), reason) for t, reason in _REJECTED.items()))
