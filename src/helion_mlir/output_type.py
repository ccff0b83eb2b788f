"""The MLIR dialect families the tool can emit, and the torch-mlir pipelines behind them."""

from __future__ import annotations

from .kinds import Kind

__all__ = ["OutputType", "TORCH_BACKEND_PIPELINE"]

# raw torch dialect (as FxImporter produces it) -> torch backend contract.
TORCH_BACKEND_PIPELINE = (
    "builtin.module(func.func(torch-match-quantized-custom-ops),"
    "torchdynamo-export-to-torch-backend-pipeline)"
)


class OutputType(Kind):
    """Which dialects ATen ops are lowered to.

    ``raw`` keeps torch-mlir's ``torch`` dialect as imported; the others run torch-mlir's
    backend pipeline after the backend-contract pipeline. Plain strings are accepted
    wherever an ``OutputType`` is, through :meth:`OutputType.parse`.
    """

    RAW = "raw"
    LINALG_ON_TENSORS = "linalg-on-tensors"
    TOSA = "tosa"
    STABLEHLO = "stablehlo"

    @classmethod
    def _spelling(cls, value: str) -> str:
        """Case and ``_`` / ``-`` do not matter; ``linalg`` is short for linalg-on-tensors."""
        spelled = value.strip().lower().replace("_", "-")
        return cls.LINALG_ON_TENSORS.value if spelled == "linalg" else spelled

    @property
    def backend_pipeline(self) -> str | None:
        """The torch-mlir pass pipeline that lowers backend-contract IR to this output type."""
        return _BACKEND_PIPELINES[self]


_BACKEND_PIPELINES: dict[OutputType, str | None] = {
    OutputType.RAW: None,
    OutputType.LINALG_ON_TENSORS: (
        "builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline{allow-non-finites=True})"
    ),
    OutputType.TOSA: "builtin.module(torch-backend-to-tosa-backend-pipeline)",
    OutputType.STABLEHLO: (
        "builtin.module(torch-backend-to-stablehlo-backend-pipeline{allow-non-finites=True})"
    ),
}
