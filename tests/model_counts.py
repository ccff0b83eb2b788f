"""Counting what an entry point builds: kernel models, and configs normalized by helion_mlir
(not by Helion itself). One compilation should build one of each (docs/architecture.md,
section 2); conftest.py's ``model_counts`` fixture starts with nothing compiled or resolved."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helion.autotuner.config_spec import ConfigSpec

from helion_mlir.lowering.kernel_model import KernelModel


class ModelCounts:
    """Kernel models built, and configs normalized by helion_mlir (not by Helion itself)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.models = self.resolutions = 0
        init, normalized = KernelModel.__init__, ConfigSpec.normalized_config

        def counting_init(model: KernelModel, *args: Any, **kwargs: Any) -> None:
            self.models += 1
            init(model, *args, **kwargs)

        def counting_normalized(spec: ConfigSpec, *args: Any, **kwargs: Any) -> Any:
            if sys._getframe(1).f_globals.get("__name__", "").startswith("helion_mlir"):
                self.resolutions += 1
            return normalized(spec, *args, **kwargs)

        monkeypatch.setattr(KernelModel, "__init__", counting_init)
        monkeypatch.setattr(ConfigSpec, "normalized_config", counting_normalized)

    def take(self) -> tuple[int, int]:
        taken = (self.models, self.resolutions)
        self.models = self.resolutions = 0
        return taken
