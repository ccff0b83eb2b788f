"""``helion-mlir cache``: where the disk cache is, what it holds, and clearing it."""

from __future__ import annotations

import argparse

from ..caches import (BYTES_VARIABLE, ENABLE_VARIABLE, cache_directory, clear_disk_cache, disk_cache_usage,
                      size_limit)
from .common import EXIT_OK, CommandError

_KINDS = {"native": "compiled code", "openmp": "OpenMP entry points", "op": "lowered ATen ops",
          "host": "Helion's host code"}


def cache_command(options: argparse.Namespace) -> int:
    """Print the directory and its entries per kind, or with ``--clear`` remove them: a user
    reclaims the space, or makes the next process compile everything again."""
    try:
        limit = size_limit()
    except ValueError as err:
        raise CommandError(str(err), next_step=f"unset {BYTES_VARIABLE} or give it a number of bytes") from err
    directory = cache_directory()
    if directory is None:
        print(f"the disk cache is off ({ENABLE_VARIABLE}=0)")
        return EXIT_OK
    if options.clear:
        print(f"removed {clear_disk_cache(directory)} entries from {directory}")
        return EXIT_OK
    usage = disk_cache_usage(directory)
    print(f"directory: {directory}")
    for kind, (count, size) in sorted(usage.items()):
        print(f"  {kind:8s} {count:7d} entries {size / 2**20:9.1f} MiB  {_KINDS.get(kind, '')}")
    total = sum(size for _, size in usage.values())
    print(f"total: {total / 2**20:.1f} MiB of {limit / 2**20:.0f} MiB ({BYTES_VARIABLE})")
    return EXIT_OK
