"""Reference results of Helion kernels on CPU.

Helion's eager reference mode runs a kernel's Python on CPU tensors, the ground truth the
compiled kernels are compared with (tests, ``helion-mlir run``, the examples' ``main``).
Two gaps are closed here: a ref-mode kernel binds without device IR, so the reference is
a twin kernel; and torch 2.13 has no CPU kernels for the ``*.dtype`` matmul overloads
that reference mode calls for every ``hl.dot``, ``torch.addmm`` and ``torch.baddbmm``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import helion
import torch

__all__ = ["reference_kernel", "register_cpu_matmul_dtype_overloads"]

_REFERENCE_KERNELS: dict[int, tuple[helion.Kernel, helion.Kernel]] = {}


def reference_kernel(kernel: helion.Kernel) -> helion.Kernel:
    """The twin of ``kernel`` in Helion's eager reference mode (cached per kernel).

    A kernel whose settings ask for ref mode binds without device IR, so the twin is a
    separate kernel and ``kernel`` itself still lowers.
    """
    cached = _REFERENCE_KERNELS.get(id(kernel))
    if cached is None or cached[0] is not kernel:
        settings = dataclasses.replace(kernel.settings, ref_mode=helion.RefMode.EAGER)
        cached = (kernel, helion.kernel(kernel.fn, configs=list(kernel.configs), settings=settings))
        _REFERENCE_KERNELS[id(kernel)] = cached
    return cached[1]


# Keeps the registrations alive: torch drops them with the Library object.
_CPU_LIBRARIES: list[torch.library.Library] = []


def _accumulating(op: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``op`` with its trailing ``out_dtype`` argument: computed in float32 (float64 for
    float64, the type itself for integers), then cast to ``out_dtype``."""

    def impl(*args: Any, **kwargs: Any) -> torch.Tensor:
        *tensors, out_dtype = args
        acc = out_dtype if not out_dtype.is_floating_point else (
            torch.float64 if out_dtype == torch.float64 else torch.float32
        )
        return op(*(t.to(acc) for t in tensors), **kwargs).to(out_dtype)

    return impl


def register_cpu_matmul_dtype_overloads() -> None:
    """CPU kernels for ``aten::{mm,bmm,addmm,baddbmm}.dtype``, which torch lacks on CPU.

    Helion's reference mode calls them for every ``hl.dot``, ``torch.addmm`` and
    ``torch.baddbmm``, so reference runs of matmul kernels fail on CPU without this.
    Idempotent, also alongside other registrations of the same overloads.
    """
    overloads = {"mm.dtype": torch.mm, "bmm.dtype": torch.bmm, "addmm.dtype": torch.addmm,
                 "baddbmm.dtype": torch.baddbmm}
    for overload, op in overloads.items():
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{overload}", "CPU"):
            continue
        if not _CPU_LIBRARIES:
            _CPU_LIBRARIES.append(torch.library.Library("aten", "IMPL"))
        _CPU_LIBRARIES[0].impl(overload, _accumulating(op), "CPU")
