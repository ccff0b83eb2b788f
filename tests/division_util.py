"""Runner for tests/test_integer_division.py, as a script: a division that traps kills this
process, not pytest. ``python tests/division_util.py SETTING[,SETTING...]`` prints one JSON
line per setting and dtype: each call's outputs as a list, or its error's type and message."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from examples_util import load_example  # noqa: E402

import helion_mlir  # noqa: E402,F401  (prepares Helion before any kernel is bound)
from helion_mlir import compile_kernel  # noqa: E402

KERNELS_FILE = Path(__file__).resolve().parent / "kernels" / "division_kernels.py"
KERNELS = load_example(KERNELS_FILE)
#: (output type, pipeline, runtime, checked) by setting name.
SETTINGS: dict[str, tuple[str, str, str, bool]] = {
    **{f"{o}-{p}": (o, p, "jit", False) for o in ("raw", "linalg-on-tensors", "tosa", "stablehlo")
       for p in ("fast", "plain")},
    "checked": ("linalg-on-tensors", "plain", "jit", True),
    "iree": ("linalg-on-tensors", "fast", "iree", False),
}
DTYPES = {"int32": torch.int32, "int64": torch.int64}
#: int64 (INT64_MIN among the dividends) in the settings that share the module of every other,
#: to keep the run short; TOSA's int64 floor division casts to i32 on the way (a separate limitation).
INT64_SETTINGS = ("linalg-on-tensors-fast", "linalg-on-tensors-plain", "stablehlo-fast")
RUNS = [(s, d) for s in SETTINGS for d in DTYPES if d == "int32" or s in INT64_SETTINGS]


def arguments(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Dividends from negative to positive (and INT_MIN) over divisors that are 0, -1, and others."""
    a = torch.arange(-18, 18, dtype=dtype)
    a[0] = torch.iinfo(dtype).min
    b = torch.tensor([0, -1, 3, -4, 7, 0], dtype=dtype).repeat(6)
    return a, b


def _attempt(call: Callable[[], torch.Tensor]) -> Any:
    """The call's values as a list, or ``{"error": [type, message]}`` for a HelionMLIRError."""
    try:
        return call().tolist()
    except helion_mlir.HelionMLIRError as error:
        return {"error": [type(error).__name__, str(error)]}


def _run(setting: str, dtype_name: str) -> dict[str, Any]:
    output_type, pipeline, runtime, checked = SETTINGS[setting]
    a, b = arguments(DTYPES[dtype_name])
    options = {"output_type": output_type, "pipeline": pipeline, "runtime": runtime, "checked": checked}
    found: dict[str, Any] = {}
    try:
        nonzero = torch.where(b == 0, 5, b)  # 36 lanes in tiles of 16: the last tile's 12 padding lanes hold 0
        by_tensor = compile_kernel(KERNELS.by_tensor.bind((a, b)), **options)
        found["nonzero"] = _attempt(lambda: by_tensor(a, nonzero))
        found["by_tensor"] = _attempt(lambda: by_tensor(a, b))
        scalar = compile_kernel(KERNELS.by_scalar.bind((a, 3)), **options)
        found |= {f"by_scalar_{k}": _attempt(lambda k=k: scalar(a, k)) for k in (3, -1, 0)}
        if output_type == "linalg-on-tensors" and runtime == "jit":
            grid = compile_kernel(KERNELS.grid_by_scalar.bind((a, 3)), **options)
            found["grid_by_scalar"] = _attempt(lambda: grid(a, 3))
            found["grid_by_scalar_0"] = _attempt(lambda: grid(a, 0))
        if checked:
            last_zero = nonzero.clone()
            last_zero[-1] = 0  # the last real lane, in the partial last tile
            found["last_lane_zero"] = _attempt(lambda: by_tensor(a, last_zero))
            rows = a[:35].reshape(5, 7)  # tiles of 8 rows and 16 columns, both ragged
            columns = nonzero[:7]
            both = compile_kernel(KERNELS.rows_by_columns.bind((rows, columns)), **options)
            found["rows_by_columns"] = _attempt(lambda: both(rows, columns))
            last_column_zero = columns.clone()
            last_column_zero[-1] = 0
            found["rows_by_columns_zero"] = _attempt(lambda: both(rows, last_column_zero))
    except helion_mlir.HelionMLIRError as error:
        found["error"] = [type(error).__name__, str(error)]
    return found


if __name__ == "__main__":
    wanted = sys.argv[1].split(",")
    for setting, dtype_name in RUNS:
        if setting in wanted:
            print(json.dumps({"setting": setting, "dtype": dtype_name, "outcome": "started"}), flush=True)
            print(json.dumps({"setting": setting, "dtype": dtype_name, **_run(setting, dtype_name)}), flush=True)
