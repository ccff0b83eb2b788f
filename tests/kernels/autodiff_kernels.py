"""Forward kernels for tests/test_autodiff_on_cpu.py, written as users write them, whose
backward Helion's autodiff builds from a ``scan`` over the inner loop: a two-pass online
softmax and a matmul whose rows are then RMS-normalized."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(backend="mlir")
def softmax_two_pass(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    block_m = hl.register_block_size(m)
    block_n = hl.register_block_size(n)
    for tile_m in hl.tile(m, block_size=block_m):
        row_max = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        row_sum = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block_n):
            chunk = x[tile_m, tile_n]
            new_max = torch.maximum(row_max, torch.amax(chunk, dim=1))
            row_sum = row_sum * torch.exp(row_max - new_max) + torch.exp(chunk - new_max[:, None]).sum(dim=1)
            row_max = new_max
        for tile_n in hl.tile(n, block_size=block_n):
            out[tile_m, tile_n] = torch.exp(x[tile_m, tile_n] - row_max[:, None]) / row_sum[:, None]
    return out


@helion.kernel(backend="mlir")
def matmul_rms_norm(x: torch.Tensor, w: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = w.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, :])
        rms = torch.rsqrt(torch.mean(acc * acc, dim=-1, keepdim=True) + 1e-5)
        out[tile_m, :] = acc * rms * weight[None, :]
    return out


def matmul_rms_norm_reference(x: torch.Tensor, w: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    acc = x @ w
    return acc * torch.rsqrt((acc * acc).mean(-1, keepdim=True) + 1e-5) * weight
