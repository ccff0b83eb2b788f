"""Indexing forms whose lanes broadcast, as Helion computes them (numbers vs torch):

- a tile over a host dim of size 1 reads that one element at every lane (``bias[t0, t1]`` of
  a ``[1, n]`` bias), lanes past the tile's extent padding;
- index tensors of several dims broadcast together, adding their broadcast shape's dims
  once (``out[tile.index[:, None], cols[tile, :]] = v``, gathers and atomics alike), lanes
  past a ragged tile masked;
- a store or an atomic through ``None`` (``x[None, :, j] = v``) addresses the dims the other
  entries name;
- a one-element slice stored at a scalar index (``x[i] = y[i:i + 1]``) drops its unit dim;
- a value and mask of a size Helion pads (``torch.full([3, 5], v)`` on 4 x 8 lanes) stored
  through 1-D index tensors address their Cartesian product.
"""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch
from config_fuzz import random_configs

from helion_mlir import compile_kernel


@helion.kernel(static_shapes=True)
def add_row_and_column_biases(x: torch.Tensor, row: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(x.size()):
        out[tile_m, tile_n] = x[tile_m, tile_n] + row[tile_m, tile_n] * column[tile_m, tile_n]
    return out


@helion.kernel(static_shapes=False)
def scatter_rows_by_columns(values: torch.Tensor, columns: torch.Tensor, width: int) -> torch.Tensor:
    out = values.new_zeros(values.size(0), width)
    for tile in hl.tile(values.size(0)):
        out[tile.index[:, None], columns[tile, :]] = values[tile, :]
    return out


@helion.kernel(static_shapes=True)
def gather_rows_by_columns(values: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    out = values.new_empty(columns.size())
    for tile in hl.tile(columns.size(0)):
        out[tile, :] = values[tile.index[:, None], columns[tile, :]]
    return out


@helion.kernel(static_shapes=True)
def count_columns_of_each_row(columns: torch.Tensor, weights: torch.Tensor, width: int) -> torch.Tensor:
    out = weights.new_zeros(columns.size(0), width)
    for tile in hl.tile(columns.size(0)):
        hl.atomic_add(out, [tile.index[:, None], columns[tile, :]], weights[tile, :])
    return out


@helion.kernel(static_shapes=True)
def fill_columns_with_their_index(x: torch.Tensor) -> torch.Tensor:
    for j in hl.grid(x.size(1)):
        x[None, :, j] = j * 1.0
    return x


@helion.kernel(static_shapes=True)
def add_into_a_column_keeping_the_old_values(x: torch.Tensor, v: torch.Tensor,
                                             old: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    for tile in hl.tile(v.size(0)):
        before = hl.atomic_add(x, [tile, None, 1], v[tile, None])
        old[tile, None] = before
    return x, old


@helion.kernel(static_shapes=True)
def copy_shifted_left(src: torch.Tensor, dst: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    for i in hl.grid(src.size(0) - 1):
        dst[i:i + 1] = src[i + 1] * 3.0
        src[i] = dst[i:i + 1]
    return src, dst


@helion.kernel(static_shapes=True)
def label_rows_of_each_group(starts: torch.Tensor, rows: int, width: int) -> torch.Tensor:
    out = torch.zeros(rows, width, dtype=torch.float32, device=starts.device)
    for g in hl.grid(starts.size(0) - 1):
        row = starts[g] + hl.arange(3)
        column = hl.arange(5)
        mask = (row < starts[g + 1])[:, None] & (column < width)[None, :]
        hl.store(out, [row, column], torch.full([3, 5], 1.0, device=out.device) * (g + 1), extra_mask=mask)
    return out


@pytest.mark.parametrize(("shape", "block_sizes"), [((6, 12), [4, 8]), ((8, 16), [4, 8])])
def test_tiles_over_unit_dims_read_the_one_element_at_every_lane(shape: tuple[int, int],
                                                                  block_sizes: list[int]) -> None:
    m, n = shape
    x, row, column = torch.randn(m, n), torch.randn(1, n), torch.randn(m, 1)
    bound = add_row_and_column_biases.bind((x, row, column))
    result = compile_kernel(bound, config=helion.Config(block_sizes=block_sizes))(x, row, column)
    torch.testing.assert_close(result, x + row * column)


@pytest.mark.parametrize("block", [2, 4])
def test_index_tensors_of_two_dims_broadcast_together_in_a_scatter(block: int) -> None:
    values = torch.randn(5, 4)
    columns = torch.stack([torch.randperm(7)[:4] for _ in range(5)])
    expected = torch.zeros(5, 7).scatter(1, columns, values)
    bound = scatter_rows_by_columns.bind((values, columns, 7))
    result = compile_kernel(bound, config=helion.Config(block_sizes=[block]))(values, columns, 7)
    torch.testing.assert_close(result, expected)


def test_index_tensors_of_two_dims_broadcast_together_in_a_gather_under_helions_configs() -> None:
    values, columns = torch.randn(5, 7), torch.randint(0, 7, (5, 3))
    bound = gather_rows_by_columns.bind((values, columns))
    for config in random_configs(bound, seed=3, count=3):
        result = compile_kernel(bound, config=config)(values, columns)
        torch.testing.assert_close(result, values.gather(1, columns), msg=lambda m, c=config: f"{c}: {m}")


def test_an_atomic_add_through_index_tensors_broadcast_together_accumulates_repeated_columns() -> None:
    columns = torch.tensor([[0, 2, 2, 5], [1, 1, 1, 1], [4, 3, 2, 0], [5, 0, 5, 0], [6, 6, 2, 3]])
    weights = torch.randn(5, 4)
    expected = torch.zeros(5, 7).scatter_add(1, columns, weights)
    bound = count_columns_of_each_row.bind((columns, weights, 7))
    result = compile_kernel(bound, config=helion.Config(block_sizes=[4]))(columns, weights, 7)
    torch.testing.assert_close(result, expected)


def test_a_store_through_none_writes_the_dims_the_other_entries_name() -> None:
    x = torch.zeros(3, 5)
    result = compile_kernel(fill_columns_with_their_index.bind((x.clone(),)))(x.clone())
    torch.testing.assert_close(result, torch.arange(5.0).expand(3, 5))


def test_an_atomic_through_none_updates_the_dims_the_other_entries_name_and_returns_the_old_values() -> None:
    x, v = torch.randn(6, 3), torch.randn(6)
    want_x = x.clone()
    want_x[:, 1] += v
    args = (x.clone(), v, torch.zeros(6))
    bound = add_into_a_column_keeping_the_old_values.bind(args)
    got_x, got_old = compile_kernel(bound, config=helion.Config(block_sizes=[4]))(*args)
    torch.testing.assert_close(got_x, want_x)
    torch.testing.assert_close(got_old, x[:, 1])


def test_a_one_element_slice_stored_at_a_scalar_index_drops_its_unit_dim() -> None:
    src, dst = torch.randn(9), torch.zeros(9)
    want_dst = torch.cat([src[1:] * 3.0, torch.zeros(1)])
    want_src = torch.cat([want_dst[:-1], src[-1:]])
    result_src, result_dst = compile_kernel(copy_shifted_left.bind((src.clone(), dst.clone())))(src.clone(), dst.clone())
    torch.testing.assert_close(result_dst, want_dst)
    torch.testing.assert_close(result_src, want_src)


def test_a_padded_value_and_mask_stored_through_index_tensors_address_their_product() -> None:
    starts = torch.tensor([0, 2, 5, 6], dtype=torch.int32)
    expected = torch.zeros(6, 4)
    for g in range(3):
        expected[int(starts[g]):int(starts[g + 1])] = g + 1
    result = compile_kernel(label_rows_of_each_group.bind((starts, 6, 4)))(starts, 6, 4)
    torch.testing.assert_close(result, expected)
