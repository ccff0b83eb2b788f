"""Results written into the caller's tensors (``in_place``): the destination arguments.

An emitted kernel function takes its output tensors as arguments and returns their final
values, computed from them in destination-passing style. With ``in_place`` the fast
pipeline lets bufferization write those arguments instead of new buffers, in three steps:

1. :func:`destinations` finds, per result, the argument it is computed in, and
   :func:`mark_writable` gives those arguments ``bufferization.writable = true`` (the
   upstream way of telling one-shot bufferization that a function may write an argument).
2. Before bufferization, :func:`store_results_in_destinations` stores a result that is no
   longer computed in its argument (canonicalization may have replaced an init whose
   contents an op does not read by an empty tensor) into it, so that it is computed there.
3. After bufferization, :func:`drop_argument_results` stops returning the results that are
   now their argument's buffer, and says which argument holds each.

Step 3 stands in for upstream's ``drop-equivalent-buffer-results``, which drops every
result equivalent to any argument: read-only ones too, such as the unpacked copy a packed
float4 argument crosses the boundary as, which must never be taken for the caller's
tensor. The caller also needs the result-to-argument map, which the pass does not give.
"""

from __future__ import annotations

from torch_mlir import ir

from .destination_style import computed_in, replace_terminator, store_full

__all__ = ["destinations", "drop_argument_results", "mark_writable", "store_results_in_destinations"]


def destinations(func: ir.OpView) -> dict[int, int]:
    """Result -> the argument whose final value it is (computed from it in destination style)."""
    block = func.regions[0].blocks[0]
    returned = list(list(block.operations)[-1].operands)
    found = {}
    for result, value in enumerate(returned):
        for index, arg in enumerate(block.arguments):
            if computed_in(value, arg) and index not in found.values():
                found[result] = index
                break
    return found


def mark_writable(func: ir.OpView, arguments: set[int]) -> None:
    """Let bufferization write ``arguments`` in place (``bufferization.writable = true``)."""
    attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"]))
    updated = []
    for index, dictionary in enumerate(attrs):
        entries = {named.name: named.attr for named in ir.DictAttr(dictionary)}
        if index in arguments:
            entries["bufferization.writable"] = ir.BoolAttr.get(True)
        updated.append(ir.DictAttr.get(entries))
    func.attributes["arg_attrs"] = ir.ArrayAttr.get(updated)


def store_results_in_destinations(func: ir.OpView, destination: dict[int, int]) -> int:
    """A returned value no longer computed in its destination argument gets a final store
    into it, so that bufferization computes it there; returns how many."""
    block = func.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    returned = list(terminator.operands)
    stored = 0
    for result, index in destination.items():
        arg = block.arguments[index]
        if arg.type.has_static_shape and not computed_in(returned[result], arg) and returned[result].type == arg.type:
            returned[result] = store_full(returned[result], arg, terminator)
            stored += 1
    if stored:
        replace_terminator(terminator, returned)
    return stored


def drop_argument_results(func: ir.OpView, writable: set[int]) -> tuple[int | None, ...]:
    """After bufferization: stop returning results that are a writable argument's buffer.

    Returns, per original result, the argument that holds it, or None if still returned.
    """
    block = func.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    held: list[int | None] = []
    for value in terminator.operands:
        owner = value.owner
        held.append(value.arg_number if isinstance(owner, ir.Block) and value.arg_number in writable else None)
    kept = [v for v, arg in zip(terminator.operands, held) if arg is None]
    replace_terminator(terminator, kept)
    function_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(function_type.inputs), [v.type for v in kept])
    )
    return tuple(held)
