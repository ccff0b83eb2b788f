"""Unit dimensions of a device value: inserted (``tensor.expand_shape``), dropped
(``tensor.collapse_shape``), and a subscript of ``None`` and ``:`` entries. What the
rules of views, loads and stores, casts, reductions and broadcasts share."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import HelionMLIRError
from .emitter import Emitter
from .values import Tensor

__all__ = ["drop_unit_dims", "expand_dims", "subscript_value"]


def expand_dims(emit: Emitter, value: Tensor, new_axes: list[int]) -> Tensor:
    """Insert unit dimensions at the output positions ``new_axes``."""
    if not new_axes:
        return value
    out_rank = value.rank + len(new_axes)
    shape: list[int | None] = []
    source = iter(range(value.rank))
    groups: list[list[int]] = []
    pending: list[int] = []
    for pos in range(out_rank):
        if pos in new_axes:
            shape.append(1)
            pending.append(pos)
        else:
            src = next(source)
            shape.append(value.shape[src])
            groups.append(pending + [pos])
            pending = []
    if pending and groups:
        groups[-1].extend(pending)
    reassoc = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
    sizes = []
    for pos, size in enumerate(shape):
        if size is None:
            src = next(i for i, g in enumerate(groups) if pos in g)
            sizes.append(emit.dim(value, src).ssa)  # type: ignore[union-attr]
        else:
            sizes.append(str(size))
    result = Tensor(emit.fresh("expand"), tuple(shape), value.dtype)
    emit.op(f"{result.ssa} = tensor.expand_shape {value.ssa} {reassoc} output_shape [{', '.join(sizes)}] : {value.type} into {result.type}")
    return result


def drop_unit_dims(emit: Emitter, value: Tensor, axes: Sequence[int]) -> Tensor:
    """``value`` without its unit dimensions ``axes`` (the inverse of :func:`expand_dims`)."""
    if not axes:
        return value
    if any(value.shape[axis] != 1 for axis in axes):
        raise HelionMLIRError(f"dimensions {list(axes)} of a value of shape {value.shape} are not all of size 1")
    groups: list[list[int]] = []
    pending: list[int] = []
    for axis in range(value.rank):
        pending.append(axis)
        if axis not in axes:
            groups.append(pending)
            pending = []
    if pending and groups:
        groups[-1].extend(pending)
    reassoc = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
    result = Tensor(emit.fresh("collapse"), tuple(s for a, s in enumerate(value.shape) if a not in axes), value.dtype)
    emit.op(f"{result.ssa} = tensor.collapse_shape {value.ssa} {reassoc} : {value.type} into {result.type}")
    return result


def subscript_value(emit: Emitter, value: Tensor, index: list[object]) -> Tensor:
    """``value[index]`` for a device value and an index of ``None`` and ``:`` entries."""
    new_axes: list[int] = []
    for pos, entry in enumerate(index):
        if entry is None:
            new_axes.append(pos)
        elif not (isinstance(entry, slice) and entry == slice(None)):
            raise HelionMLIRError(f"index {entry!r} of a device value is not supported (only None and ':')")
    return expand_dims(emit, value, new_axes)
