"""The lowering registry: one table chooses every rule (per-node overrides in scope, rules
for a kind of graph a target runs, target rules, families), and what a target writes or
runs is declared where it is registered; every rule is a function of its context and node."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
from helion._compiler.device_ir import ForLoopGraphInfo, ReductionLoopGraphInfo
from helion.language import _tracing_ops, atomic_ops, device_print, memory_ops
from torch import fx

import helion_mlir  # noqa: F401  (registers every rule)
from helion_mlir.lowering import registry
from helion_mlir.lowering.aten_calls import lower_aten_op
from helion_mlir.lowering.effects import called_graph_ids, effects_of
from helion_mlir.lowering.registry import RuleScopes, register_lowering, rule_for
from helion_mlir.lowering.rules.control_flow import lower_for_loop
from helion_mlir.lowering.rules.rolled_reductions import lower_reduction_loop


def _every_rule() -> list[Any]:
    rules = list(registry._LOWERINGS.values())
    rules += [rule for by_kind in registry._BY_GRAPH_KIND.values() for rule in by_kind.values()]
    return rules + [rule for _is_member, rule in registry._FAMILIES]


def test_every_rule_is_a_function_of_its_context_and_its_node() -> None:
    rules = _every_rule()
    assert len(rules) > 60
    wrong = [rule.__qualname__ for rule in rules if list(inspect.signature(rule).parameters) != ["ctx", "node"]]
    assert not wrong, wrong


def test_writes_and_called_graphs_are_declared_with_the_rules() -> None:
    assert effects_of(memory_ops.store).writes == 0
    assert {effects_of(getattr(atomic_ops, f"atomic_{k}")).writes for k in ("add", "max", "cas", "xchg")} == {0}
    assert effects_of(memory_ops.load).writes is None and not effects_of(memory_ops.load).lowered_when_unused
    assert effects_of(_tracing_ops._if).graphs == (1, 2)
    assert effects_of(_tracing_ops._while_loop).graphs == (0, 1)
    assert effects_of(device_print).lowered_when_unused  # a refusal is never skipped

    graph = fx.Graph()
    x = graph.placeholder("x")
    branch = graph.call_function(_tracing_ops._if, (x, 3, 4, [], []))
    plain = graph.call_function(torch.ops.aten.add.Tensor, (x, x))
    assert called_graph_ids(branch) == [3, 4] and called_graph_ids(plain) == []


def test_a_target_has_one_rule() -> None:
    with pytest.raises(ValueError, match="already has a lowering rule"):
        register_lowering(memory_ops.store)(lambda ctx, node: None)


def _for_loop_node() -> fx.Node:
    graph = fx.Graph()
    return graph.call_function(_tracing_ops._for_loop, (7, [0], [16], []))


def test_a_rule_for_a_kind_of_graph_is_chosen_only_for_that_kind() -> None:
    loop = _for_loop_node()
    assert rule_for(loop, lambda graph_id: ReductionLoopGraphInfo) is lower_reduction_loop
    assert rule_for(loop, lambda graph_id: ForLoopGraphInfo) is lower_for_loop
    graph = fx.Graph()
    x = graph.placeholder("x")
    assert rule_for(graph.call_function(torch.ops.aten.sin.default, (x,)), lambda graph_id: type) is lower_aten_op


def test_a_scoped_override_lasts_for_its_scope_and_an_override_for_the_emission() -> None:
    loop = _for_loop_node()
    scopes = RuleScopes(lambda graph_id: ForLoopGraphInfo)

    def first(ctx: Any, node: fx.Node) -> str:
        return "first"

    def second(ctx: Any, node: fx.Node) -> str:
        return "second"

    with scopes.scope({loop: first}):
        assert scopes.rule_for(loop) is first
        with scopes.scope():
            scopes.override(loop, second)  # overridden already, further out
            assert scopes.rule_for(loop) is first
    assert scopes.rule_for(loop) is lower_for_loop
    with scopes.scope():
        scopes.override(loop, second)
        assert scopes.rule_for(loop) is second
    assert scopes.rule_for(loop) is second  # an override outlives the scope it was made in
    with scopes.scope({loop: first}):
        assert scopes.rule_for(loop) is first  # a scope's own override comes first
