"""Bias plus an activation chosen by name, then an optional clamp range given as a tuple.

``activation: str`` ("gelu", "silu" or anything else for relu) and ``approximate: str`` are
decided at bind time (Helion specializes on strings), ``bias: Tensor | None`` too; the
``clamp: tuple[float, float] | None`` bounds stay runtime floats: they are scalar
arguments of the emitted function (``%clamp_item_0``, ``%clamp_item_1``), read from the
tuple at each call. The example passes everything but ``x`` as keywords.
Exercises: keyword arguments, string options, a tuple of floats, ``torch.nn.functional.gelu``
and ``torch.sigmoid``.
"""

from __future__ import annotations

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[16, 64]))
def bias_activation(
    x: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str = "gelu",
    approximate: str = "none",
    clamp: tuple[float, float] | None = None,
) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty_like(x)
    for tile_r, tile_c in hl.tile([rows, cols]):
        h = x[tile_r, tile_c].to(torch.float32)
        if bias is not None:
            h = h + bias[tile_c][None, :].to(torch.float32)
        if activation == "gelu":
            h = torch.nn.functional.gelu(h, approximate=approximate)
        elif activation == "silu":
            h = h * torch.sigmoid(h)
        else:
            h = torch.relu(h)
        if clamp is not None:
            h = torch.clamp(h, clamp[0], clamp[1])
        out[tile_r, tile_c] = h.to(out.dtype)
    return out


KERNEL = bias_activation
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
SHAPES = {"divisible": (64, 256), "ragged": (37, 100)}


def make_args(shape: str = "divisible", dtype: torch.dtype | None = None) -> tuple:
    gen = torch.Generator().manual_seed(47)
    return ((2 * torch.randn(*SHAPES[shape], generator=gen)).to(dtype or torch.float32),)


def make_kwargs(shape: str = "divisible") -> dict:
    gen = torch.Generator().manual_seed(48)
    return {"bias": torch.randn(SHAPES[shape][1], generator=gen), "activation": "silu", "clamp": (-0.25, 3.0)}


def reference(x: torch.Tensor, bias: torch.Tensor | None = None, activation: str = "gelu",
              approximate: str = "none", clamp: tuple[float, float] | None = None) -> torch.Tensor:
    h = x.float() if bias is None else x.float() + bias.float()
    if activation == "gelu":
        h = torch.nn.functional.gelu(h, approximate=approximate)
    elif activation == "silu":
        h = torch.nn.functional.silu(h)
    else:
        h = torch.relu(h)
    return (h if clamp is None else h.clamp(*clamp)).to(x.dtype)


def main() -> None:
    from _common import run_example

    run_example("bias_activation", KERNEL, make_args, reference, TOLERANCE, make_kwargs)


if __name__ == "__main__":
    main()
