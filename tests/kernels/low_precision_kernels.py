"""Small kernels for tests/test_low_precision.py: dtype conversions, bit views, packed float4
tiles and float8 matmuls, written as a kernel author would."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[256]))
def convert(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``x.to(out.dtype)`` elementwise (a ``convert_element_type`` node)."""
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile].to(out.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def convert_rows(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``x.to(out.dtype)`` of whole rows: with dynamic shapes, a tile of dynamic width."""
    for tile in hl.tile(x.size(0)):
        out[tile, :] = x[tile, :].to(out.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[256]))
def store_converts(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The store converts to the destination's dtype (no node of its own)."""
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile]
    return out


@helion.kernel(config=helion.Config(block_sizes=[64]))
def bytes_of(x: torch.Tensor) -> torch.Tensor:
    """The bytes of an 8-bit float tensor, read in the kernel with ``.view(torch.uint8)``."""
    out = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile].view(torch.uint8)
    return out


@helion.kernel(config=helion.Config(block_sizes=[64]))
def float8_from_bytes(data: torch.Tensor) -> torch.Tensor:
    """Bytes read as float8_e4m3fn in the kernel, then widened to f32."""
    out = torch.empty(data.shape, dtype=torch.float32, device=data.device)
    for tile in hl.tile(data.size(0)):
        out[tile] = data[tile].view(torch.float8_e4m3fn).to(torch.float32)
    return out


@helion.kernel(config=helion.Config(block_sizes=[32]))
def unpack_float4(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both values of every float4_e2m1fn_x2 byte as f32."""
    low = torch.empty(packed.shape, dtype=torch.float32, device=packed.device)
    high = torch.empty(packed.shape, dtype=torch.float32, device=packed.device)
    for tile in hl.tile(packed.size(0)):
        low[tile], high[tile] = hl.float4_e2m1fn_x2_to_float32(packed[tile])
    return low, high


@helion.kernel(config=helion.Config(block_sizes=[8, 16]))
def replace_float4_rows(base: torch.Tensor, packed: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Rows of ``packed`` where ``keep`` is set replace those of ``base`` (in place): a masked
    load and a masked store of packed tiles (one mask entry per byte)."""
    for tile_r, tile_c in hl.tile(packed.size()):
        rows = hl.load(packed, [tile_r, tile_c], extra_mask=keep[tile_r, None])
        hl.store(base, [tile_r, tile_c], rows, extra_mask=keep[tile_r, None])
    return base


@helion.kernel(config=helion.Config(block_sizes=[32]))
def swap_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """Swaps the two values of every byte through its uint8 view."""
    out = torch.empty_like(packed)
    for tile in hl.tile(packed.size(0)):
        data = packed[tile].view(torch.uint8)
        out[tile] = ((data >> 4) | (data << 4)).view(torch.float4_e2m1fn_x2)
    return out


@helion.kernel(config=helion.Config(block_sizes=[16]))
def float4_clone(packed: torch.Tensor) -> torch.Tensor:
    """``clone`` of a packed tile goes to torch-mlir, which cannot represent it."""
    out = torch.empty_like(packed)
    for tile in hl.tile(packed.size(0)):
        out[tile] = packed[tile].clone()
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 16, 32]))
def float8_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.matmul`` of float8 tiles: a float8 result per K tile, summed in f32."""
    m, k = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.float32, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = acc + torch.matmul(a[tile_m, tile_k], b[tile_k, tile_n]).to(torch.float32)
        out[tile_m, tile_n] = acc
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 16]))
def float8_addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.addmm`` with a float8 bias and float8 operands over one K tile."""
    m, _ = a.size()
    n = b.size(1)
    out = torch.empty([m, n], dtype=torch.float8_e4m3fn, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_m, tile_n] = torch.addmm(bias[tile_m, tile_n], a[tile_m, :], b[:, tile_n])
    return out



@helion.kernel(config=helion.Config(block_sizes=[16]))
def float4_groups(storage: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """The 16 values of 8-byte group ``groups[i]`` of ``storage`` in row ``i``; a negative group
    is masked off (reads zeros)."""
    out = torch.empty([groups.size(0), 16], dtype=torch.float16, device=groups.device)
    for tile in hl.tile(groups.size(0)):
        index = groups[tile]
        lanes = hl.load_float4_e2m1fn_x16_to_float16(storage, index, extra_mask=index >= 0)
        for lane in hl.static_range(16):
            out[tile, lane] = lanes[lane]
    return out
