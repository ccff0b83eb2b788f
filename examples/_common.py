"""Helpers shared by the examples' ``main`` functions and by the example tests.

Not an example itself (the leading underscore keeps it out of the example list).
Examples import it lazily inside ``main`` so that loading an example by path has
no side effects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helion
import torch

# One implementation, shared with the tests and the CLI.
from helion_mlir.runtime.reference import reference_kernel as ref_mode_kernel
from helion_mlir.runtime.reference import register_cpu_matmul_dtype_overloads

__all__ = ["ref_mode_kernel", "register_cpu_matmul_dtype_overloads", "run_example"]


def run_example(
    name: str,
    kernel: helion.Kernel,
    make_args: Callable[..., tuple[Any, ...]],
    reference: Callable[..., Any],
    tolerance: dict[str, float],
    make_kwargs: Callable[..., dict[str, Any]] | None = None,
) -> None:
    """Run ``kernel`` in reference mode on the example's inputs (positional, plus the
    keywords of ``make_kwargs`` when the example has one) and compare with torch."""
    register_cpu_matmul_dtype_overloads()
    args = make_args()
    kwargs = make_kwargs() if make_kwargs is not None else {}
    expected = reference(*_clone_args(args), **kwargs)
    result = ref_mode_kernel(kernel)(*args, **kwargs)
    torch.testing.assert_close(result, expected, **tolerance)
    shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
    print(f"{name}: inputs {shapes} -> result matches torch ({tolerance})")


def _clone_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
