"""The package's own rewrites in the CPU pipelines, one module each.

Each module's docstring says what the rewrite is for and which upstream pass or pattern
it stands in for, if any, and why that one is not used. The pipelines
(:mod:`helion_mlir.runtime.cpu.pipelines.cpu`) run them as named steps among upstream passes.
"""
