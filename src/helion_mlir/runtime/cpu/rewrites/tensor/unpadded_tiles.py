"""A tile of a static size smaller than its block is computed at its own size, not padded.

A ragged tile is computed on a full block: the lowering pads its loads (the partial slice
inserted into a filled block-sized tensor) and keeps the result's real lanes (an
``extract_slice`` of them, stored). Once :mod:`.tile_size_bounds` has peeled the last tile
off its loop, that tile's size is static (208 columns of a 256-column block), but the
padding stays: after bufferization each padded load is a ``memref.copy`` into a stack
buffer, which becomes a scalar loop over every element (``memref.copy`` lowers to loops
here), and the result is copied out the same way: ragged bias + GELU 4100x2000 in [16, 256]
tiles, where each row block ends in 208 columns, took 5.8-6.3 ms on one thread (1.9x Inductor),
and 3.6-4.1 ms computed unpadded (1.1-1.3x).

Upstream tiling does it: for each ``extract_slice`` of a static size of a linalg op's only
result, ``transform.structured.fuse_into_containing_op`` (TilingInterface's tile of a
result) computes the op on that slice only, its operands sliced in turn; a slice of a
padded load then folds to the partial slice itself (canonicalization of an extraction of
exactly what was inserted), and an op whose result is now sliced is tiled in the next round.
Reductions are tiled over the sliced output dims alone: a reduction over a padded dim still
reads its padding lanes, with the values they had (the neutral fill Helion's masking gives
them), so no lane changes value. Upstream's own pattern for this
(``linalg::populateBubbleUpExtractSliceOpPatterns``) is reachable only through a test pass.

Only slices in the same block as their producer are tiled: one in a loop over the producer's
result would compute it again per iteration.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_walk import defining_op, indexing_maps, ops_where
from ..transform_scripts import match_attribute, run_transform_script

__all__ = ["compute_static_tiles_unpadded"]

_SLICE = "helion_mlir.unpadded_slice"
_MAX_ROUNDS = 16  # each round tiles one more producer of each chain (a softmax has three)

_ROUND = f"""
%slices = {match_attribute(_SLICE)}
transform.foreach %slices : !transform.any_op {{
^bb0(%slice: !transform.any_op):
  transform.sequence %slice : !transform.any_op failures(suppress) {{
  ^bb1(%one: !transform.any_op):
    %producer = transform.get_producer_of_operand %one[0] : (!transform.any_op) -> !transform.any_op
    %block = transform.get_parent_op %one : (!transform.any_op) -> !transform.any_op
    %tiled, %in = transform.structured.fuse_into_containing_op %producer into %block
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
  }}
}}
transform.apply_patterns to %root {{
  transform.apply_patterns.canonicalization
  transform.apply_patterns.tensor.merge_consecutive_insert_extract_slice
  transform.apply_patterns.tensor.bubble_up_extract_slice
  transform.apply_patterns.tensor.fold_tensor_subset_ops
  transform.apply_patterns.tensor.fold_tensor_empty
}} : !transform.any_op
transform.apply_cse to %root : !transform.any_op
"""


def _smaller_static_slice(op: ir.Operation) -> bool:
    """Whether ``op`` takes a static-size, unit-stride slice, fewer elements than all, of the
    only result of a linalg op in its own block, whose lanes map to the op's loops."""
    if op.name != "tensor.extract_slice":
        return False
    producer = defining_op(op.operands[0])
    if producer is None or not producer.name.startswith("linalg.") or len(producer.results) != 1:
        return False
    if len(list(producer.results[0].uses)) != 1 or producer.parent != op.parent:
        return False
    if "indexing_maps" in producer.attributes and not indexing_maps(producer)[-1].is_projected_permutation:
        return False  # a keepdim reduction's (d0, 0): upstream tiles no result it cannot map back to loops
    source, result = op.operands[0].type, op.results[0].type
    if not (source.has_static_shape and result.has_static_shape) or result.rank != source.rank:
        return False
    if any(isinstance(v.type, ir.ShapedType) and 0 in v.type.shape for v in producer.operands):
        return False  # a dim of no element (a row of 0 columns): upstream's tiling crashes on it
    strides = ir.DenseI64ArrayAttr(op.attributes["static_strides"])
    return all(s == 1 for s in strides) and list(result.shape) != list(source.shape)


def compute_static_tiles_unpadded(module: ir.Module) -> int:
    """Compute each linalg op whose only use is a smaller static slice on that slice alone
    (and its producers in turn), see the module docstring; returns how many were tiled."""
    tiled = 0
    for _ in range(_MAX_ROUNDS):
        slices = ops_where(module, _smaller_static_slice)
        if not slices:
            break
        unit = ir.UnitAttr.get(module.context)
        for op in slices:
            op.attributes[_SLICE] = unit
        run_transform_script(module, _ROUND)
        left = ops_where(module, lambda op: _SLICE in op.attributes)
        for op in left:  # a producer the transform refused: its slice stays
            del op.attributes[_SLICE]
        tiled += len(slices) - len(left)
        if len(left) == len(slices):
            break
    return tiled
