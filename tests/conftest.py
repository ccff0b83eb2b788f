"""Shared test configuration.

Hypothesis profiles: ``ci`` (the default) is derandomized so every CI run checks the
same examples; ``explore`` runs thousands of random examples when hunting for bugs:
``scripts/test tests/test_inline_properties.py --hypothesis-profile=explore``.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

import helion_mlir  # noqa: F401  (installs its Helion hook before any test binds a kernel)

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore",
    max_examples=5000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")
