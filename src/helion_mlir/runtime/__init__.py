"""Running emitted modules: on the CPU through torch-mlir's ExecutionEngine (:mod:`.cpu`) or
through IREE (:mod:`.iree`), both as a :class:`.function.NativeFunction`; a compiled Helion
kernel with its host code (:mod:`.kernel`); which configs a CPU honours and which were tuned
(:mod:`.configs`); tuning (:mod:`.tuning`); the ``mlir`` Helion backend on top (:mod:`.backend`).
Each part imports only the parts below it (docs/architecture.md)."""
