"""docs/benchmarks.md's execution and math sections say which targets are met and, for a
missed one, whether per-core code or parallel scaling bounds it (scripts/exec_costs.py,
scripts/math_costs.py), the Inductor section sums up its targets (scripts/inductor_costs.py),
and the model-blocks section sets each kernel's time inside its block beside its time alone
(scripts/block_costs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from block_costs import render_blocks  # noqa: E402
from exec_costs import render_execution  # noqa: E402
from inductor_costs import render_inductor  # noqa: E402
from math_costs import render_math  # noqa: E402


def _row(name: str, ratio: float, one_thread: float, target: float | None, unit: str = "GB/s") -> dict:
    return dict(name=name, eager=f"`{name}`", unit=unit, target=target, rate=16.0, eager_rate=20.0,
                max_error=1e-7, fast_compile_s=0.09, plain_compile_s=0.08, plain_s=0.03, ours_s=0.002,
                ours_best_s=0.002, eager_s=0.0015, eager_best_s=0.0015, ratio=ratio, cores_busy=1.6,
                one_thread_ratio=one_thread)


def _data(tiny_ours_s: float) -> dict:
    return dict(
        threads=2,
        peaks=dict(copy_gbs=32.0, copy_rows_gbs=100.0, sgemm_gflops=180.0, fresh_output_s=0.015),
        rows=[
            _row("pointwise", 0.7, 0.7, 1.5),
            _row("softmax", 1.6, 1.1, 1.5),  # per core within the target: scaling bounds it
            _row("layer norm", 1.9, 1.8, 1.5),  # per core already past it: the tile code bounds it
            _row("row scan", 3.0, 3.0, None),
            _row("matmul", 0.9, 1.0, 5.0, "GFLOP/s"),
            _row("attention", 1.1, 1.0, 3.0, "GFLOP/s"),
        ],
        tiny=dict(ours_s=tiny_ours_s, eager_s=2e-6, ours_cpu_s=12e-6, eager_cpu_s=2e-6, checks_s=1e-6,
                  host_s=2e-6, native_s=6e-6),
        last_level_cache="32768K",
        tiny_shape="37x100",
    )


def test_missed_targets_are_marked_with_what_bounds_each() -> None:
    text = render_execution(_data(tiny_ours_s=30e-6))
    assert "| pointwise and row reductions <= 1.5x | 1.90x (layer norm) | missed |" in text
    assert "| f32 matmul 1024^3 <= 5x | 0.90x (matmul) | met |" in text
    assert "| tiny-kernel call overhead <= 20 us above eager | 28.0 us | missed |" in text
    assert ("softmax misses its target (1.60x): per core it is 1.10x eager (within the target), so the loss "
            "is in running on 2 threads") in text
    assert "layer norm misses its target (1.90x): per core the compiled code is already 1.80x eager" in text
    assert "pointwise misses" not in text and "row scan misses" not in text


def test_met_targets_carry_no_explanation() -> None:
    data = _data(tiny_ours_s=12e-6)
    for row in data["rows"]:
        row["ratio"] = min(row["ratio"], 1.0)
    text = render_execution(data)
    assert "missed" not in text and "misses its target" not in text
    assert "| tiny-kernel call overhead <= 20 us above eager | 10.0 us | met |" in text


def _math_row(name: str, ratio: float, one_thread: float) -> dict:
    return dict(name=name, ours_s=0.002 * ratio, eager_s=0.003, inductor_s=0.002, ratio=ratio, eager_ratio=0.7,
                one_thread_ratio=one_thread, inductor_compile_s=4.0, error=2e-7, inductor_error=3e-7)


def test_math_section_marks_functions_past_the_inductor_target_with_what_bounds_them() -> None:
    data = dict(threads=2, rows=[_math_row("erf", 1.05, 1.0), _math_row("sin", 1.4, 1.35), _math_row("tanh", 1.3, 1.1)],
                fused=_math_row("residual add + RMS norm + GELU (erf)", 1.5, 1.5))
    text = render_math(data)
    assert "| each math function at 4096x1024 f32 <= 1.2x | 1.40x (sin) | missed |" in text
    assert "| erf | 2.10 | 3.00 | 2.00 | 1.05 | <= 1.2x: met |" in text
    assert "sin misses its target (1.40x): per core it is also slower, so the vector code bounds it." in text
    assert "tanh misses its target (1.30x): per core it is within the target (1.10x)" in text
    assert "erf misses" not in text and "RMS norm + GELU (erf) misses" not in text


def _inductor_row(name: str, ratio: float, eager_ratio: float, one_thread: float, share: float | None,
                  fresh_share: float = 0.9, scaling: float = 1.0, interleaved: float = 1.0,
                  inductor_interleaved: float = 1.0, copy_interleaved: float = 1.0) -> dict:
    """A row whose ratio to Inductor alone is ``ratio``, and interleaved with a torch op
    ``ratio * interleaved / inductor_interleaved``."""
    interleaved_ratio = ratio * interleaved / inductor_interleaved
    return dict(name=name, memory_bound=share is not None, ours_s=0.002 * ratio, one_thread_s=0.002 * ratio * scaling,
                eager_s=0.002 * ratio / eager_ratio, interleaved_s=0.002 * ratio * interleaved,
                interleaved_over_alone=interleaved, inductor_interleaved_over_alone=inductor_interleaved,
                copy_interleaved_over_alone=copy_interleaved if share is not None else None,
                alone_ratio=ratio, interleaved_ratio=interleaved_ratio,
                inductor_s=0.002, eager_ratio=eager_ratio, one_thread_ratio=one_thread, rate=20.0,
                share=share, inductor_share=0.8 if share is not None else None,
                fresh_share=fresh_share if share is not None else None, inductor_compile_s=5.0, error=1e-6)


def test_inductor_section_summarizes_the_targets_and_says_what_bounds_each_miss() -> None:
    rows = [_inductor_row("RMS norm", 0.5, 0.4, 0.5, 0.9), _inductor_row("GEGLU", 2.0, 1.8, 1.9, 0.3),
            _inductor_row("softmax", 1.3, 1.1, 1.0, 0.75), _inductor_row("matmul bf16 1024^3", 1.0, 1.1, 1.0, None),
            _inductor_row("SwiGLU", 0.9, 0.5, 0.95, 0.28, fresh_share=0.26),
            _inductor_row("log softmax", 1.2, 0.8, 1.2, 0.35, scaling=1.9)]
    data = dict(threads=2, rows=rows, load=3.0, softmax=[dict(block=16, ours_s=0.002, eager_s=0.0015, ratio=1.33,
                                                              low=1.2, high=1.6)],
                peaks=dict(copy_gbs=32.0, copy_rows_gbs=100.0, sgemm_gflops=180.0),
                pointwise=[dict(blocks=(16, 256), ours_s=0.03, inductor_s=0.02, ratio=1.52)])
    text = render_inductor(data)
    assert "| [16, 256] | 30.00 | 20.00 | 1.52 |" in text
    geomean = (0.5 * 2.0 * 1.3 * 1.0 * 0.9 * 1.2) ** (1 / 6)
    assert f"| geometric mean of ours / Inductor <= 1 | {geomean:.2f} | missed |" in text  # 1.07
    assert "| no kernel above 1.5x Inductor | 2.00x (GEGLU) | missed |" in text
    assert "| no kernel above 1.2x torch eager | 1.80x (GEGLU) | missed |" in text
    assert "| memory-bound kernels >= 70% of the copy bandwidth | 28% (SwiGLU) | missed |" in text
    assert "| bf16 matmul 1024^3 <= 1.2x torch eager | 1.10x | met |" in text
    assert "- GEGLU (2.00x Inductor, 1.80x eager): on one thread it is 1.90x Inductor, so part of the gap is in " \
        "running on 2 threads; it moves 30% of the copy bandwidth (Inductor 80%)." in text
    assert "- SwiGLU (0.90x Inductor, 0.50x eager): it moves 28% of the copy bandwidth (Inductor 80%); the same " \
        "copy into a tensor the call allocates reaches 26%: first-touch page faults on the fresh output bound " \
        "every side." in text
    assert "- log softmax (1.20x Inductor, 0.80x eager): on one thread it is 1.20x Inductor, so the per-core code " \
        "bounds it; it moves 35% of the copy bandwidth (Inductor 80%); it runs 1.9x as fast on 2 threads as on " \
        "one: the cores' arithmetic, not a memory limit the cores share, holds it." in text
    assert "- RMS norm" not in text and "- softmax" not in text  # within every target
    assert "| 16 | 2.00 | 1.50 | 1.33 | 1.20 / 1.60 |" in text


def test_a_kernel_slower_between_torch_ops_is_judged_by_its_interleaved_ratio_to_inductor() -> None:
    rows = [_inductor_row("RMS norm", 0.8, 0.4, 0.8, 0.9, interleaved=2.5, inductor_interleaved=1.25,
                          copy_interleaved=1.3),
            _inductor_row("softmax", 0.9, 0.9, 0.9, 0.9, interleaved=1.2, inductor_interleaved=1.5,
                          copy_interleaved=1.1),
            _inductor_row("matmul bf16 1024^3", 0.5, 0.5, 0.5, None)]
    data = dict(threads=2, rows=rows, load=1.0, softmax=[], peaks=dict(copy_gbs=32.0, copy_rows_gbs=100.0,
                                                                          sgemm_gflops=180.0))
    text = render_inductor(data)
    # RMS norm: 0.8x Inductor alone, 0.8 * 2.5 / 1.25 = 1.6x interleaved; softmax: alone is the worse.
    assert "| no kernel above 1.5x Inductor | 1.60x (RMS norm) | missed |" in text
    assert f"| geometric mean of ours / Inductor <= 1 | {(1.6 * 0.9 * 0.5) ** (1 / 3):.2f} | met |" in text
    assert "| RMS norm | 1.60 | 4.00 | 2.50 / 1.25 / 1.30 | 4.00 | 2.00 | 1.60 | 0.40 |" in text
    assert "| softmax | 1.80 | 2.16 | 1.20 / 1.50 / 1.10 | 2.00 | 2.00 | 0.90 | 0.90 |" in text
    assert "| matmul bf16 1024^3 | 1.00 | 1.00 | 1.00 / 1.00 / - |" in text  # no copy beside a compute-bound kernel
    assert ("our kernels took 1.00-2.50x their time alone (median 1.20; the most: RMS norm), Inductor's "
            "1.00-1.50x (median 1.25), and a fresh copy moving a memory-bound kernel's bytes 1.10-1.30x (median "
            "1.20). The interleaved ratio to Inductor is the worse one for 1 of 3 kernels.") in text
    assert ("- RMS norm (1.60x Inductor, 0.40x eager): alone it is 0.80x Inductor, but right after a 512x512 f32 "
            "matmul it takes 2.50x its time alone (Inductor's 1.25x, a fresh copy of its bytes 1.30x); it moves 90% "
            "of the copy bandwidth") in text


def _block_row(name: str, dtype: str, kernels: list[tuple[str, float, float, int]]) -> dict:
    """A block whose ours side takes 10 ms, with (kernel, ms in the block, ms alone, page faults per call in
    the block); its compiled code and the clone in its place take 1.5x their time alone in the block."""
    return dict(name=name, dtype=dtype, sizes="2048x1024", eager_s=0.012, compiled_s=0.008, ours_s=0.010,
                compile_ratio=1.25, eager_ratio=0.8, error=2e-6, compiled_error=1e-6, inductor_compile_s=3.0,
                kernels=[dict(name=k, in_block_s=inside / 1e3, alone_s=alone / 1e3, ratio=inside / alone,
                              code_ratio=1.5, faults_in_block=faults, faults_alone=0, clone_ratio=1.5,
                              clone_faults_in_block=faults, share=inside / 10)
                         for k, inside, alone, faults in kernels])


def test_blocks_section_sets_each_kernel_in_its_block_beside_its_time_alone() -> None:
    rows = [_block_row("MLP", "float32", [("rms_norm", 0.6, 0.3, 0), ("swiglu", 3.0, 2.5, 5632)]),
            _block_row("loss head", "bfloat16", [("cross_entropy", 1.0, 0.9, 0)])]
    text = render_blocks(dict(threads=2, rounds=5, settle=0.25, rows=rows, load=1.5))
    assert "| MLP | float32 | 2048x1024 | 12.00 | 8.00 | 10.00 | 1.25 | 0.80 | 2.0e-06 / 1.0e-06 | 3.0 |" in text
    assert "| MLP | float32 | rms_norm | 0.600 | 0.300 | 2.00 | 1.50 | 0 / 0 | 1.50 (0) | 6.0% |" in text
    assert "| MLP | float32 | swiglu | 3.000 | 2.500 | 1.20 | 1.50 | 5632 / 0 | 1.50 (5632) | 30.0% |" in text
    assert "| loss head | bfloat16 | cross_entropy | 1.000 | 0.900 | 1.11 | 1.50 | 0 / 0 | 1.50 (0) | 10.0% |" in text
    assert "Largest in block / alone: 2.00 (rms_norm in the float32 MLP block)." in text
    # 10 ms, of which the kernels 3.6: the torch ops' 6.4 ms are less than torch.compile's 8 ms
    assert ("The float32 MLP block is 1.25x torch.compile's time: its kernels take 3.60 ms of its 10.00 ms, and its "
            "torch ops the other 6.40 ms, less than torch.compile's whole block: the kernels' time decides (8.00 ms)."
            in text)


def test_blocks_section_says_when_the_torch_ops_alone_outlast_torch_compile() -> None:
    row = _block_row("MLP", "float32", [("swiglu", 1.0, 0.5, 0)])
    text = render_blocks(dict(threads=2, rounds=5, settle=0.25, rows=[row], load=1.5))
    assert "its torch ops the other 9.00 ms, longer than torch.compile's whole block: its torch ops bound it" in text
