"""helion_mlir: lower Helion kernels to verified MLIR and run them on CPU.

Importing the package also prepares Helion so that kernels bound afterwards keep the
information the lowering needs (see :mod:`helion_mlir.lowering.helion_compat`): import
``helion_mlir`` before calling ``kernel.bind``.
"""

from .lowering.helion_compat import install as _install_helion_compat

_install_helion_compat()

from .batch import BatchReport, KernelCase, KernelResult, check_kernels  # noqa: E402
from .errors import (  # noqa: E402
    ArgumentError,
    DataDependentValueError,
    ExecutionError,
    HelionMLIRError,
    MLIRSyntaxError,
    MLIRVerificationError,
    NodeNormalizationError,
    OutOfBoundsAccessError,
    DivisionByZeroError,
    RuntimeCheckError,
    UnsupportedNodeError,
)
from .generate import generate_mlir  # noqa: E402
from .importer.node_importer import TorchMLIRNodeImporter, import_aten_node_to_mlir  # noqa: E402
from .importer.normalize import (  # noqa: E402
    node_inputs,
    normalize_helion_node,
    synthesize_tensor_meta,
)
from .inliner.builder import MLIRBuilder  # noqa: E402
from .inliner.rewrite import inline_torch_mlir_output  # noqa: E402
from .output_type import OutputType  # noqa: E402
from .runtime.kernel.compiled_kernel import CompiledKernel, compile_kernel  # noqa: E402
from .runtime.cpu.engine import CompiledFunction, compile_module  # noqa: E402
from .verify import UndefinedRead, undefined_reads, verify_module_text  # noqa: E402

__all__ = [
    "ArgumentError",
    "BatchReport",
    "CompiledFunction",
    "CompiledKernel",
    "DataDependentValueError",
    "ExecutionError",
    "HelionMLIRError",
    "KernelCase",
    "KernelResult",
    "MLIRBuilder",
    "MLIRSyntaxError",
    "MLIRVerificationError",
    "NodeNormalizationError",
    "OutOfBoundsAccessError",
    "DivisionByZeroError",
    "OutputType",
    "RuntimeCheckError",
    "TorchMLIRNodeImporter",
    "UndefinedRead",
    "UnsupportedNodeError",
    "check_kernels",
    "compile_kernel",
    "compile_module",
    "generate_mlir",
    "import_aten_node_to_mlir",
    "inline_torch_mlir_output",
    "node_inputs",
    "normalize_helion_node",
    "synthesize_tensor_meta",
    "undefined_reads",
    "verify_module_text",
]
from .runtime.backend import helion_backend  # noqa: E402,F401  (registers the Helion backend "mlir")
