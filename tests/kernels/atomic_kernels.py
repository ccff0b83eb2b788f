"""Kernels that read the old values atomics return, and one whose atomic targets a tensor made
inside its loop, for tests/test_atomics.py."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

CONFIG = helion.Config(block_sizes=[16])


@helion.kernel(config=CONFIG)
def add_returning_old(acc: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    old = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        old[tile] = hl.atomic_add(acc, [tile], x[tile])
    return old


@helion.kernel(config=CONFIG)
def cas_returning_old(acc: torch.Tensor, expected: torch.Tensor, desired: torch.Tensor) -> torch.Tensor:
    old = torch.empty_like(acc)
    for tile in hl.tile(acc.size(0)):
        old[tile] = hl.atomic_cas(acc, [tile], expected[tile], desired[tile])
    return old


@helion.kernel(config=CONFIG)
def max_at_indices_returning_old(acc: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    old = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        old[tile] = hl.atomic_max(acc, [index[tile]], x[tile])
    return old


@helion.kernel(config=CONFIG)
def add_at_indices_ignoring_old(acc: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> None:
    for tile in hl.tile(x.size(0)):
        hl.atomic_add(acc, [index[tile]], x[tile])


@helion.kernel(config=CONFIG)
def max_into_loop_tensor(x: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size(0)):
        scratch = hl.zeros([tile], dtype=x.dtype)
        hl.atomic_max(scratch, [tile], x[tile])
    return x
