"""Discounted returns of reinforcement-learning episodes: ``G[t] = r[t] + gamma * (1 - done[t]) * G[t + 1]``,
bootstrapped from a value estimate after the last step.

The recurrence runs backwards in time, so it is a reverse scan. Each step is the affine map
``g -> discount[t] * g + reward[t]``; composing two of them is associative, so
``hl.associative_scan`` with ``reverse=True`` over (discount, reward) pairs gives, at each
``t``, the map from the value after the last step to ``G[t]``.
Exercises: ``_associative_scan`` with a tuple of inputs and ``reverse=True``, a scalar
parameter, a per-row bootstrap value broadcast over the row.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


def _compose(later: tuple[torch.Tensor, torch.Tensor],
             step: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``step`` applied after ``later`` (``later`` covers the steps after this one)."""
    scale, shift = later
    discount, reward = step
    return discount * scale, reward + discount * shift


@helion.kernel(config=helion.Config(block_sizes=[4]))
def discounted_returns(rewards: torch.Tensor, dones: torch.Tensor, bootstrap: torch.Tensor,
                       gamma: float) -> torch.Tensor:
    episodes, steps = rewards.size()
    returns = torch.empty_like(rewards)
    for tile in hl.tile(episodes):
        discount = gamma * (1.0 - dones[tile, :].to(torch.float32))
        scale, shift = hl.associative_scan(_compose, (discount, rewards[tile, :]), dim=1, reverse=True)
        returns[tile, :] = shift + scale * bootstrap[tile][:, None]
    return returns


KERNEL = discounted_returns
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (16, 64), "ragged": (13, 50)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(57)
    episodes, steps = SHAPES[shape]
    rewards = torch.randn(episodes, steps, generator=gen).to(dtype or torch.float32)
    dones = torch.rand(episodes, steps, generator=gen) < 0.05
    bootstrap = torch.randn(episodes, generator=gen).to(dtype or torch.float32)
    return rewards, dones, bootstrap, 0.97


def reference(rewards: torch.Tensor, dones: torch.Tensor, bootstrap: torch.Tensor, gamma: float) -> torch.Tensor:
    returns = torch.empty_like(rewards)
    following = bootstrap.float()
    for t in reversed(range(rewards.size(1))):
        following = rewards[:, t].float() + gamma * (~dones[:, t]).float() * following
        returns[:, t] = following.to(rewards.dtype)
    return returns


def main() -> None:
    from _common import run_example

    run_example("discounted_returns", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
