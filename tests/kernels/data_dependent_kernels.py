"""Kernels whose host code reads values from tensor data (``.item()``), for
tests/test_data_dependent.py: the value sizes an output, bounds a loop, or is a scalar of
the device code; and kernels whose trace cannot follow the value (refused)."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16]))
def doubled_prefix(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The first ``offsets[-1]`` elements of ``x``, doubled: output and loop sized by the value."""
    n = int(offsets[-1].item())
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tile in hl.tile(n):
        out[tile] = x[tile] * 2
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def doubled_prefix_padded(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The same into a zero-filled output of ``x``'s size: only the loop bound is the value."""
    n = int(offsets[-1].item())
    out = torch.zeros_like(x)
    for tile in hl.tile(n):
        out[tile] = x[tile] * 2
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def masked_prefix(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """``x`` with the elements from ``offsets[-1]`` on zeroed: the value in device code."""
    n = int(offsets[-1].item())
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = torch.where(tile.index < n, x[tile], 0.0)
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]), ignore_warnings=[helion.exc.TensorOperationInWrapper])
def normalized_by_sum(x: torch.Tensor) -> torch.Tensor:
    """``x / x.sum()`` with the sum read on the host: a float in device code."""
    total = x.sum().item()
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] / total
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def incremented_segment(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """``x[offsets[1]:offsets[2]] + 1`` in place of zeros: two values as a loop's begin and end."""
    start = int(offsets[1].item())
    end = int(offsets[2].item())
    out = torch.zeros_like(x)
    for tile in hl.tile(start, end):
        out[tile] = x[tile] + 1
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def first_rows_doubled(x: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The first ``count`` rows of a 2-D ``x``, doubled: a 2-D output and tile loop."""
    n = int(count.item())
    out = torch.empty([n, x.size(1)], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([n, x.size(1)]):
        out[tile_m, tile_n] = x[tile_m, tile_n] * 2
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 8]))
def column_sums_of_first_rows(x: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Column sums over the first ``count`` rows: the value bounds an inner device loop."""
    n = int(count.item())
    out = torch.empty([x.size(1)], dtype=torch.float32, device=x.device)
    for tile_n in hl.tile(x.size(1)):
        acc = hl.zeros([tile_n], dtype=torch.float32)
        for tile_m in hl.tile(n):
            acc = acc + x[tile_m, tile_n].sum(0)
        out[tile_n] = acc
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def centered_on_last(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """``x - x[n - 1]`` for ``n = max(offsets[-1], 1)``: Python's ``max`` of the value, and the
    value as a scalar index of a load."""
    n = max(int(offsets[-1].item()), 1)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] - x[n - 1]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def upper_half(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Elements ``n // 2 .. n`` of ``x``: an output sized and a loop bounded by values computed
    from the read value."""
    n = int(offsets[-1].item())
    half = n // 2
    out = torch.empty([n - half], dtype=x.dtype, device=x.device)
    for tile in hl.tile(n - half):
        out[tile] = x[tile.index + half]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]), ignore_warnings=[helion.exc.TensorOperationInWrapper])
def doubled_if_any_flag(x: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    """``x * 2`` if any flag is set, else ``x``: a bool read from tensor data as a branch condition."""
    any_set = bool(flags.any().item())
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        if any_set:
            out[tile] = x[tile] * 2
        else:
            out[tile] = x[tile]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def ordered_segment(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """``x[lo:hi] + 1`` for the two first offsets in order: ``sorted`` compares the values on the
    host, a decision Helion makes once with its placeholder (a guard checked at each call)."""
    first = int(offsets[0].item())
    second = int(offsets[1].item())
    lo, hi = sorted([first, second])
    out = torch.zeros_like(x)
    for tile in hl.tile(lo, hi):
        out[tile] = x[tile] + 1
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def lengths_as_tensor(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Builds a tensor from the value on the host: Helion replaces the value by its placeholder."""
    n = int(offsets[-1].item())
    scale = torch.tensor([n, n], dtype=x.dtype, device=x.device)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] * scale[0]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def sliced_prefix(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """A host slice by the value: Helion's trace gives it the full size of ``x``."""
    n = int(offsets[-1].item())
    prefix = x[:n]
    out = torch.empty_like(prefix)
    for tile in hl.tile(prefix.size(0)):
        out[tile] = prefix[tile] * 2
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def incremented_up_to_tensor(x: torch.Tensor, out: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """``out[:n] = x[:n] + 1``, a loop bounded by a 0-d tensor itself (its value read when the kernel runs)."""
    for tile in hl.tile(n):
        out[tile] = x[tile] + 1
    return out
