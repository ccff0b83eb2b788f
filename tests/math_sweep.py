"""Unary f32 math functions over the float32 range: modules, inputs and ulp errors.

Shared by tests/test_vector_math.py (a dense sweep) and scripts/math_accuracy.py (every
float32). One module computes every function of :data:`UNARY` on the same input with one
multi-result ``linalg.generic``; errors are measured against float64 torch, whose functions
are correctly rounded to far below a float32 ulp.
"""

from __future__ import annotations

import math

import torch

# name -> (math op, float64 reference)
UNARY = {
    "exp": ("math.exp", torch.exp),
    "exp2": ("math.exp2", torch.exp2),
    "expm1": ("math.expm1", torch.expm1),
    "log": ("math.log", torch.log),
    "log1p": ("math.log1p", torch.log1p),
    "log2": ("math.log2", torch.log2),
    "tanh": ("math.tanh", torch.tanh),
    "erf": ("math.erf", torch.erf),
    "sin": ("math.sin", torch.sin),
    "cos": ("math.cos", torch.cos),
    "atan": ("math.atan", torch.atan),
    "sqrt": ("math.sqrt", torch.sqrt),
    "rsqrt": ("math.rsqrt", torch.rsqrt),
}

EDGE_CASES = [
    0.0, -0.0, math.inf, -math.inf, math.nan, 2.0**-149, -(2.0**-149), 2.0**-126, -(2.0**-126), 1e-30, -1e-30,
    3.4028234663852886e38, -3.4028234663852886e38, 1.0, -1.0, -0.9999999403953552, -1.0000001192092896, 0.5, 2.0,
    88.72283935546875, 88.8, -87.33654022216797, -103.9, -104.0, 3.9, 4.0, 9.0, 10.0, 1e4, 105615.0, 2.0**20,
    2.0**24, 1e30, -1e30, 1.5707963705062866, 3.1415927410125732, 6.2831854820251465, 1e-8, -1e-8,
]


def unary_module(n: int, names: list[str]) -> str:
    """``@unary`` computing each function of ``names`` on an ``n``-element input."""
    tensor = f"tensor<{n}xf32>"
    outs = ", ".join(f"%o{i}: {tensor}" for i in range(len(names)))
    body = "\n".join(f"    %r{i} = {UNARY[name][0]} %v : f32" for i, name in enumerate(names))
    yields = ", ".join(f"%r{i}" for i in range(len(names)))
    types = ", ".join([tensor] * len(names))
    maps = ", ".join(["#id"] * (len(names) + 1))
    return f"""
#id = affine_map<(d0) -> (d0)>
func.func @unary(%x: {tensor}, {outs}) -> ({types}) {{
  %r:{len(names)} = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
      ins(%x : {tensor}) outs({", ".join(f"%o{i}" for i in range(len(names)))} : {types}) {{
  ^bb0(%v: f32, {", ".join(f"%b{i}: f32" for i in range(len(names)))}):
{body}
    linalg.yield {yields} : {", ".join(["f32"] * len(names))}
  }} -> ({types})
  return {", ".join(f"%r#{i}" for i in range(len(names)))} : {types}
}}
"""


def float32_sweep(step: int, start: int = 0, stop: int = 1 << 32) -> torch.Tensor:
    """The float32 values whose bit patterns are ``start, start + step, ...`` below ``stop``
    (every sign, exponent and NaN payload when ``step`` is odd), then the edge cases."""
    bits = torch.arange(start, stop, step, dtype=torch.int64)
    values = (bits - (bits >= 1 << 31).long() * (1 << 32)).int().view(torch.float32)
    return torch.cat([values, torch.tensor(EDGE_CASES, dtype=torch.float32)])


def ulp_errors(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """|got - want| in float32 ulps of ``want`` (float64); 0 where both are the same NaN,
    infinity or zero, inf where one is NaN or infinite and the other is not."""
    got = got.double()
    rounded = want.float().double()  # +-inf where float32 overflows
    magnitude = torch.floor(torch.log2(want.abs().clamp_min(2.0**-126)))
    errors = (got - want).abs() / torch.exp2(magnitude - 23)
    same = (got == want) | (got.isnan() & want.isnan()) | (got.isinf() & (got == rounded))
    return torch.where(same, torch.zeros_like(errors), errors).nan_to_num(nan=math.inf)


def signs_of_zeros_kept(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Where the exact result is a zero, the result is a zero of the same sign."""
    zero = want == 0
    return bool(((got[zero] == 0) & (torch.signbit(got[zero]) == torch.signbit(want[zero].float()))).all())
