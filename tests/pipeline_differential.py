"""The fast and plain CPU pipelines on the same inputs: their results must agree (exactly
for integer and boolean tensors, within the example's tolerance for floats), arguments a
kernel writes included. Used by tests/test_pipeline_differential.py and
scripts/differential_pipelines.py."""

from __future__ import annotations

from typing import Any

import torch
from examples_util import bound_args, clone_args, clone_kwargs, dynamic_shapes_kernel, example_call

from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel


def _compare(fast: Any, plain: Any, tolerance: dict[str, float], where: str) -> None:
    if isinstance(plain, (tuple, list)):
        assert isinstance(fast, (tuple, list)) and len(fast) == len(plain), where
        for i, (f, p) in enumerate(zip(fast, plain)):
            _compare(f, p, tolerance, f"{where}[{i}]")
        return
    if not isinstance(plain, torch.Tensor):
        assert fast == plain, f"{where}: fast {fast!r}, plain {plain!r}"
        return
    exact = not (plain.is_floating_point() or plain.is_complex())
    if plain.dtype == getattr(torch, "float4_e2m1fn_x2", None):  # packed pairs: no arithmetic, compared bitwise
        fast, plain, exact = fast.view(torch.uint8), plain.view(torch.uint8), True
    elif not exact and plain.element_size() == 1:  # torch compares 8-bit floats bitwise only
        fast, plain = fast.float(), plain.float()
    torch.testing.assert_close(fast, plain, msg=lambda m: f"{where}: {m}", equal_nan=True,
                               **({"rtol": 0, "atol": 0} if exact else tolerance))


def assert_pipelines_agree(module: Any, name: str, shape: str, dynamic: bool) -> None:
    """Example ``name`` (its module ``module``) on its ``shape`` inputs, static or dynamic
    shapes, through both pipelines (the fast one on 2 threads): results and written
    arguments agree."""
    kernel = dynamic_shapes_kernel(name) if dynamic else module.KERNEL
    args, kwargs = example_call(module, shape)
    bound = kernel.bind(bound_args(kernel, args, kwargs))
    outputs = {}
    for pipeline, threads in (("fast", 2), ("plain", None)):
        compiled = compile_kernel(bound, pipeline=pipeline, threads=threads)
        call_args, call_kwargs = clone_args(args), clone_kwargs(kwargs)
        outputs[pipeline] = (compiled(*call_args, **call_kwargs), call_args, call_kwargs)
    tolerance = getattr(module, "TOLERANCE", {"rtol": 1e-5, "atol": 1e-5})
    where = f"{name} [{shape}, {'dynamic' if dynamic else 'static'}]"
    _compare(outputs["fast"][0], outputs["plain"][0], tolerance, f"{where} result")
    _compare(list(outputs["fast"][1]), list(outputs["plain"][1]), tolerance, f"{where} arguments")
