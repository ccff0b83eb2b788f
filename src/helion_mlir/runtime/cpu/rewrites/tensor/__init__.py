"""Rewrites that run on tensors, before bufferization: tiles, fusion, destinations."""
