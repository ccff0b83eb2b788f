"""Rewrites that run on buffers, after bufferization: stack buffers, low-precision floats,
OpenMP scheduling."""
