"""Measure which catalogued ATen/prims ops lower for each output type; write docs/op-support.md.

Run through ``scripts/op-support``. The tests recompute the table and compare it with the
document, so the document always states what the code does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UnsupportedNodeError
from ..output_type import OutputType
from .node_importer import (
    TorchMLIRLoweringError,
    TorchMLIRNodeImporter,
    clear_import_cache,
)
from .op_catalog import CATALOG, OpCase, dtype_name, iter_case_nodes

__all__ = ["OpSupport", "measure_op_support", "render_op_support", "table_cells", "main"]

MODES = ("static", "symbolic")
DOC_PATH = Path(__file__).resolve().parents[3] / "docs" / "op-support.md"


@dataclass(frozen=True)
class OpSupport:
    """Failures per (case name, output type): {(dtype name, mode): torch-mlir's summary}."""

    failures: dict[tuple[str, OutputType], dict[tuple[str, str], str]]


def _summary(err: UnsupportedNodeError) -> str:
    if isinstance(err, TorchMLIRLoweringError):
        return err.summary
    return err.reason.splitlines()[0]


def measure_op_support(output_types: Iterable[OutputType] = tuple(OutputType)) -> OpSupport:
    """Lower every catalogue case and dtype, with static and symbolic sizes, per output type.

    Each output type's nodes go through the batch path once (one pipeline run plus the
    runs that isolate failures); the per-node results then come from the cache. The
    cache is cleared first: which batch meets a failure decides the diagnostics quoted,
    so the table must not depend on what this process imported before.
    """
    clear_import_cache()
    output_types = tuple(output_types)
    failures: dict[tuple[str, OutputType], dict[tuple[str, str], str]] = {
        (case.name, ot): {} for case in CATALOG for ot in output_types
    }
    for mode in MODES:
        nodes = [(case, dtype, node) for _, case, dtype, node in iter_case_nodes(symbolic=mode == "symbolic")]
        for output_type in output_types:
            importer = TorchMLIRNodeImporter(output_type)
            try:
                importer.import_nodes([(node, None) for _, _, node in nodes])
            except UnsupportedNodeError:
                pass  # collected per node below, from the cache
            for case, dtype, node in nodes:
                try:
                    importer.import_node(node)
                except UnsupportedNodeError as err:
                    failures[(case.name, output_type)][(dtype_name(dtype), mode)] = _summary(err)
    return OpSupport(failures)


def _dtype_list(names: list[str], case: OpCase) -> str:
    if len(names) == len(case.dtypes):
        return "all dtypes"
    return ", ".join(names)


def table_cells(support: OpSupport, output_types: Iterable[OutputType] = tuple(OutputType)) -> tuple[
    dict[tuple[str, str], str], list[str]
]:
    """The cells {(case name, output type): text} and the reasons they cite as ``[n]``
    (1-based), both as written in the Markdown document."""
    notes: list[str] = []
    cells: dict[tuple[str, str], str] = {}
    for case in CATALOG:
        for output_type in output_types:
            failed = support.failures[(case.name, output_type)]
            if not failed:
                cells[(case.name, output_type.value)] = "yes"
                continue
            # Group the failing (dtype, mode) pairs by reason, then by mode.
            by_reason: dict[str, dict[str, list[str]]] = {}
            for dtype in case.dtypes:
                for mode in MODES:
                    reason = failed.get((dtype_name(dtype), mode))
                    if reason is not None:
                        by_reason.setdefault(reason, {}).setdefault(mode, []).append(dtype_name(dtype))
            parts = []
            for reason, modes in by_reason.items():
                if reason not in notes:
                    notes.append(reason)
                number = notes.index(reason) + 1
                if modes.get("static") == modes.get("symbolic"):
                    where = _dtype_list(modes["static"], case)
                else:
                    where = "; ".join(f"{_dtype_list(names, case)} {mode}" for mode, names in modes.items())
                parts.append(f"no: {where} [{number}]")
            cells[(case.name, output_type.value)] = "<br>".join(parts)
    return cells, [_escape(note) for note in notes]


def render_op_support(support: OpSupport) -> str:
    """docs/op-support.md for a measurement."""
    cells, notes = table_cells(support)
    columns = [ot.value for ot in OutputType]
    lines = [
        "# ATen and prims op support per output type",
        "",
        "Which device-IR targets of real Helion kernels (the census of Helion's example kernels)",
        "helion_mlir lowers through torch-mlir, per output type. Each target was lowered on",
        "representative inputs (`src/helion_mlir/importer/op_catalog.py`) for every dtype it takes",
        "among f32, bf16, f16, i32, i64 and bool (and the five float8 dtypes for `where`, `permute`,",
        "`view` and `clone`, which kernels apply to float8 tiles before converting them), once",
        "with static sizes and once with symbolic sizes",
        "(unbacked SymInts, as Helion's tile sizes are: dynamic dimensions in the IR, sizes in",
        "list arguments passed as scalar arguments). `yes` means every dtype lowered both ways;",
        "otherwise the cell names what failed (`static` / `symbolic`, or both when unqualified)",
        "and cites torch-mlir's message below. Targets torch-mlir lacks, and nodes it fails to",
        "lower, are retried through exact decompositions before counting as failures.",
        "",
        "The table is what torch-mlir does with each node as traced (integer `//`, `%` and `fmod`",
        "after their exact rewrites, docs/lowering.md). A kernel's lowering hands torch-mlir none",
        'of these forms (docs/lowering.md, "ATen forms rewritten before torch-mlir"): `prims.iota`,',
        "`aten.scalar_tensor` of a runtime scalar, `aten.mean.dim` with `dtype=` or over a dynamic",
        "dimension, `aten.var` / `aten.std` (and their `_mean` forms) except in raw output, and in",
        "tosa `prims.convert_element_type` of a tile with a dynamic dimension, so their failures",
        "below do not reach kernels.",
        "",
        "Dynamic shapes (`static_shapes=False`) per output type: every example emits, verifies and",
        "matches torch in linalg-on-tensors, tosa, stablehlo and raw. Tile shapes are static, so a",
        "`symbolic` failure above reaches a kernel only where a whole dynamic dimension reaches the",
        "op (`x[tile, :]` with dynamic columns): there tosa can refuse the ops marked `symbolic`",
        "above, and the bundled MLIR cannot execute stablehlo's `dynamic_reshape` (an `unsqueeze`",
        "of such a tile). The kernel gets an error",
        "naming the node (`TorchMLIRLoweringError`) or the op (`ExecutionError`), and",
        "linalg-on-tensors lowers and runs it. TOSA computes int64 `add`/`sub`/`mul` in 32 bits",
        "(docs/lowering.md). Through IREE, some dynamic-shape modules of stablehlo and tosa do not",
        "compile (docs/downstream.md).",
        "",
        "Regenerate with `scripts/op-support` after changing the importer or upgrading",
        "torch-mlir; `tests/test_op_support.py` fails while this file is out of date.",
        "",
        "| target | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for case in CATALOG:
        row = [f"`{case.name}`"] + [cells[(case.name, column)] for column in columns]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Reasons", ""]
    lines += [f"{number}. {reason}" for number, reason in enumerate(notes, start=1)]
    if not notes:
        lines.append("None: everything lowers.")
    lines += ["", *_BEYOND_TORCH_MLIR_SECTION, "", *_LOW_PRECISION_SECTION]
    return "\n".join(lines) + "\n"


# Forms the lowering itself decides, beyond torch-mlir's catalogue: dtypes, stack tensors and
# index forms (tests/test_unsigned_dtypes.py, test_unsupported_nodes.py, test_index_broadcasting.py).
_BEYOND_TORCH_MLIR_SECTION = (
    "## Unsigned dtypes",
    "",
    "`uint8`, `uint16`, `uint32` and `uint64` tensors are signless integers of their width; loads,",
    "stores, conversions and arg reductions read them unsigned. ATen ops on them go through",
    "torch-mlir, which imports `uint8` and `uint32` but neither `uint16` nor `uint64`: such an",
    "op (`a > b` of uint64 values) is refused naming the node, while loads and stores of uint64",
    "tensors (lists of `data_ptr()`s) lower.",
    "",
    "## Stack tensors",
    "",
    "Loads and stores through `hl.stacktensor_like(tensor, dev_ptrs)` are refused (an",
    "`UnsupportedNodeError` naming the node and line, saying why): a stack tensor addresses",
    "tensors through pointers read from `dev_ptrs` at run time, and the emitted function holds",
    "tensors as values (`tensor<...>` arguments and results), never memory at an address, so no",
    "operation of its ABI can read or write them. Pass the tensors as arguments, or `torch.stack`",
    "them on the host.",
    "",
    "## Index tensors that broadcast together",
    "",
    "Index tensors follow Helion's rule (`CompileEnvironment.should_broadcast_tensor_indexers`).",
    "Several 1-D index tensors in one subscript address the Cartesian product of their positions",
    "(`x[rows, cols]` with `rows`, `cols` of one dim each), each adding its own value dim. When",
    "one of several adjacent index tensors has more dims (`out[tile.index[:, None], cols[tile, :]]`),",
    "they broadcast together as in torch and add the dims of their broadcast shape once, where",
    "the first of them stands: loads, stores and atomics alike, lanes past a ragged tile masked",
    "and every position guarded as any index tensor's (outside the tensor a gather reads 0, a",
    "scatter or an atomic skips the lane, checked mode raises `OutOfBoundsAccessError`). Index",
    "tensors of several dims that are not adjacent (`x[a2d, :, b2d]`) are refused (an",
    "`UnsupportedNodeError` naming the node and line): Helion does not broadcast those together",
    "and keeps one block dim of each, which is neither torch's meaning nor a product.",
    "",
    "## Stores through `None`, one-element slices, padded values",
    "",
    "A store or an atomic through `None` (`x[None, :, j] = v`, `x[None, ..., i] = 1.0`,",
    "`hl.atomic_add(x, [tile, None, 1], v)`) updates the dims the other entries name (an",
    "atomic's old values keep the unit dims); a one-element slice stored at a scalar index",
    "(`x[i] = y[i:i + 1]`) drops its unit dim, as torch assigns it; a value or mask of a size",
    "Helion pads (`torch.full([3, 5], v)` on 4 x 8 lanes) stored through index tensors addresses",
    "the lanes the index tensors give (its first 3 x 5).",
)


# What the package lowers itself for float8 and packed float4 (tests/test_low_precision.py
# and the fp8_* / nvfp4_* / int4_gemm examples run it in every output type).
_LOW_PRECISION_SECTION = (
    "## Low-precision dtypes",
    "",
    "Kernels on float8 (`float8_e4m3fn`, `float8_e5m2`, `float8_e4m3fnuz`, `float8_e5m2fnuz`,",
    "`float8_e8m0fnu`), packed float4 (`float4_e2m1fn_x2`) and int4 packed in int8/uint8 lower",
    "to all four output types. The ops that carry these dtypes' meaning are lowered by",
    "helion_mlir itself, the same `linalg`/`arith` code in every output type (see",
    "docs/lowering.md, \"Low-precision dtypes\"):",
    "",
    "- `.to(dtype)` and stores to or from a float8 dtype: torch's rounding, saturation and NaN",
    "  rules (`prims.convert_element_type`, `aten._to_copy` involving float8);",
    "- `hl.dot`, and `torch.matmul` / `mm` / `bmm` / `addmm` / `baddbmm` of float8 tiles:",
    "  `linalg.matmul` accumulating in f32 (other dtypes go through torch-mlir as above);",
    "- `hl.float4_e2m1fn_x2_to_float32`, `hl.load_float4_e2m1fn_x16_to_float16`,",
    "  `hl.load_bfloat16_x16_to_float16`; `x.view(dtype)` between dtypes of one width, and",
    "  between `float4_e2m1fn_x2` and bytes;",
    "- int4 packed in int8/uint8 needs only integer ops (`&`, `>>`, `<<`, `where`), rows above.",
    "",
    "Other ATen ops on float8 values go through torch-mlir (rows above); on CPU their",
    "arithmetic runs in f32 with one rounding per op. Packed float4 values cannot go through",
    "torch-mlir (it imports a tensor of N packed bytes as N values): such a node is rejected",
    "with an error naming it. One numeric difference is known: tosa divides by multiplying",
    "with a reciprocal, one f32 ulp off, which can move a quantized value by one float8 step",
    "(the `fp8_quantize` example).",
)


def _escape(text: str) -> str:
    """A reason as a Markdown list item: no table pipes, no raw angle brackets."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DOC_PATH, help="where to write the table")
    args = parser.parse_args(argv)
    text = render_op_support(measure_op_support())
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
