"""Failed run-time checks return to the caller instead of aborting the process.

MLIR's ``generate-runtime-verification`` guards memref loads, stores, subviews, casts and
linalg ops with ``cf.assert``, whose message names the failing op's location; but
``convert-cf-to-llvm`` lowers a ``cf.assert`` to a print and a call of ``abort()`` (it has
no option to do otherwise), so a failed check would kill the Python process that called
the kernel. No upstream pass turns an assert into an early return, hence this rewrite:
once the function's body is one control-flow graph (after ``convert-scf-to-cf``), each
``cf.assert`` becomes a conditional branch to a block that calls :data:`CALLBACK` with
the check's number and returns poison values; the caller, told which check failed,
discards the results and raises. Buffers allocated before the failed check are not
freed (a leak on an error path only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, cf, func, ub

from ..ir_walk import ops_where

__all__ = ["CALLBACK", "Check", "return_on_failed_checks"]

#: The function a failed check calls with its number: declared with a C interface, so the
#: JIT resolves ``_mlir_ciface_<CALLBACK>``, which the caller registers with the engine.
CALLBACK = "helion_mlir_check_failed"

_FILE_LINE = re.compile(r'"([^"]+)":(\d+):\d+')


@dataclass(frozen=True)
class Check:
    """One run-time check: what it guards against and the source line of the op it guards."""

    description: str
    source_location: str | None  # "file:line"

    @classmethod
    def of(cls, message: str, location: ir.Location) -> "Check":
        # generate-runtime-verification words its messages "ERROR: ...\n^ <what>\nLocation: ...";
        # other asserts (shape constraints) are one line.
        what = next((line[2:] for line in message.splitlines() if line.startswith("^ ")), message)
        found = _FILE_LINE.search(str(location))
        return cls(what.strip(), f"{found.group(1)}:{found.group(2)}" if found else None)


def return_on_failed_checks(module: ir.Module, function: ir.OpView) -> tuple[Check, ...]:
    """Each ``cf.assert`` of ``function`` calls :data:`CALLBACK` and returns early when it
    fails; returns the checks by number. Fails on an assert anywhere else (another
    function, a nested region), which could not return from ``function``."""
    asserts = ops_where(module, lambda op: op.name == "cf.assert")
    for op in asserts:
        if op.parent.operation != function.operation:
            raise ValueError(f"a run-time check inside '{op.parent.name}' cannot return early: {op.location}")
    if not asserts:
        return ()
    results = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).results
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint.at_block_begin(module.body), ir.Location.unknown():
        callback = func.FuncOp(CALLBACK, ir.FunctionType.get([i64], []), visibility="private")
        callback.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    checks = []
    for number, op in enumerate(asserts):
        checks.append(Check.of(ir.StringAttr(op.attributes["msg"]).value, op.location))
        block = op.block
        after = list(block.operations)
        after = after[next(i for i, o in enumerate(after) if o.operation == op) + 1:]
        passed = block.create_after()
        for rest in after:
            passed.append(rest)
        failed = block.create_after()
        with ir.InsertionPoint(failed), op.location:
            func.CallOp([], ir.FlatSymbolRefAttr.get(CALLBACK), [arith.ConstantOp(i64, number).result])
            func.ReturnOp([ub.PoisonOp(t).result for t in results])
        with ir.InsertionPoint(op), op.location:
            cf.CondBranchOp(op.operands[0], [], [], passed, failed)
        op.erase()
    return tuple(checks)
