"""The devices IREE compiles the emitted modules for: this CPU (or a named CPU model), and
GPUs (CUDA, ROCm, Vulkan), which need no GPU to compile for.

A device is written ``KIND[:TARGET]``: ``cpu`` (this machine's CPU), ``cpu:skylake-avx512``
(any LLVM x86 CPU model: code for a CPU without some of this one's instructions, which
this one still runs), ``cuda:sm_80``, ``rocm:gfx942``, ``vulkan:rdna3``. Each kind maps to
IREE's compile flags and to the runtime driver that runs its code (``local-task``,
``cuda``, ``hip``, ``vulkan``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...kinds import Kind

__all__ = ["DEVICE_KINDS", "DeviceKind", "IreeDevice"]


class DeviceKind(Kind):
    """What IREE compiles for. Plain strings are accepted through :meth:`DeviceKind.parse`."""

    CPU = "cpu"
    CUDA = "cuda"
    ROCM = "rocm"
    VULKAN = "vulkan"


DEVICE_KINDS = tuple(k.value for k in DeviceKind)

# The target of each kind when none is named; IREE 3.13 knows sm_80 and sm_89 in detail, not
# sm_90's; gfx942 is MI300's; rdna3 one of the Vulkan targets IREE describes by name.
_DEFAULT_TARGETS = {DeviceKind.CPU: "host", DeviceKind.CUDA: "sm_80", DeviceKind.ROCM: "gfx942",
                    DeviceKind.VULKAN: "rdna3"}
_DRIVERS = {DeviceKind.CPU: "local-task", DeviceKind.CUDA: "cuda", DeviceKind.ROCM: "hip",
            DeviceKind.VULKAN: "vulkan"}


@dataclass(frozen=True)
class IreeDevice:
    """A device kind and its target (CPU model, CUDA compute capability, AMD GPU
    architecture, Vulkan target)."""

    kind: DeviceKind = DeviceKind.CPU
    target: str = "host"

    @classmethod
    def parse(cls, spec: "IreeDevice | str | None") -> "IreeDevice":
        """``None`` is this CPU; ``"cuda"`` is ``cuda:sm_80`` (see the module's docstring)."""
        if spec is None:
            return cls()
        if isinstance(spec, IreeDevice):
            return spec
        kind_name, _, target = str(spec).partition(":")
        kind = DeviceKind.parse(kind_name.strip().lower())
        target = target.strip()
        if ":" in target or (not target and ":" in str(spec)):
            raise ValueError(f"device {spec!r}: write KIND[:TARGET], e.g. 'cuda:sm_80' or 'cpu:skylake-avx512'")
        return cls(kind, target or _DEFAULT_TARGETS[kind])

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.target}"

    @property
    def driver(self) -> str:
        """The IREE runtime driver that runs code compiled for this device."""
        return _DRIVERS[self.kind]

    @property
    def is_host(self) -> bool:
        """Code for it runs on this process's CPU (any CPU target: the caller picks a model
        this CPU can run)."""
        return self.kind is DeviceKind.CPU

    def compile_flags(self) -> tuple[str, ...]:
        """``iree-compile``'s flags selecting this device."""
        if self.kind is DeviceKind.CPU:
            return ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                    f"--iree-llvmcpu-target-cpu={self.target}")
        if self.kind is DeviceKind.CUDA:
            return ("--iree-hal-target-device=cuda", f"--iree-cuda-target={self.target}")
        if self.kind is DeviceKind.ROCM:
            # float8 formats the chip lacks (e4m3fn and e5m2 before gfx950) in IREE's integer
            # emulation, which IREE's own error message recommends; the others stay native.
            return ("--iree-hal-target-device=hip", f"--iree-rocm-target={self.target}",
                    "--iree-llvmgpu-enable-small-float-emulation")
        return ("--iree-hal-target-device=vulkan", f"--iree-vulkan-target={self.target}")
