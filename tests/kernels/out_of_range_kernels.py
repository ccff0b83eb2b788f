"""Kernels that index outside their tensors, one per kind of access, for
tests/test_out_of_range.py.

Each kernel reads or writes at an index computed at run time: a scalar argument, a value
loaded from an index tensor, arithmetic on ``tile.index`` or on a grid index, a tile's end.
With in-range arguments they compute what Helion's reference mode computes; with
out-of-range ones Helion's code leaves the result undefined, and ours is documented
(docs/abi.md, "Indices out of range"): a read out of range yields 0, a write or an atomic
out of range does nothing. ``expected`` computes that in torch. The line of each kernel
holding the out-of-range access ends in ``# out of range``: checked mode names it.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch

TILES = helion.Config(block_sizes=[16])
TILES_2D = helion.Config(block_sizes=[16, 8])
GRID = helion.Config(block_sizes=[])


def _in_range(index: torch.Tensor, size: int) -> torch.Tensor:
    return (index >= 0) & (index < size)


def _read(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[index]`` along dim 0 with every out-of-range position reading 0."""
    ok = _in_range(index, x.size(0))
    got = x[torch.where(ok, index, 0)]
    return torch.where(ok.view(-1, *([1] * (got.dim() - 1))), got, torch.zeros_like(got))


def _write(out: torch.Tensor, index: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``out`` with ``value`` written at each in-range position of ``index`` along dim 0, in order."""
    out = out.clone()
    for position, row in zip(index.tolist(), value):
        if 0 <= position < out.size(0):
            out[position] = row
    return out


# -- scalar indices ----------------------------------------------------------------------


@helion.kernel(config=TILES)
def add_element(x: torch.Tensor, k: int) -> torch.Tensor:
    """``x + x[k]``: a read at a scalar argument."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + x[k]  # out of range
    return out


def add_element_expected(x: torch.Tensor, k: int) -> torch.Tensor:
    return x + (x[k] if 0 <= k < x.size(0) else 0)


@helion.kernel(config=TILES)
def double_row(x: torch.Tensor, k: int) -> torch.Tensor:
    """Row ``k`` of ``x`` doubled in place: a read and a write at a scalar argument."""
    for tile in hl.tile(x.size(1)):
        x[k, tile] = x[k, tile] * 2  # out of range
    return x


def double_row_expected(x: torch.Tensor, k: int) -> torch.Tensor:
    if 0 <= k < x.size(0):
        x[k] *= 2
    return x


@helion.kernel(config=GRID)
def spread(x: torch.Tensor, stride: int) -> torch.Tensor:
    """``out[stride * i] = x[i]``: a store at an index computed from a grid index."""
    out = torch.zeros_like(x)
    for i in hl.grid(x.size(0)):
        out[stride * i] = x[i]  # out of range
    return out


def spread_expected(x: torch.Tensor, stride: int) -> torch.Tensor:
    return _write(torch.zeros_like(x), torch.arange(x.size(0)) * stride, x)


@helion.kernel(config=GRID)
def every_nth(x: torch.Tensor, stride: int) -> torch.Tensor:
    """``out[i] = x[stride * i]``: a load at an index computed from a grid index."""
    out = torch.empty_like(x)
    for i in hl.grid(x.size(0)):
        out[i] = x[stride * i]  # out of range
    return out


def every_nth_expected(x: torch.Tensor, stride: int) -> torch.Tensor:
    return _read(x, torch.arange(x.size(0)) * stride)


@helion.kernel(config=TILES_2D)
def mark_tile_ends(x: torch.Tensor) -> torch.Tensor:
    """A 1 at each tile's end: the ends of the last tiles lie past the tensor."""
    out = torch.zeros_like(x, dtype=torch.int32)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m.end, tile_n.end] = 1  # out of range
    return out


def mark_tile_ends_expected(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x, dtype=torch.int32)
    out[16::16, 8::8] = 1
    return out


