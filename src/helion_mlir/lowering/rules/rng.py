"""Helion's random numbers: the per-launch seeds of ``torch.rand_like`` and its kin.

Helion rewrites every random op of a kernel (``hl.rand``, ``hl.randint``, ``hl.rand4x``,
``torch.rand``/``randn``/``rand_like``/``randn_like``) into its Philox generator as ATen
integer ops before the device IR reaches the lowering; those go through torch-mlir
(``aten.neg`` of integers through :mod:`.aten_rewrites`). What is left is where the seed of
an op without an explicit ``seed=`` comes from: ``_rng_seed(i)``, slot ``i`` of an int64
buffer Helion's host code draws from torch's generator at each call. The buffer is an
argument of the emitted function (``KernelModel.rng_seed_buffer``, docs/abi.md).
"""

from __future__ import annotations

import torch
from helion.language import random_ops
from torch import fx

from ...errors import HelionMLIRError
from ..context import RuleContext
from ..registry import register_lowering
from ..values import HostRef, Tensor


@register_lowering(random_ops._rng_seed)
def lower_rng_seed(ctx: RuleContext, node: fx.Node) -> Tensor:
    """``_rng_seed(i)``: element ``i`` of the seed buffer, as the 0-d int64 tensor Helion traces."""
    name = ctx.model.rng_seed_buffer
    index = node.args[0]
    if name is None or not isinstance(index, int):  # the model counts the literal slots of these nodes
        raise HelionMLIRError(f"seed slot {index!r} is not a literal slot of the kernel's seed buffer")
    seeds = ctx.value(HostRef(name))
    seed = Tensor(ctx.emit.fresh("seed"), (), torch.int64)
    ctx.emit.op(f"{seed.ssa} = tensor.extract_slice {seeds.ssa}[{index}] [1] [1] : {seeds.type} to {seed.type}")
    return seed
