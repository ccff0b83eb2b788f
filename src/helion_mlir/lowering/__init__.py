"""Lowering: a Helion kernel's device IR walked node by node into one MLIR function.

:class:`~.kernel_model.KernelModel` holds what the walk needs to know about the kernel
(arguments, block sizes, loops, rolled reductions) under a config
:func:`~.kernel_config.resolve_config` normalized as Helion does; :class:`~.visitor.IRVisitor` walks the
graphs and lowers every node with the rule :mod:`.registry` picks from :mod:`.rules`,
giving it a :class:`~.context.RuleContext`; :class:`~.kernel_state.KernelState` holds the
host tensors, tiles and symbols of the emission; :class:`~.emitter.Emitter` writes ops
into an :class:`~helion_mlir.inliner.builder.MLIRBuilder`; ATen nodes go through
:mod:`helion_mlir.importer` and are inlined by :mod:`helion_mlir.inliner` (see
:mod:`.deferred_inline`). Importing this package registers every rule.
"""

from . import rules  # noqa: F401  (registers every lowering rule, once)
