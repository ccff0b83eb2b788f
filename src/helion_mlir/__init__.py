"""helion_mlir: lower Helion kernels to verified MLIR and run them on CPU."""

from .errors import (
    HelionMLIRError,
    MLIRSyntaxError,
    MLIRVerificationError,
    NodeNormalizationError,
    UnsupportedNodeError,
)
from .output_type import OutputType
from .verify import verify_module_text

__all__ = [
    "HelionMLIRError",
    "MLIRSyntaxError",
    "MLIRVerificationError",
    "NodeNormalizationError",
    "OutputType",
    "UnsupportedNodeError",
    "verify_module_text",
]
