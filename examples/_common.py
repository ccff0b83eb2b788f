"""Helpers shared by the examples' ``main`` functions and by the example tests.

Not an example itself (the leading underscore keeps it out of the example list).
Examples import it lazily inside ``main`` so that loading an example by path has
no side effects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

import helion

# The Library object must stay alive for the registrations to stay in effect.
_ATEN_CPU_IMPLS: list[torch.library.Library] = []


def ref_mode_kernel(kernel: helion.Kernel) -> helion.Kernel:
    """Return a twin of ``kernel`` (same function, configs, settings) in eager reference mode.

    A kernel with ``ref_mode=EAGER`` binds without device IR, so the twin is a separate
    object and the original keeps producing device IR.
    """
    settings = dataclasses.replace(kernel.settings, ref_mode=helion.RefMode.EAGER)
    return helion.kernel(kernel.fn, configs=list(kernel.configs), settings=settings)


def _accumulate_dtype(out_dtype: torch.dtype) -> torch.dtype:
    if out_dtype.is_floating_point:
        return torch.float64 if out_dtype == torch.float64 else torch.float32
    return out_dtype


def _mm_dtype(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    acc = _accumulate_dtype(out_dtype)
    return torch.mm(a.to(acc), b.to(acc)).to(out_dtype)


def _bmm_dtype(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    acc = _accumulate_dtype(out_dtype)
    return torch.bmm(a.to(acc), b.to(acc)).to(out_dtype)


def _addmm_dtype(
    bias: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    out_dtype: torch.dtype,
    *,
    beta: float = 1,
    alpha: float = 1,
) -> torch.Tensor:
    acc = _accumulate_dtype(out_dtype)
    out = torch.addmm(bias.to(acc), a.to(acc), b.to(acc), beta=beta, alpha=alpha)
    return out.to(out_dtype)


def _baddbmm_dtype(
    bias: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    out_dtype: torch.dtype,
    *,
    beta: float = 1,
    alpha: float = 1,
) -> torch.Tensor:
    acc = _accumulate_dtype(out_dtype)
    out = torch.baddbmm(bias.to(acc), a.to(acc), b.to(acc), beta=beta, alpha=alpha)
    return out.to(out_dtype)


_DTYPE_OVERLOADS: dict[str, Callable[..., torch.Tensor]] = {
    "mm.dtype": _mm_dtype,
    "bmm.dtype": _bmm_dtype,
    "addmm.dtype": _addmm_dtype,
    "baddbmm.dtype": _baddbmm_dtype,
}


def register_cpu_matmul_dtype_overloads() -> None:
    """Give ``aten::{mm,bmm,addmm,baddbmm}.dtype`` a CPU kernel (torch ships none).

    Helion's reference mode computes every ``hl.dot`` / ``torch.addmm`` / ``torch.baddbmm``
    with ``out_dtype=...``; on CPU those overloads raise without this. The result is computed
    in float32 (float64 for float64, the integer type itself for integers) and cast to
    ``out_dtype``. Idempotent: an overload that already has a CPU kernel is left alone, even
    if it was registered by another copy of this module.
    """
    lib: torch.library.Library | None = None
    for overload, impl in _DTYPE_OVERLOADS.items():
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{overload}", "CPU"):
            continue
        if lib is None:
            lib = torch.library.Library("aten", "IMPL")
            _ATEN_CPU_IMPLS.append(lib)
        lib.impl(overload, impl, "CPU")


def run_example(
    name: str,
    kernel: helion.Kernel,
    make_args: Callable[..., tuple[Any, ...]],
    reference: Callable[..., Any],
    tolerance: dict[str, float],
) -> None:
    """Run ``kernel`` in reference mode on the example's inputs and compare with torch."""
    register_cpu_matmul_dtype_overloads()
    args = make_args()
    expected = reference(*_clone_args(args))
    result = ref_mode_kernel(kernel)(*args)
    torch.testing.assert_close(result, expected, **tolerance)
    shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
    print(f"{name}: inputs {shapes} -> result matches torch ({tolerance})")


def _clone_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
