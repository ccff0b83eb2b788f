"""Running emitted modules on CPU: the LLVM pipeline and ExecutionEngine (:mod:`.engine`),
Helion's host code with a launcher (:mod:`.host_code`), :class:`.compiled_kernel.CompiledKernel`
and the ``mlir`` Helion backend, plus reference-mode helpers."""
