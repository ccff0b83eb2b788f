"""Text-level MLIR: a lexer, the function builder, and the inliner that renames the SSA
values of torch-mlir's output and moves its aliases, so every imported body lands in the
one module being built. Nothing here knows Helion or torch."""
