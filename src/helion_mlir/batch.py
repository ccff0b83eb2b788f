"""Run ``generate_mlir`` over many kernels and report what emitted, verified or failed.

Used by the test suite and the ``helion-mlir check`` command. A failure never stops
the batch: it is recorded with its reason.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .errors import HelionMLIRError, MLIRVerificationError
from .generate import bind_kernel, emit_unverified, kernel_model
from .output_type import OutputType
from .verify import verify_module_text

if TYPE_CHECKING:
    from .lowering.kernel_model import KernelModel

__all__ = ["KernelCase", "KernelResult", "BatchReport", "check_kernels"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class KernelCase:
    """One kernel to lower: a label, a ``helion.Kernel`` (or bound kernel) and example args."""

    label: str
    kernel: Any
    args: tuple[Any, ...] | None = None
    config: Any = None


@dataclasses.dataclass
class KernelResult:
    label: str
    output_type: str
    status: str  # "verified", "emit-failed" or "verify-failed"
    seconds: float
    nodes: int = 0
    reason: str = ""
    text: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "verified"


@dataclasses.dataclass
class BatchReport:
    results: list[KernelResult]

    @property
    def emitted(self) -> int:
        return sum(r.status != "emit-failed" for r in self.results)

    @property
    def verified(self) -> int:
        return sum(r.ok for r in self.results)

    @property
    def failed(self) -> list[KernelResult]:
        return [r for r in self.results if not r.ok]

    def table(self) -> str:
        """A plain-text summary table, one row per kernel and output type."""
        header = ("kernel", "output type", "nodes", "status", "ms", "reason")
        rows = [
            (r.label, r.output_type, str(r.nodes), r.status, f"{r.seconds * 1e3:.0f}", r.reason.splitlines()[0] if r.reason else "")
            for r in self.results
        ]
        widths = [max(len(x) for x in col) for col in zip(header, *rows)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        lines.append(f"{len(self.results)} lowered: {self.emitted} emitted, {self.verified} verified, {len(self.failed)} failed")
        return "\n".join(lines)


def _node_count(bound: Any) -> int:
    return sum(1 for g in bound.host_function.device_ir.graphs for n in g.graph.nodes if n.op == "call_function")


def check_kernels(
    cases: Iterable[KernelCase],
    output_types: Sequence[OutputType | str] = (OutputType.LINALG_ON_TENSORS,),
    *,
    keep_text: bool = False,
    progress: TextIO | None = None,
    on_result: Callable[[KernelResult], None] | None = None,
) -> BatchReport:
    """Lower every case to every output type; ``progress`` (e.g. ``sys.stderr``) shows a counter."""
    cases = list(cases)
    kinds = [OutputType.parse(t) for t in output_types]
    total = len(cases) * len(kinds)
    results: list[KernelResult] = []
    done = 0
    for case in cases:
        try:
            bound = bind_kernel(case.kernel, case.args)
            nodes = _node_count(bound)
        except Exception as err:  # binding is Helion's: report its error as it is
            for kind in kinds:
                done += 1
                results.append(KernelResult(case.label, kind.value, "emit-failed", 0.0, 0, f"bind failed: {err}"))
            _show(progress, done, total, case.label)
            continue
        model: KernelModel | Exception
        try:
            model = kernel_model(bound, config=case.config)  # one model for every output type
        except Exception as err:  # reported for each output type below
            model = err
        for kind in kinds:
            result = _lower_case(case.label, model, kind, nodes, keep_text)
            results.append(result)
            if on_result is not None:
                on_result(result)
            done += 1
            _show(progress, done, total, case.label)
            log.info("%s [%s]: %s", case.label, kind.value, result.status)
    if progress is not None and total:
        progress.write("\n")
    return BatchReport(results)


def _lower_case(label: str, model: KernelModel | Exception, kind: OutputType, nodes: int,
                keep_text: bool) -> KernelResult:
    """Emit and verify one case for one output type; a failure becomes the result's reason."""
    started = time.perf_counter()
    result = KernelResult(label, kind.value, "verified", 0.0, nodes)
    try:
        if isinstance(model, Exception):
            raise model
        text = emit_unverified(model, kind)
        try:
            verify_module_text(text, what=f"kernel {label}")
            if keep_text:
                result.text = text
        except MLIRVerificationError as err:
            result.status, result.reason = "verify-failed", str(err)
    except HelionMLIRError as err:
        result.status, result.reason = "emit-failed", str(err)
    except Exception as err:  # not raised on purpose (a bug) or an invalid config: reported, and the batch goes on
        log.debug("%s [%s]: unexpected error", label, kind.value, exc_info=True)
        result.status, result.reason = "emit-failed", f"{type(err).__name__}: {err}"
    result.seconds = time.perf_counter() - started
    return result


def _show(stream: TextIO | None, done: int, total: int, label: str) -> None:
    if stream is None:
        return
    width = 30
    filled = int(width * done / max(total, 1))
    stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:40]:<40}")
    stream.flush()



