"""Rewrites that run while the module is lowered to the LLVM dialect: failed checks as
returns, libm calls, bf16 memory, the JIT's CPU features."""
