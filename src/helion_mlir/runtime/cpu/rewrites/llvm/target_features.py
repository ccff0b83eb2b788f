"""The LLVM features the JIT's code may not use, on every function (``target-features``).

LLVM selects instructions for the host CPU; a function's ``target-features`` attribute
replaces the host's feature list for that function, the CPU model's own features less
those named. With ``HELION_MLIR_CPU_FEATURES=-avx512bf16`` (:mod:`...host_cpu`), a bf16
truncation is then the call of ``__truncsfbf2`` it is on CPUs without AVX512-BF16 (defined
in the module, :mod:`..buffer.bf16_truncation`), not a ``vcvtneps2bf16``. There is no MLIR pass
setting the attribute on every function; it runs on the LLVM dialect, last.
"""

from __future__ import annotations

from torch_mlir import ir

from ...host_cpu import host_cpu

__all__ = ["leave_out_cpu_features"]


def leave_out_cpu_features(module: ir.Module) -> None:
    """Give every ``llvm.func`` the features :func:`~...host_cpu.host_cpu` leaves out."""
    cpu = host_cpu()
    if not cpu.removed:
        return
    names = ", ".join(f'"-{name}"' for name in cpu.removed)
    features = ir.Attribute.parse(f"#llvm.target_features<[{names}]>")
    for op in module.body.operations:
        if op.operation.name == "llvm.func":
            op.operation.attributes["target_features"] = features
