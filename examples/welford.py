"""Per-row mean and (biased) variance with Welford's algorithm over column chunks.

Each chunk's count/mean/M2 is merged into the running statistics with the parallel
Welford update (Chan et al.), so the loop carries three values. The per-chunk count is
``tile_c.end - tile_c.begin``, which makes ragged last chunks exact.
Exercises: an inner loop with three loop-carried tensors, ``tile_begin``/``tile_end``,
SymInt arithmetic, ``_mask_to`` before sums, a tuple of two outputs.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[8, 32]))
def welford(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = x.size()
    mean_out = torch.empty([rows], dtype=torch.float32, device=x.device)
    var_out = torch.empty([rows], dtype=torch.float32, device=x.device)
    for tile_r in hl.tile(rows):
        count = hl.zeros([tile_r], dtype=torch.float32)
        mean = hl.zeros([tile_r], dtype=torch.float32)
        m2 = hl.zeros([tile_r], dtype=torch.float32)
        for tile_c in hl.tile(cols):
            chunk = x[tile_r, tile_c].to(torch.float32)
            chunk_n = (tile_c.end - tile_c.begin) * 1.0
            chunk_mean = torch.sum(chunk, dim=-1) / chunk_n
            in_range = (tile_c.index < cols)[None, :]
            dev = torch.where(in_range, chunk - chunk_mean[:, None], 0.0)
            chunk_m2 = torch.sum(dev * dev, dim=-1)
            total = count + chunk_n
            delta = chunk_mean - mean
            mean = mean + delta * (chunk_n / total)
            m2 = m2 + chunk_m2 + delta * delta * (count * chunk_n / total)
            count = total
        mean_out[tile_r] = mean
        var_out[tile_r] = m2 / count
    return mean_out, var_out


KERNEL = welford
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (32, 128), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(10)
    x = (torch.randn(*SHAPES[shape], generator=gen) * 3 + 5).to(dtype or torch.float32)
    return (x,)


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    var, mean = torch.var_mean(x.float(), dim=-1, correction=0)
    return mean, var


def main() -> None:
    from _common import run_example

    run_example("welford", KERNEL, make_args, reference, TOLERANCE)


if __name__ == "__main__":
    main()
