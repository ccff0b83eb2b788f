"""Rewrites that make or transform vector ops: vectorization, dot products, vector math."""
