"""Reference results of Helion kernels on CPU.

Helion's eager reference mode runs a kernel's Python on CPU tensors, the ground truth the
compiled kernels are compared with (tests, ``helion-mlir run``, the examples' ``main``).
Three gaps are closed here: a ref-mode kernel binds without device IR, so the reference
is a twin kernel; torch 2.13 has no CPU kernels for the ``*.dtype`` matmul overloads that
reference mode calls for every ``hl.dot``, ``torch.addmm`` and ``torch.baddbmm``; and
Helion's quantized ops (``hl.float4_e2m1fn_x2_to_float32`` and the 16-lane group loads)
have no reference-mode implementation.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import helion
import torch
from helion.language import _decorators, quantized_ops

__all__ = ["reference_kernel", "register_cpu_matmul_dtype_overloads", "register_quantized_op_references"]

_REFERENCE_KERNELS: dict[int, tuple[helion.Kernel, helion.Kernel]] = {}
# Registrations check, then register: two threads must not both find a kernel missing.
_REGISTERING = threading.Lock()


def reference_kernel(kernel: helion.Kernel) -> helion.Kernel:
    """The twin of ``kernel`` in Helion's eager reference mode (cached per kernel).

    A kernel whose settings ask for ref mode binds without device IR, so the twin is a
    separate kernel and ``kernel`` itself still lowers.
    """
    register_quantized_op_references()
    with _REGISTERING:
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
    with _REGISTERING:
        for overload, op in overloads.items():
            if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{overload}", "CPU"):
                continue
            if not _CPU_LIBRARIES:
                _CPU_LIBRARIES.append(torch.library.Library("aten", "IMPL"))
            _CPU_LIBRARIES[0].impl(overload, _accumulating(op), "CPU")


# The e2m1 values of the codes 0..7 (2 exponent bits of bias 1, 1 mantissa bit);
# codes 8..15 are their negatives.
_E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _e2m1(codes: torch.Tensor) -> torch.Tensor:
    table = torch.tensor(_E2M1_MAGNITUDES + tuple(-m for m in _E2M1_MAGNITUDES), device=codes.device)
    return table[codes.long()]


def _float4_pairs_to_float32(value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    data = value.view(torch.uint8)
    return _e2m1(data & 0xF), _e2m1(data >> 4)


def _groups(storage: torch.Tensor, offsets: torch.Tensor, width: int) -> torch.Tensor:
    """Group ``offsets`` of ``width`` elements of the flattened storage (offsets clamped)."""
    flat = storage.reshape(-1)
    groups = flat.view(flat.numel() // width, width)
    return groups[offsets.long().clamp(0, groups.size(0) - 1)]


def _lanes(values: torch.Tensor, extra_mask: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    if extra_mask is not None:  # the GPU code loads a zero word for a masked group
        values = torch.where(extra_mask[..., None], values, torch.zeros((), dtype=values.dtype))
    return tuple(values.unbind(-1))


def _load_float4_x16(storage: torch.Tensor, group_offsets: torch.Tensor,
                     extra_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    data = _groups(storage.view(torch.uint8), group_offsets, 8)  # [..., 8] bytes
    values = torch.stack(_float4_pairs_to_float32(data), dim=-1).flatten(-2)  # byte j: values 2j, 2j+1
    return _lanes(values.to(torch.float16), extra_mask)


def _load_bfloat16_x16(storage: torch.Tensor, group_offsets: torch.Tensor,
                       extra_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    return _lanes(_groups(storage, group_offsets, 16).to(torch.float16), extra_mask)


_QUANTIZED_REFERENCES = {
    quantized_ops.float4_e2m1fn_x2_to_float32: _float4_pairs_to_float32,
    quantized_ops.load_float4_e2m1fn_x16_to_float16: _load_float4_x16,
    quantized_ops.load_bfloat16_x16_to_float16: _load_bfloat16_x16,
}


def register_quantized_op_references() -> None:
    """Give Helion's quantized ops a reference-mode implementation where Helion has none
    (idempotent; a later Helion's own implementation is left in place)."""
    with _REGISTERING:
        for op, implementation in _QUANTIZED_REFERENCES.items():
            if op._ref_fn is None:
                _decorators.ref(op)(implementation)
