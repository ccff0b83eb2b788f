"""Integers converted to bfloat16 as torch converts them, in a form every CPU compiles.

torch builds a ``BFloat16`` from a ``float``: an integer becomes float32 first, then is
rounded to bfloat16 (to nearest, ties to even), two roundings for integers wider than 24
bits. A direct ``arith.sitofp %x : i16 to bf16``, as torch-mlir emits it, has no
instruction on x86 CPUs without AVX512-BF16: LLVM calls compiler-rt's ``__truncsfbf2``,
which IREE's embedded linker does not have (``undefined symbol: __truncsfbf2``). Written as
``sitofp`` to f32 followed by ``arith.truncf``, it does not survive either: MLIR's
canonicalizer folds ``truncf(sitofp x)`` back into one ``sitofp``, and IREE canonicalizes
after its own bfloat16 expansion. So the f32 -> bf16 step is spelled as integer code on the
float's bits (:func:`bf16_from_f32_lines`; no NaN or infinity can come from an integer),
which no canonicalization turns back into a float conversion.

The emitter converts with it (:func:`helion_mlir.lowering.emitter.scalar_convert_op`), and
:func:`convert_integers_to_bf16_through_bits` rewrites the conversions in torch-mlir's
linalg output (an op whose integer operand torch promotes, ``bf16_tile * int_tile``).
stablehlo's and tosa's own conversions are left as torch-mlir emits them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from torch_mlir import ir

__all__ = ["bf16_from_f32_lines", "convert_integers_to_bf16_through_bits"]


def bf16_from_f32_lines(value: str, fresh: Callable[[], str]) -> tuple[list[str], str]:
    """Lines rounding the finite f32 ``value`` to bf16 (to nearest, ties to even) with
    integer ops on its bits; the SSA name of the result."""
    bits, c16, c1, bias, high, lsb, half, rounded, kept, narrow, out = (fresh() for _ in range(11))
    return [
        f"{bits} = arith.bitcast {value} : f32 to i32",
        f"{c16} = arith.constant 16 : i32",
        f"{c1} = arith.constant 1 : i32",
        f"{bias} = arith.constant 32767 : i32",
        f"{high} = arith.shrui {bits}, {c16} : i32",
        f"{lsb} = arith.andi {high}, {c1} : i32",
        f"{half} = arith.addi {bias}, {lsb} : i32",
        f"{rounded} = arith.addi {bits}, {half} : i32",
        f"{kept} = arith.shrui {rounded}, {c16} : i32",
        f"{narrow} = arith.trunci {kept} : i32 to i16",
        f"{out} = arith.bitcast {narrow} : i16 to bf16",
    ], out


def _template() -> ir.Module:
    """``bf16_from_f32_lines`` as the body of a function of one f32 argument."""
    counter = itertools.count()
    lines, result = bf16_from_f32_lines("%x", lambda: f"%t{next(counter)}")
    body = "\n".join(lines)
    return ir.Module.parse(f"func.func @round(%x: f32) -> bf16 {{\n{body}\nreturn {result} : bf16\n}}")


def _is_integer_to_bf16(op: ir.Operation) -> bool:
    return (op.name in ("arith.sitofp", "arith.uitofp") and isinstance(op.operands[0].type, ir.IntegerType)
            and isinstance(op.results[0].type, ir.BF16Type))


def convert_integers_to_bf16_through_bits(module: ir.Operation) -> None:
    """Each scalar ``arith.sitofp`` / ``arith.uitofp`` to bf16 becomes the same conversion
    to f32, then :func:`bf16_from_f32_lines`."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _is_integer_to_bf16(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    if not found:
        return
    template = _template()  # kept alive while its ops are read
    block = template.body.operations[0].regions[0].blocks[0]
    *steps, returned = [step.operation for step in block.operations]
    for op in found:
        with ir.InsertionPoint(op), op.location:
            wide = ir.Operation.create(op.name, results=[ir.F32Type.get()], operands=[op.operands[0]]).result
            mapped = {block.arguments[0]: wide}
            for step in steps:
                copy = ir.Operation.create(step.name, results=[r.type for r in step.results],
                                           operands=[mapped[o] for o in step.operands],
                                           attributes={name: step.attributes[name] for name in step.attributes})
                mapped[step.result] = copy.result
        op.results[0].replace_all_uses_with(mapped[returned.operands[0]])
        op.erase()
