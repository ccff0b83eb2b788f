"""An ``hl.dot`` whose result has a whole dynamic dim (``static_shapes=False``), for
tests/test_dynamic_dot.py: attention without softmax, ``(q k^T) v`` over key tiles."""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 16]), static_shapes=False)
def scores_times_values(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    m, _d = q.shape
    n, dv = v.shape
    out = torch.empty([m, dv], dtype=q.dtype, device=q.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, dv], dtype=torch.float32)
        for tile_n in hl.tile(n):
            scores = hl.dot(q[tile_m, :], k[tile_n, :].T)
            acc = acc + hl.dot(scores, v[tile_n, :])
        out[tile_m, :] = acc.to(out.dtype)
    return out
