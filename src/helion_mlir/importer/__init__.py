"""Import through torch-mlir: one ATen node at a time, or a kernel's nodes in one batch.

:mod:`.normalize` makes a Helion FX node importable (tensor metadata, fake values, tuple
outputs); :mod:`.node_importer` builds a minimal FX graph per node, imports it with
torch-mlir's ``FxImporter`` and runs one output type's pipeline; the op catalogue and the
support table measure which ops each output type takes. Nothing here knows Helion's loops.
"""
