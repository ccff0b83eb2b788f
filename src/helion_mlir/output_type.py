"""The MLIR dialect families the tool can emit, and the torch-mlir pipelines behind them."""

from __future__ import annotations

import enum

__all__ = ["OutputType", "TORCH_BACKEND_PIPELINE"]

# raw torch dialect (as FxImporter produces it) -> torch backend contract.
TORCH_BACKEND_PIPELINE = (
    "builtin.module(func.func(torch-match-quantized-custom-ops),"
    "torchdynamo-export-to-torch-backend-pipeline)"
)


class OutputType(str, enum.Enum):
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
    def parse(cls, value: "OutputType | str") -> "OutputType":
        """Accept an ``OutputType`` or its string spelling (``linalg`` is short for linalg-on-tensors)."""
        if isinstance(value, OutputType):
            return value
        spelled = str(value).strip().lower().replace("_", "-")
        if spelled == "linalg":
            spelled = cls.LINALG_ON_TENSORS.value
        for member in cls:
            if member.value == spelled:
                return member
        choices = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown output type {value!r}; choose one of: {choices}")

    @property
    def backend_pipeline(self) -> str | None:
        """The torch-mlir pass pipeline that lowers backend-contract IR to this output type."""
        return _BACKEND_PIPELINES[self]

    def __str__(self) -> str:
        return self.value


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
