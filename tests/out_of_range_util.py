"""Out-of-range accesses: the cases of tests/test_out_of_range.py and a runner for them.

A case is a kernel of tests/kernels/out_of_range_kernels.py with arguments that keep its
accesses in range and arguments that do not. :func:`run_case` compiles the kernel in one
setting (fast, plain or checked JIT, or IREE), calls it with every tensor argument placed
between two guard regions of one buffer (so a write just past a tensor would land in
memory the test owns), and reports the outcome as a dict. The runner is also a script:
``python tests/out_of_range_util.py SETTING[,SETTING...] [CASE ...]`` prints one JSON line
per setting, case and variant, each as soon as it is known, so that a process killed by a
bad access still says which case killed it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from examples_util import load_example  # noqa: E402

import helion_mlir  # noqa: E402,F401  (prepares Helion before any kernel is bound)
from helion_mlir import OutOfBoundsAccessError, compile_kernel  # noqa: E402
from helion_mlir.runtime.reference import reference_kernel  # noqa: E402

KERNELS_FILE = Path(__file__).resolve().parent / "kernels" / "out_of_range_kernels.py"
KERNELS = load_example(KERNELS_FILE)
SETTINGS = ("fast", "plain", "checked", "iree")
#: The settings that run the in-range variants too: the fast pipeline and checked mode (the
#: plain pipeline with checks). The plain pipeline and IREE compile the same module, and the
#: examples' tests compare them with reference mode already.
IN_RANGE_SETTINGS = ("fast", "checked")
GUARD = 64  # elements of guard on each side of every tensor argument
SENTINEL = 77


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _positions(values: list[int], count: int, limit: int, seed: int = 1) -> torch.Tensor:
    """``count`` positions in ``[0, limit)`` with ``values`` spread over them (out-of-range ones)."""
    index = torch.randint(0, limit, (count,), generator=torch.Generator().manual_seed(seed))
    for lane, value in zip(range(3, count, max(1, count // max(1, len(values)))), values):
        index[lane] = value
    return index


@dataclasses.dataclass(frozen=True)
class Case:
    """A kernel, arguments in range (None when every call of it runs out of range) and out
    of range, and the documented result (``expected`` updates its arguments as the kernel
    updates its own and returns the kernel's result)."""

    name: str
    in_range: Callable[[], tuple[Any, ...]] | None
    out_of_range: Callable[[], tuple[Any, ...]] | None
    access: str  # what kind of access runs out of range

    @property
    def kernel(self) -> Any:
        return getattr(KERNELS, self.name)

    @property
    def expected(self) -> Callable[..., Any]:
        return getattr(KERNELS, f"{self.name}_expected")


N = 37  # ragged for tiles of 16 and 8
BAD = [N, -1, 1 << 31, N + 5]

CASES = [
    Case("add_element", lambda: (_randn(N), 5), lambda: (_randn(N), N), "read at a scalar argument"),
    Case("double_row", lambda: (_randn(5, N), 2), lambda: (_randn(5, N), -1), "read and write at a scalar argument"),
    Case("spread", lambda: (_randn(N), 1), lambda: (_randn(N), 3), "write at 3 * grid index"),
    Case("every_nth", lambda: (_randn(N), 1), lambda: (_randn(N), 3), "read at 3 * grid index"),
    Case("mark_tile_ends", None, lambda: (_randn(40, 24),), "write at tile_m.end, tile_n.end"),
    Case("minus_previous_tile_end", None, lambda: (_randn(N),), "read at tile.begin - 1"),
    Case("count_scalar_bins", lambda: (_positions([], N, 10), torch.zeros(10, dtype=torch.int32)),
         lambda: (_positions([10, -1, 1 << 40], N, 10), torch.zeros(10, dtype=torch.int32)),
         "atomic_add at a loaded scalar"),
    Case("gather", lambda: (_randn(N), _positions([], 29, N)), lambda: (_randn(N), _positions(BAD, 29, N)),
         "gather"),
    Case("embed", lambda: (_randn(10, 24), _positions([], 29, 10)),
         lambda: (_randn(10, 24), _positions([10, -3, 1 << 33], 29, 10)), "gather of rows"),
    Case("masked_gather", lambda: (_randn(N), _positions(BAD, 29, N)), None, "gather under a mask"),
    Case("load_strided", lambda: (_randn(N), torch.zeros(18)), lambda: (_randn(N), torch.zeros(N)),
         "hl.load at tile.index * 2"),
    Case("store_strided", lambda: (_randn(18), torch.zeros(N)), lambda: (_randn(N), torch.zeros(N)),
         "hl.store at tile.index * 2"),
    Case("scatter", lambda: (_randn(N), torch.randperm(N), torch.zeros(N)),
         lambda: (_randn(N), _positions(BAD, N, N), torch.zeros(N)), "scatter"),
    Case("scatter_rows", lambda: (_randn(29, 24), torch.randperm(29), torch.zeros(29, 24)),
         lambda: (_randn(29, 24), _positions([29, -1, 1 << 35], 29, 29), torch.zeros(29, 24)),
         "scatter of rows"),
    Case("add_at", lambda: (torch.zeros(10), _positions([], N, 10), _randn(N)),
         lambda: (torch.zeros(10), _positions([10, 100000, -7], N, 10), _randn(N)), "atomic_add at loaded positions"),
    Case("max_at_returning_old", lambda: (_randn(50), torch.randperm(50)[:N], _randn(N, seed=2)),
         lambda: (_randn(50), torch.cat([torch.randperm(50)[:N - 3], torch.tensor([50, -1, 1 << 32])]),
                  _randn(N, seed=2)), "atomic_max at loaded positions"),
    Case("next_element", lambda: (_randn(N), torch.zeros(N - 1)), lambda: (_randn(N), torch.zeros(N)),
         "read at tile.index + 1"),
    Case("shift_right", lambda: (_randn(N), torch.zeros(N + 1)), lambda: (_randn(N), torch.zeros(N)),
         "write at tile.index + 1"),
    Case("copy_first", lambda: (_randn(N), torch.zeros(N), 20), lambda: (_randn(N), torch.zeros(N), 45),
         "tiles over a scalar argument's range, longer than the tensors"),
    Case("copy_up_to", lambda: (_randn(N), torch.zeros(N), torch.tensor(20)),
         lambda: (_randn(N), torch.zeros(N), torch.tensor(45)), "tiles up to a 0-d tensor's value past the tensors"),
    Case("add_pair", lambda: (_randn(N, 20), _randn(N, 20, seed=3)), lambda: (_randn(N, 20), _randn(30, 13, seed=3)),
         "tiles over one tensor's dynamic sizes reading a smaller one"),
    Case("bf16_groups", lambda: (_randn(6, 16).to(torch.bfloat16), _positions([], 29, 6)),
         lambda: (_randn(6, 16).to(torch.bfloat16), _positions([6, -1, 1 << 40], 29, 6)),
         "16-lane group load at loaded group offsets"),
]
BY_NAME = {case.name: case for case in CASES}


def guarded(value: Any) -> tuple[Any, torch.Tensor | None]:
    """A tensor as the middle of a buffer with :data:`GUARD` sentinel elements on each side."""
    if not isinstance(value, torch.Tensor):
        return value, None
    buffer = torch.full((value.numel() + 2 * GUARD,), SENTINEL, dtype=value.dtype)
    inside = buffer[GUARD:GUARD + value.numel()].view(value.shape)
    inside.copy_(value)
    return inside, buffer


def _clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _differences(got: Any, expected: Any, what: str) -> list[str]:
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or not torch.equal(got, expected):
            return [f"{what}: got {got.tolist() if isinstance(got, torch.Tensor) else got!r}, "
                    f"expected {expected.tolist()}"]
    return []


def run_case(case: Case, variant: str, setting: str) -> dict[str, Any]:
    """Compile ``case`` in ``setting``, call it with its ``variant`` arguments ("in range" or
    "out of range"), and compare every result, argument and guard with what docs/abi.md says."""
    args = (case.in_range if variant == "in range" else case.out_of_range)()  # type: ignore[misc]
    outcome: dict[str, Any] = {"case": case.name, "variant": variant, "setting": setting}
    options = {"fast": {}, "plain": {"pipeline": "plain"}, "checked": {"checked": True},
               "iree": {"runtime": "iree"}}[setting]
    compiled = compile_kernel(case.kernel.bind(_clone(args)), **options)
    expected_args = _clone(args)
    if variant == "in range":  # Helion's reference mode is the judge
        expected = reference_kernel(case.kernel)(*expected_args)
    else:
        expected = case.expected(*expected_args)
    placed = [guarded(a) for a in _clone(args)]
    call = tuple(a for a, _ in placed)
    try:
        got = compiled(*call)
    except OutOfBoundsAccessError as err:
        outcome.update(outcome="raised", error=str(err), source_line=err.source_line,
                       source_location=err.source_location)
        return outcome
    problems = _differences(got, expected, "result")
    for position, ((value, buffer), after) in enumerate(zip(placed, expected_args)):
        problems += _differences(value, after, f"argument {position}")
        guards = (buffer[:GUARD], buffer[-GUARD:]) if buffer is not None else ()
        if any(not torch.all(guard == SENTINEL) for guard in guards):
            problems.append(f"argument {position}: a guard region was written")
    outcome.update(outcome="mismatch" if problems else "match", problems=problems)
    return outcome


def main(argv: list[str]) -> None:
    settings, names = argv[0].split(","), argv[1:] or list(BY_NAME)
    for setting in settings:
        for name in names:
            case = BY_NAME[name]
            for variant, make in (("in range", case.in_range), ("out of range", case.out_of_range)):
                if make is None or (variant == "in range" and setting not in IN_RANGE_SETTINGS):
                    continue
                print(json.dumps({"case": name, "variant": variant, "setting": setting, "outcome": "started"}),
                      flush=True)
                try:
                    outcome = run_case(case, variant, setting)
                except Exception as err:  # reported, not raised: the next case still runs
                    outcome = {"case": name, "variant": variant, "setting": setting, "outcome": "error",
                               "error": f"{type(err).__name__}: {err}"}
                print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
