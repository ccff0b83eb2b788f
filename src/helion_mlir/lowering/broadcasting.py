"""Helion's implicit broadcasting: an operand of lower rank lines up with the result by
tile, not by position.

torch aligns the dims of a lower-rank operand with the result's trailing dims. Helion's
type propagation gives a tile-shaped value the block of its tile in each dim (``b[tile0]`` is
``[block_0]``), and its code generators place each dim of a lower-rank operand of a
pointwise op (or of ``expand``) at the result's dim of the same block: in
``for t0, t1 in hl.tile(a.size()): a[t0, t1] + b[t0]``, ``b[t0]`` is read as
``b[t0][:, None]``, not as a row (Helion's ``TileDispatch.broadcast_expand_dims``). A dim
that is not a tile goes to the first free non-tile result dim of the same size, else to the
last free result dim; the operand's dims then take the chosen result dims in their own order.
:func:`helion_placement` is that rule; the ATen rule inserts the unit dims it implies before
torch-mlir broadcasts (``lower_aten_op``).

Where several result dims could take an operand dim (``x[t, :, :] + w`` with two trailing
dims of ``w``'s size, whole dims of one size sharing Helion's reduction block), Helion's
code generators take the first and its reference mode, as torch, the last: the lowering
takes torch's, logging a warning. An operand whose tiles are out of the result's order is
refused (:class:`~helion_mlir.errors.HelionMLIRError`): keeping the operand's order, Helion
would put a tile on another tile's dim.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..errors import HelionMLIRError

__all__ = ["helion_placement"]

log = logging.getLogger(__name__)


def helion_placement(env: Any, operand: Sequence[Any], result: Sequence[Any], where: str = "") -> list[int] | None:
    """The result dim each dim of ``operand`` lines up with under Helion's rule, when it
    differs from torch's trailing alignment; None when they agree (or the ranks are equal,
    or the operand is 0-d: then torch's rule is Helion's).

    ``env`` is Helion's compile environment (block ids of sizes, known equalities); the shapes
    are the sizes of the nodes' fake values; ``where`` names the node in a warning.
    """
    if not operand or len(operand) >= len(result):
        return None
    used: set[int] = set()
    chosen: list[int] = []
    for i, size in enumerate(operand):
        candidates = [d for d in range(len(result)) if d not in used and _same_dim(env, size, result[d])]
        trailing = len(result) - len(operand) + i
        if len(candidates) > 1 and trailing in candidates:
            match = trailing
            if candidates[0] != trailing:
                log.warning("%san operand of shape %s broadcast to %s: its dim of size %s could line up with result "
                            "dims %s; as torch and Helion's reference mode, with dim %s (Helion's code generators "
                            "take dim %s)", where, list(operand), list(result), size, candidates, trailing,
                            candidates[0])
        elif candidates:
            match = candidates[0]
        else:  # Helion's fallback: the last free dim
            match = max(d for d in range(len(result)) if d not in used)
        chosen.append(match)
        used.add(match)
    placement = sorted(chosen)  # Helion keeps the operand's order: its dims take the chosen dims in order
    for size, dim in zip(operand, placement):
        block = _block_of(env, size)
        if block is not None and _block_of(env, result[dim]) != block and not _known_equal(env, size, 1):
            raise HelionMLIRError(
                f"an operand of shape {list(operand)} broadcast to {list(result)}: Helion lines its dims up with "
                f"result dims {placement} in their order, which puts the tile of size {size} on the result's dim "
                f"{dim} ({result[dim]}); permute the operand to the result's order first"
            )
    trailing = list(range(len(result) - len(operand), len(result)))
    return None if placement == trailing else placement


def _same_dim(env: Any, size: Any, out: Any) -> bool:
    """Whether an operand dim of ``size`` may line up with a result dim of size ``out``: the
    same tile (block), or two dims that are no tile and known to be equal."""
    block = _block_of(env, size)
    if block is not None:
        return _block_of(env, out) == block
    return _block_of(env, out) is None and _known_equal(env, size, out)


def _block_of(env: Any, size: Any) -> int | None:
    block = env.resolve_block_id(size)
    return env.canonical_block_id(block) if block is not None else None


def _known_equal(env: Any, a: Any, b: Any) -> bool:
    try:
        return bool(env.known_equal(a, b))
    except (TypeError, ValueError):
        return False