@helion.kernel(config=TILES)
def minus_previous_tile_end(x: torch.Tensor) -> torch.Tensor:
    """``x - x[tile.begin - 1]``: the first tile reads at -1."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] - x[tile.begin - 1]  # out of range
    return out


def minus_previous_tile_end_expected(x: torch.Tensor) -> torch.Tensor:
    begins = torch.arange(x.size(0)) // 16 * 16
    return x - _read(x, begins - 1)


@helion.kernel(config=GRID)
def count_scalar_bins(bins: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """A histogram with one ``hl.atomic_add`` per element at the bin it names."""
    for i in hl.grid(bins.size(0)):
        hl.atomic_add(counts, [bins[i]], 1)  # out of range
    return counts


def count_scalar_bins_expected(bins: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    ok = _in_range(bins, counts.size(0))
    counts += torch.bincount(bins[ok], minlength=counts.size(0)).to(counts.dtype)
    return counts


# -- tensor indices ----------------------------------------------------------------------


@helion.kernel(config=TILES)
def gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[index]``, the positions loaded from ``index``."""
    out = torch.empty(index.size(0), dtype=x.dtype, device=x.device)
    for tile in hl.tile(index.size(0)):
        out[tile] = x[index[tile]]  # out of range
    return out


def gather_expected(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return _read(x, index)


@helion.kernel(config=TILES_2D)
def embed(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Rows of ``table`` at ``ids`` (an embedding lookup)."""
    out = torch.empty(ids.size(0), table.size(1), dtype=table.dtype, device=table.device)
    for tile_b, tile_d in hl.tile([ids.size(0), table.size(1)]):
        out[tile_b, tile_d] = table[ids[tile_b], tile_d]  # out of range
    return out


def embed_expected(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return _read(table, ids)


@helion.kernel(config=TILES)
def masked_gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``hl.load`` at loaded positions under a mask: masked lanes are not accessed."""
    out = torch.empty(index.size(0), dtype=x.dtype, device=x.device)
    for tile in hl.tile(index.size(0)):
        i = index[tile]
        out[tile] = hl.load(x, [i], extra_mask=(i >= 0) & (i < x.size(0)))  # in range under its mask
    return out


def masked_gather_expected(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return _read(x, index)


@helion.kernel(config=TILES)
def load_strided(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[i] = x[2 * i]`` through ``hl.load`` at a computed index tensor."""
    for tile in hl.tile(out.size(0)):
        out[tile] = hl.load(x, [tile.index * 2])  # out of range
    return out


def load_strided_expected(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    out.copy_(_read(x, torch.arange(out.size(0)) * 2))
    return out


@helion.kernel(config=TILES)
def store_strided(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[2 * i] = x[i]`` through ``hl.store`` at a computed index tensor."""
    for tile in hl.tile(x.size(0)):
        hl.store(out, [tile.index * 2], x[tile])  # out of range
    return out


def store_strided_expected(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    out.copy_(_write(out, torch.arange(x.size(0)) * 2, x))
    return out


@helion.kernel(config=TILES)
def scatter(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[index] = x``, the positions loaded from ``index``."""
    for tile in hl.tile(x.size(0)):
        out[index[tile]] = x[tile]  # out of range
    return out


def scatter_expected(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    out.copy_(_write(out, index, x))
    return out


@helion.kernel(config=TILES_2D)
def scatter_rows(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[index, :] = x``: whole rows stored at loaded positions."""
    for tile_r, tile_c in hl.tile(x.size()):
        out[index[tile_r], tile_c] = x[tile_r, tile_c]  # out of range
    return out


scatter_rows_expected = scatter_expected  # rows are written whole, as elements are


@helion.kernel(config=helion.Config(block_sizes=[4]))
def scatter_by_row_columns(x: torch.Tensor, columns: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[i, columns[i, j]] = x[i, j]``: index tensors of two dims broadcast together."""
    for tile in hl.tile(x.size(0)):
        out[tile.index[:, None], columns[tile, :]] = x[tile, :]  # out of range
    return out


@helion.kernel(config=TILES)
def add_at(acc: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``hl.atomic_add`` at loaded positions."""
    for tile in hl.tile(x.size(0)):
        hl.atomic_add(acc, [index[tile]], x[tile])  # out of range
    return acc


def add_at_expected(acc: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    ok = _in_range(index, acc.size(0))
    acc.index_add_(0, index[ok], x[ok])
    return acc


@helion.kernel(config=TILES)
def max_at_returning_old(acc: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``hl.atomic_max`` at loaded positions, returning the values it replaced."""
    old = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        old[tile] = hl.atomic_max(acc, [index[tile]], x[tile])  # out of range
    return old


def max_at_returning_old_expected(acc: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    old = torch.zeros_like(x)
    for lane, position in enumerate(index.tolist()):
        if 0 <= position < acc.size(0):
            old[lane] = acc[position]
            acc[position] = torch.maximum(acc[position], x[lane])
    return old


# -- tile.index moved ---------------------------------------------------------------------


@helion.kernel(config=TILES)
def next_element(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[i] = x[i + 1]``: the last lane reads past the end."""
    for tile in hl.tile(out.size(0)):
        out[tile] = x[tile.index + 1]  # out of range
    return out


def next_element_expected(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    out.copy_(_read(x, torch.arange(out.size(0)) + 1))
    return out


@helion.kernel(config=TILES)
def shift_right(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[i + 1] = x[i]``: the last lane writes past the end."""
    for tile in hl.tile(x.size(0)):
        out[tile.index + 1] = x[tile]  # out of range
    return out


def shift_right_expected(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    out.copy_(_write(out, torch.arange(x.size(0)) + 1, x))
    return out


# -- tiles over a range longer than the tensor ----------------------------------------------


@helion.kernel(config=TILES)
def copy_first(x: torch.Tensor, out: torch.Tensor, n: int) -> torch.Tensor:
    """``out[:n] = x[:n]``, tiles over ``n`` (which may exceed both tensors)."""
    for tile in hl.tile(n):
        out[tile] = x[tile]  # out of range
    return out


def copy_first_expected(x: torch.Tensor, out: torch.Tensor, n: int) -> torch.Tensor:
    count = max(0, min(n, out.size(0)))
    inside = max(0, min(count, x.size(0)))
    out[:count] = 0
    out[:inside] = x[:inside]
    return out


@helion.kernel(config=TILES)
def copy_up_to(x: torch.Tensor, out: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """``out[:n] = x[:n]`` for a 0-d tensor ``n``, read when the kernel runs: tiles over its
    value (which may exceed both tensors)."""
    for tile in hl.tile(n):
        out[tile] = x[tile]  # out of range
    return out


def copy_up_to_expected(x: torch.Tensor, out: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    return copy_first_expected(x, out, int(n))


@helion.kernel(config=TILES_2D, static_shapes=False)
def add_pair(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` with tiles over ``x``'s sizes, which ``y`` may not have (dynamic shapes)."""
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + y[tile_m, tile_n]  # out of range
    return out


def add_pair_expected(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    rows, cols = min(x.size(0), y.size(0)), min(x.size(1), y.size(1))
    padded = torch.zeros_like(x)
    padded[:rows, :cols] = y[:rows, :cols]
    return x + padded


@helion.kernel(config=TILES)
def bf16_groups(storage: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """The 16 bf16 values of group ``groups[i]`` of ``storage`` in row ``i`` (a group load)."""
    out = torch.empty([groups.size(0), 16], dtype=torch.float16, device=groups.device)
    for tile in hl.tile(groups.size(0)):
        lanes = hl.load_bfloat16_x16_to_float16(storage, groups[tile])  # out of range
        for lane in hl.static_range(16):
            out[tile, lane] = lanes[lane]
    return out


def bf16_groups_expected(storage: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    flat = storage.reshape(-1).to(torch.float16)
    positions = groups[:, None] * 16 + torch.arange(16)[None, :]
    ok = _in_range(positions, flat.numel())
    return torch.where(ok, flat[torch.where(ok, positions, 0)], torch.zeros((), dtype=torch.float16))


@helion.kernel(config=TILES_2D)
def mark_tile_starts(x: torch.Tensor) -> torch.Tensor:
    """A 1 at each tile's first element and a 2 at ``[tile_m.id, tile_n.id]``: in range."""
    out = torch.zeros_like(x, dtype=torch.int32)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m.begin, tile_n.begin] = 1
        out[tile_m.id, tile_n.id] = 2
    return out
