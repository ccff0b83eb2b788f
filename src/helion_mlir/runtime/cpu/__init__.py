"""Running a module on the CPU through torch-mlir's ExecutionEngine: the pipelines to LLVM
(:mod:`.pipelines`), the package's own rewrites grouped by the stage they run at
(:mod:`.rewrites`), the JIT and its compiled functions (:mod:`.engine`), OpenMP
(:mod:`.openmp`) and failed run-time checks (:mod:`.check_failures`)."""
