"""The main job, end to end, on the examples in examples/.

1. One ATen node of a real kernel, imported through torch-mlir for every output type and
   inlined into a module of its own (the per-node importer and the SSA-renaming inliner).
2. The flash-attention example lowered to one verified module (printed).
3. The same kernel compiled to native code and run on CPU against the torch reference.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

import helion_mlir  # before any kernel is bound
from helion_mlir import MLIRBuilder, OutputType, generate_mlir, import_aten_node_to_mlir, inline_torch_mlir_output
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel
from helion_mlir.lowering.values import Tensor
from helion_mlir.lowering.aten_calls import vtensor_type
from helion_mlir.importer.normalize import node_inputs
from helion_mlir.inliner.lexer import strip_locations
from helion_mlir.mlir_context import mlir_session
from helion_mlir.verify import parse_module

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"helion_mlir_examples.{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _result_types(text: str) -> list[str]:
    """The result types of the function torch-mlir imported (the one with a body)."""
    with mlir_session():
        module = parse_module(text)
        function = next(op for op in module.body.operations if len(op.regions[0].blocks))
        return [str(t) for t in function.type.results]


def show_one_node(example: str, debug_info: bool) -> None:
    mod = load(example)
    bound = mod.KERNEL.bind(mod.make_args("ragged"))
    node = next(
        n for g in bound.host_function.device_ir.graphs for n in g.graph.nodes
        if n.op == "call_function" and str(n.target).startswith("aten.") and "sym_size" not in str(n.target)
    )
    print(f"== 1. node '{node.name}' ({node.target}) of examples/{example}.py, tile sizes 32x32, per output type")
    inputs = [torch.empty(32, 32, dtype=n.meta["val"].dtype, device="meta") for n in node_inputs(node)]
    for kind in OutputType:
        text = import_aten_node_to_mlir(node, output_type=kind, input_tensors=inputs)
        builder = MLIRBuilder()
        args = []
        for i, t in enumerate(inputs):
            builder.reserve(f"%in{i}")
            value = Tensor(f"%in{i}", tuple(t.shape), t.dtype)
            args.append(f"%in{i}: {vtensor_type(value) if kind is OutputType.RAW else value.type}")
        types = ", ".join(_result_types(text))
        with builder.block(f"func.func @{node.name}_{kind.value.replace('-', '_')}({', '.join(args)}) -> ({types}) {{"):
            results = inline_torch_mlir_output(text, [f"%in{i}" for i in range(len(inputs))], builder)
            builder.emit(f"return {', '.join(results)} : {types}")
        module = helion_mlir.verify_module_text(builder.render())
        print(f"-- {kind.value} (verified)\n{module if debug_info else strip_locations(module)}")


def show_kernel(example: str, output_type: str, debug_info: bool) -> None:
    mod = load(example)
    args = mod.make_args("ragged")
    started = time.perf_counter()
    text = generate_mlir(mod.KERNEL.bind(args), output_type=output_type, debug_info=debug_info)
    emitted = time.perf_counter() - started
    print(f"== 2. examples/{example}.py lowered to {output_type}: {len(text.splitlines())} lines, "
          f"emitted and verified in {emitted * 1e3:.0f} ms")
    print(text)
    compiled = compile_kernel(mod.KERNEL.bind(args), output_type=output_type)
    started = time.perf_counter()
    got = compiled(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    ran = time.perf_counter() - started
    expected = mod.reference(*args)
    error = (got.double() - expected.double()).abs().max().item()
    ok = torch.allclose(got.double(), expected.double(), **mod.TOLERANCE)
    print(f"== 3. ran on CPU in {ran * 1e3:.1f} ms (compiled in {compiled.compile_seconds * 1e3:.0f} ms): "
          f"max abs error vs torch {error:.2e} -> {'MATCH' if ok else 'MISMATCH'}")
    if not ok:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", default="attention", help="example kernel to lower and run (default: attention)")
    parser.add_argument("--node-example", default="layer_norm", help="example whose first ATen node step 1 shows")
    parser.add_argument("--output-type", default="linalg-on-tensors", choices=[t.value for t in OutputType])
    parser.add_argument("--debug-info", action="store_true",
                        help="print each op's source location, loc(...) (as MLIR's --mlir-print-debuginfo)")
    options = parser.parse_args()
    show_one_node(options.node_example, options.debug_info)
    show_kernel(options.example, options.output_type, options.debug_info)


if __name__ == "__main__":
    main()
