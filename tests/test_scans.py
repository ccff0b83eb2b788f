"""Scans inside tiles (``hl.cumsum``, ``hl.cumprod``, ``hl.associative_scan``), forward and
reverse, over tiles that do and do not divide the scanned dimension.

A scan along a tile runs over that tile's lanes only. On a ragged last tile the padding
lanes sit after the real ones: a forward scan reaches them last, a reverse scan must
start before them (a reverse product over zero padding would otherwise be zero). The
reference below scans each block of the scanned dimension with torch.
"""

from __future__ import annotations

import helion
import helion.language as hl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import helion_mlir  # noqa: F401  (prepares Helion; import before binding any kernel)
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel


def _running_max(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.maximum(a, b)


def _tile_scans(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    s, rs, p, rp, m, rm = (torch.empty_like(x) for _ in range(6))
    for tile_r, tile_c in hl.tile([x.size(0), x.size(1)]):
        block = x[tile_r, tile_c]
        s[tile_r, tile_c] = hl.cumsum(block, dim=1)
        rs[tile_r, tile_c] = hl.cumsum(block, dim=1, reverse=True)
        p[tile_r, tile_c] = hl.cumprod(block, dim=1)
        rp[tile_r, tile_c] = hl.cumprod(block, dim=1, reverse=True)
        m[tile_r, tile_c] = hl.associative_scan(_running_max, block, dim=1)
        rm[tile_r, tile_c] = hl.associative_scan(_running_max, block, dim=1, reverse=True)
    return s, rs, p, rp, m, rm


def _kernel(block_cols: int, static_shapes: bool) -> helion.Kernel:
    return helion.kernel(_tile_scans, config=helion.Config(block_sizes=[4, block_cols]), static_shapes=static_shapes)


def _blockwise_reference(x: torch.Tensor, block_cols: int) -> list[torch.Tensor]:
    def flipped(scan, block):  # type: ignore[no-untyped-def]
        return scan(block.flip(1)).flip(1)

    scans = [
        lambda b: b.cumsum(1), lambda b: flipped(lambda v: v.cumsum(1), b),
        lambda b: b.cumprod(1), lambda b: flipped(lambda v: v.cumprod(1), b),
        lambda b: b.cummax(1).values, lambda b: flipped(lambda v: v.cummax(1).values, b),
    ]
    outs = [torch.empty_like(x) for _ in scans]
    for start in range(0, x.size(1), block_cols):
        block = x[:, start:start + block_cols]
        for out, scan in zip(outs, scans):
            out[:, start:start + block_cols] = scan(block)
    return outs


NAMES = ["cumsum", "reverse cumsum", "cumprod", "reverse cumprod", "running max", "reverse running max"]


def _check(x: torch.Tensor, block_cols: int, static_shapes: bool, output_type: str) -> None:
    compiled = compile_kernel(_kernel(block_cols, static_shapes).bind((x,)), output_type=output_type)
    for name, got, want in zip(NAMES, compiled(x), _blockwise_reference(x, block_cols)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")


def _positive_rows(rows: int, cols: int, seed: int) -> torch.Tensor:
    """Values near 1 (products stay finite) whose last column is negative, so a scan that
    folds in padding or misses a lane changes the result."""
    x = torch.rand(rows, cols, generator=torch.Generator().manual_seed(seed)) + 0.5
    x[:, -1] = -2.0
    return x


@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "raw", "tosa", "stablehlo"])
@pytest.mark.parametrize("cols", [16, 13], ids=["divisible", "ragged"])
def test_scans_along_a_tile_skip_the_padding_of_a_ragged_last_tile(cols: int, output_type: str) -> None:
    _check(_positive_rows(9, cols, 0), 8, True, output_type)


def test_reverse_scans_along_a_ragged_tile_with_dynamic_shapes() -> None:
    _check(_positive_rows(7, 21, 1), 8, False, "linalg-on-tensors")


@settings(max_examples=8, deadline=None)
@given(cols=st.integers(1, 40), block_cols=st.sampled_from([1, 2, 4, 8, 16]), seed=st.integers(0, 2**16))
def test_tile_scans_match_torch_for_any_width_and_block(cols: int, block_cols: int, seed: int) -> None:
    _check(_positive_rows(5, cols, seed), block_cols, True, "linalg-on-tensors")
