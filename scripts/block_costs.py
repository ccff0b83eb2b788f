"""Model blocks end to end: Helion kernels among torch ops, beside eager and torch.compile.

A user calls a Helion kernel between torch ops, not alone in a loop; what the kernel costs
there is what counts. ``measure_blocks()`` runs three blocks (in f32 and bf16), each three
ways in one process, in alternating rounds on the same thread count:

* a transformer MLP: RMS norm -> gate and up projections -> SwiGLU -> down projection + residual;
* an attention block: q, k, v projections -> attention over the heads -> output projection;
* a loss head: the logits' projection -> per-token cross entropy;

``eager`` is the block as a user writes it in torch (``F.rms_norm``, ``F.silu(gate) * up``,
``F.scaled_dot_product_attention``, ``F.cross_entropy``), ``torch.compile`` that whole block
(Inductor, compile time excluded and reported apart), ``ours`` the same block with the
examples' kernels (``examples/rms_norm.py``, ``swiglu.py``, ``attention.py``,
``cross_entropy.py``) compiled by ``compile_kernel`` (fast pipeline) in place of those ops.
Each kernel is also timed inside the block (``time.perf_counter`` around its call, between
the neighbouring torch ops) and alone (called back to back on the same inputs) in the same
rounds, with the part of that time its compiled code takes (the rest is the host side:
argument checks, Helion's host code with its output allocation, the launch) and the page
faults of its calls; beside it, as a floor no kernel can go under, a clone of the kernel's
first input in the kernel's place (a torch op writing a fresh tensor from the same bytes),
in the block and alone. Run it in a process of its own: it sets torch's thread count for the
measurement and leaves torch.compile's and the kernels' caches filled.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import helion
import torch
import torch.nn.functional as F
from examples_util import load_example_by_name
from exec_costs import _per_call

from helion_mlir import compile_kernel

__all__ = ["measure_blocks", "render_blocks", "SECTION", "Sizes"]

SECTION = "## Model blocks: kernels among torch ops (fast pipeline)"
EPS = 1e-6
# Pause before each contender's calls: an OpenMP runtime's workers keep spinning on the cores
# after a parallel region (libiomp5 for 200 ms by default), which would slow whichever
# contender comes next in the round; inside a block that cost is the user's and is measured.
SETTLE_S = 0.25
# Untimed calls of each contender before its timed ones in a round: a block run over and over
# reuses the memory its last run freed, while its first run after another contender's inherits
# that contender's heap and, where it ended differently, faults its large outputs in afresh.
WARMUP_CALLS = 2


@dataclass(frozen=True)
class Sizes:
    """The blocks' sizes: ``tokens`` rows of ``hidden`` features (a batch of sequences)."""

    tokens: int = 2048
    hidden: int = 1024
    ffn: int = 2816  # the MLP's inner width, about 8/3 of hidden as in Llama-style blocks
    heads: int = 16  # attention heads of hidden / heads features each
    sequence: int = 1024  # tokens per sequence for attention (tokens / sequence sequences)
    vocab: int = 8192


# The kernels' block sizes, as in the Inductor section (scripts/inductor_costs.py).
KERNELS = {"rms_norm": [16], "swiglu": [16, 256], "attention": [1, 64, 64], "cross_entropy": [8]}
Ops = dict[str, Callable[..., torch.Tensor]]


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class TimedOp:
    """An op a block calls in a kernel's place, every call timed, with the page faults it
    took (first touches of fresh memory, as of a newly mapped output) and, when the op runs
    compiled code, that code's part of the time; ``alone()`` calls it again on the arguments
    of its first call (the block's own intermediates, kept for timing it alone)."""

    def __init__(self) -> None:
        self.args: tuple[Any, ...] = ()
        self.seconds: list[float] = []
        self.code_seconds: list[float] = []
        self.faults: list[int] = []

    def run(self, *args: Any) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, *args: Any) -> torch.Tensor:
        if not self.args:
            self.args = args
        faults, started = _minor_faults(), time.perf_counter()
        out = self.run(*args)
        self.seconds.append(time.perf_counter() - started)
        self.faults.append(_minor_faults() - faults)
        return out

    def alone(self) -> torch.Tensor:
        return self(*self.args)

    def clear(self) -> None:
        self.seconds.clear()
        self.code_seconds.clear()
        self.faults.clear()


class KernelInBlock(TimedOp):
    """An example kernel as a block calls it, compiled on its first call for that call's arguments."""

    def __init__(self, example: str, threads: int) -> None:
        super().__init__()
        fn = load_example_by_name(example).KERNEL.fn
        self.kernel = helion.kernel(fn, config=helion.Config(block_sizes=KERNELS[example]))
        self.threads = threads
        self.compiled: Any = None

    def run(self, *args: Any) -> torch.Tensor:
        if self.compiled is None:
            self.compiled = compile_kernel(self.kernel, args, threads=self.threads)
            run_function = self.compiled._run_function  # the hook that calls the compiled function

            def timed(function: Any, call: list[Any], call_args: tuple[Any, ...]) -> tuple[Any, ...]:
                started = time.perf_counter()
                try:
                    return run_function(function, call, call_args)
                finally:
                    self.code_seconds.append(time.perf_counter() - started)

            self.compiled._run_function = timed
        return self.compiled(*args)


class CloneInBlock(TimedOp):
    """A clone of the first argument: a torch op writing a fresh tensor of the same bytes."""

    def run(self, *args: Any) -> torch.Tensor:
        return args[0].clone()


@dataclass
class Block:
    name: str
    sizes: str
    forward: Callable[..., torch.Tensor]  # forward(ops, *inputs)
    inputs: tuple[Any, ...]
    eager_ops: Ops  # what a user writes in torch for each kernel


def _weight(rows: int, cols: int, dtype: torch.dtype) -> torch.Tensor:
    return (torch.randn(rows, cols) / math.sqrt(cols)).to(dtype)


def _mlp(s: Sizes, dtype: torch.dtype) -> Block:
    norm = (1 + 0.1 * torch.randn(s.hidden)).to(dtype)
    gate, up, down = _weight(s.ffn, s.hidden, dtype), _weight(s.ffn, s.hidden, dtype), _weight(s.hidden, s.ffn, dtype)

    def forward(ops: Ops, x: torch.Tensor) -> torch.Tensor:
        h = ops["rms_norm"](x, norm, EPS)
        return x + F.linear(ops["swiglu"](F.linear(h, gate), F.linear(h, up)), down)

    return Block("MLP", f"{s.tokens}x{s.hidden}, inner {s.ffn}", forward, (torch.randn(s.tokens, s.hidden).to(dtype),),
                 {"rms_norm": lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps),
                  "swiglu": lambda g, u: F.silu(g) * u})


def _attention(s: Sizes, dtype: torch.dtype) -> Block:
    wq, wk, wv, wo = (_weight(s.hidden, s.hidden, dtype) for _ in range(4))
    batch, head_dim = s.tokens // s.sequence, s.hidden // s.heads
    scale = 1 / math.sqrt(head_dim)

    def heads(t: torch.Tensor) -> torch.Tensor:  # [tokens, hidden] -> [batch * heads, sequence, head_dim]
        return t.view(batch, s.sequence, s.heads, head_dim).transpose(1, 2).reshape(-1, s.sequence, head_dim)

    def forward(ops: Ops, x: torch.Tensor) -> torch.Tensor:
        out = ops["attention"](heads(F.linear(x, wq)), heads(F.linear(x, wk)), heads(F.linear(x, wv)), scale)
        merged = out.view(batch, s.heads, s.sequence, head_dim).transpose(1, 2).reshape(s.tokens, s.hidden)
        return F.linear(merged, wo)

    return Block("attention", f"{batch}x{s.sequence}x{s.hidden}, {s.heads} heads", forward,
                 (torch.randn(s.tokens, s.hidden).to(dtype),),
                 {"attention": lambda q, k, v, sc: F.scaled_dot_product_attention(q, k, v, scale=sc)})


def _loss_head(s: Sizes, dtype: torch.dtype) -> Block:
    vocab = _weight(s.vocab, s.hidden, dtype)

    def forward(ops: Ops, h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ops["cross_entropy"](F.linear(h, vocab), target)

    return Block("loss head", f"{s.tokens}x{s.hidden}, vocabulary {s.vocab}", forward,
                 (torch.randn(s.tokens, s.hidden).to(dtype), torch.randint(0, s.vocab, (s.tokens,))),
                 {"cross_entropy": lambda logits, t: F.cross_entropy(logits, t, reduction="none")})


# Each block with the dtypes its kernels take: the attention example multiplies its float32
# probabilities by the value tile as loaded, which Helion refuses for bf16 values.
BLOCKS = {"MLP": (_mlp, ("float32", "bfloat16")), "attention": (_attention, ("float32",)),
          "loss head": (_loss_head, ("float32", "bfloat16"))}


def _ratios(samples: dict[str, list[float]], ours: str, over: str) -> float:
    """The median over rounds of the within-round ratio (load bursts hit both sides alike)."""
    return statistics.median(a / b for a, b in zip(samples[ours], samples[over]))


def _max_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return (got.float() - want.float()).abs().max().item()


def _call_medians(op: TimedOp) -> dict[str, float]:
    """Medians over one contender's calls of ``op``: seconds, its compiled code's seconds (0 for a
    torch op) and page faults. ``_per_call``'s first call sizes its loop and is not in its time: nor here."""
    def median(values: list[float] | list[int]) -> float:
        return float(statistics.median(values[1:] or values)) if values else 0.0

    return dict(seconds=median(op.seconds), code=median(op.code_seconds), faults=median(op.faults))


def _measure_block(block: Block, dtype: torch.dtype, threads: int, rounds: int, budget: float,
                   settle: float, warmup: int) -> dict[str, Any]:
    kernels = {name: KernelInBlock(name, threads) for name in block.eager_ops}
    clones = {name: CloneInBlock() for name in block.eager_ops}
    ours = lambda: block.forward(kernels, *block.inputs)  # noqa: E731
    eager = lambda: block.forward(block.eager_ops, *block.inputs)  # noqa: E731
    # Every block goes through this one lambda: static shapes, so that a block after one of other
    # sizes is not compiled for dynamic sizes (what torch.compile does on a frame's second shape).
    compiled = torch.compile(eager, dynamic=False)
    want, got = eager(), ours()
    block.forward(clones, *block.inputs)
    started = time.perf_counter()
    compiled_out = compiled()
    compile_s = time.perf_counter() - started
    contenders = {"eager": eager, "torch.compile": compiled, "ours": ours,
                  "clones": lambda: block.forward(clones, *block.inputs)}
    contenders |= {f"{name} alone": kernel.alone for name, kernel in kernels.items()}
    contenders |= {f"{name} clone alone": clone.alone for name, clone in clones.items()}
    # Which ops' calls each contender makes, and where: (kernel name, whether ours or the clone), place.
    ops = {**{(name, True): op for name, op in kernels.items()}, **{(name, False): op for name, op in clones.items()}}
    places = {"ours": [((name, True), "block") for name in kernels],
              "clones": [((name, False), "block") for name in kernels]}
    places |= {f"{name} alone": [((name, True), "alone")] for name in kernels}
    places |= {f"{name} clone alone": [((name, False), "alone")] for name in kernels}
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    calls: dict[tuple[tuple[str, bool], str], list[dict[str, float]]] = {}
    for _ in range(rounds):
        for name, fn in contenders.items():
            time.sleep(settle)
            for _ in range(warmup):
                fn()
            for op in ops.values():
                op.clear()
            samples[name].append(_per_call(fn, budget))
            for key, where in places.get(name, []):
                calls.setdefault((key, where), []).append(_call_medians(ops[key]))
    median = {name: statistics.median(times) for name, times in samples.items()}

    def stat(key: tuple[str, bool], where: str, what: str) -> float:
        return statistics.median(c[what] for c in calls[(key, where)])

    def ratio(key: tuple[str, bool], what: str) -> float:
        """In the block over alone, the median of the per-round ratios."""
        pairs = [(b[what], a[what]) for b, a in zip(calls[(key, "block")], calls[(key, "alone")]) if a[what] > 0]
        return statistics.median(b / a for b, a in pairs) if pairs else math.nan

    return dict(
        name=block.name, dtype=str(dtype).removeprefix("torch."), sizes=block.sizes,
        eager_s=median["eager"], compiled_s=median["torch.compile"], ours_s=median["ours"],
        compile_ratio=_ratios(samples, "ours", "torch.compile"), eager_ratio=_ratios(samples, "ours", "eager"),
        error=_max_error(got, want), compiled_error=_max_error(compiled_out, want), inductor_compile_s=compile_s,
        kernels=[dict(name=name, in_block_s=stat((name, True), "block", "seconds"),
                      alone_s=stat((name, True), "alone", "seconds"), ratio=ratio((name, True), "seconds"),
                      code_ratio=ratio((name, True), "code"), faults_in_block=stat((name, True), "block", "faults"),
                      faults_alone=stat((name, True), "alone", "faults"), clone_ratio=ratio((name, False), "seconds"),
                      clone_faults_in_block=stat((name, False), "block", "faults"),
                      share=stat((name, True), "block", "seconds") / median["ours"])
                 for name in kernels])


def measure_blocks(threads: int = 2, rounds: int = 5, budget: float = 0.3, sizes: dict[str, int] | None = None,
                   blocks: list[str] | None = None, dtypes: list[str] | None = None,
                   settle: float = SETTLE_S, warmup: int = WARMUP_CALLS) -> dict[str, Any]:
    """Everything the module docstring lists, as plain data; ``sizes`` overrides fields of
    :class:`Sizes`, ``blocks`` and ``dtypes`` pick rows (by default all, in each dtype of ``BLOCKS``).
    Sets torch's thread count for the measurement and restores it."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    chosen = Sizes(**(sizes or {}))
    rows = []
    try:
        for name in blocks or list(BLOCKS):
            make, supported = BLOCKS[name]
            for dtype in (getattr(torch, d) for d in supported if dtypes is None or d in dtypes):
                rows.append(_measure_block(make(chosen, dtype), dtype, threads, rounds, budget, settle, warmup))
    finally:
        torch.set_num_threads(previous)
    return dict(threads=threads, rounds=rounds, settle=settle, warmup=warmup, rows=rows, load=os.getloadavg()[0])


# What the in-block times are made of, measured apart (same-process A/B, medians; 2026-11-28,
# load 1-5 from other processes on the 2 cores).
CAUSES = [
    "What a kernel pays in its block that it does not pay alone, measured apart (one process, alternating,",
    "medians; load 1-5 from other processes on the 2 cores). None of it is particular to our kernels:",
    "",
    "- Fresh outputs. The f32 MLP's SwiGLU output (23 MiB) takes 5632 page faults when it is newly mapped.",
    "  In one process, with the freed block handed back to the system before each call (`malloc_trim(0)`),",
    "  the 2048x2816 SwiGLU took 21.8 ms against 1.27 ms writing into reused memory, Inductor's SwiGLU 22.6",
    "  against 1.26 ms, a clone of its input 20.6 against 0.60 ms (load 3.1): on this virtual machine a",
    "  fresh page costs every side alike, several microseconds. Whether an output is fresh is the",
    "  allocator's history (glibc unmaps freed memory past its trim threshold and maps large blocks anew),",
    "  not the kernel's: measuring the f32 MLP row alone, every in-block call of swiglu faulted its output",
    "  in (4434-4660 faults a call on average, three runs), none alone, and a clone of its input in its",
    "  place as many once each contender was warmed up; in a run of every row, none did. The eager block",
    "  faults in 4 such outputs a call (22496 faults), torch.compile's none: its graph writes SwiGLU into",
    "  the gate projection's buffer and folds the residual add into `addmm`.",
    "  `MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824` in the environment took the",
    "  swiglu's faults in the f32 MLP row from 4660 to 17 a call.",
    "- Caches. Between two calls in a block the matmuls stream some 50 MiB: the kernel's input has left the",
    "  32 MiB L3, and the host code (Python, torch's dispatcher, the call into the compiled code) every cache.",
    "  On one thread, right after `F.linear` (2048x1024 by 1024x2816), a call of RMS norm on 16 rows (16 us",
    "  back to back) took 280 us, its thread's CPU time as much as its wall time (work, not waiting);",
    "  Inductor's compiled RMS norm 342 against 22 us, eager `F.rms_norm` 256 against 11, a clone of the 64 KiB",
    "  input 78 against 1.7. Under load, 50 ms of scalar Python in between did about as much (240 us): other",
    "  processes on the core evict the same. At the block's size (2048x1024, 2 threads) our RMS norm took",
    "  557 us after `F.linear` against 194 back to back, Inductor's 630 against 200, a clone of the input",
    "  297 against 78.",
    "- Not OpenMP. libgomp's worker spins for 4-7 ms after any parallel region, torch's or ours (one pool,",
    "  the same thread), so a kernel right after a torch op finds it awake: a tiny kernel took 23.6 us on",
    "  2 threads and 24.6 us on 1 right after a 512x512 matmul (17 us back to back); after 20 ms idle",
    "  both took 242 us, the one-thread kernel too: the virtual CPU waking up, not the runtime.",
    "- Load. While other processes run, a 2-thread region waits whenever its worker is descheduled: calls",
    "  of 0.2-1.3 ms took 4-8 ms, with about 2 involuntary context switches each, torch's ops alike.",
]


def render_blocks(data: dict[str, Any]) -> str:
    """The markdown section for docs/benchmarks.md."""
    threads, rows = data["threads"], data["rows"]
    kernels = [(row, k) for row in rows for k in row["kernels"]]
    worst_row, worst = max(kernels, key=lambda pair: pair[1]["ratio"])
    lines = [
        SECTION,
        "",
        "`scripts/block_costs.py`: blocks of a model as a user writes them, with Helion kernels between torch ops,",
        f"each run three ways in one process on {threads} threads, in {data['rounds']} alternating rounds: `eager` (the",
        "block in torch: `F.rms_norm`, `F.silu(gate) * up`, `F.scaled_dot_product_attention`, `F.cross_entropy`),",
        "`torch.compile` of the whole block (Inductor; its compile time, excluded from the call times, in its own",
        "column), and `ours`: the same block with the examples' kernels (`examples/rms_norm.py`, `swiglu.py`,",
        "`attention.py`, `cross_entropy.py`, block sizes as in the Inductor section) compiled by `compile_kernel`",
        "(fast pipeline) in place of those ops. The matmuls (`F.linear`) are torch's on every side. The attention",
        "kernel takes `[batch * heads, sequence, head_dim]` tensors, so its block copies q, k, v into that layout",
        "and the output back, where `F.scaled_dot_product_attention` reads the transposed views. Ratios are",
        "medians over rounds of the within-round ratio; each contender's calls start after a pause of",
        f"{data['settle']:g} s, so that OpenMP workers still spinning after the previous contender's last call do not",
        f"slow it, and {data.get('warmup', 0)} untimed calls, so that its timed calls find the heap as its own last",
        "call left it (as in a model run over and over), not as another contender's did. `max abs error` is",
        "against the eager block's output.",
        "",
        "- MLP: RMS norm -> gate and up projections -> SwiGLU -> down projection + residual;",
        "- attention: q, k, v projections -> attention over the heads -> output projection (f32 only: the",
        "  attention example multiplies its f32 probabilities by the value tile as loaded, which Helion refuses",
        "  for bf16 values);",
        "- loss head: the logits' projection -> per-token cross entropy.",
        "",
        f"Load average of the shared machine at the end: {data['load']:.1f} on 2 cores.",
        "",
        "| block | dtype | sizes | eager (ms) | torch.compile (ms) | ours (ms) | ours / torch.compile | ours / eager "
        "| max abs error to eager (ours / torch.compile) | torch.compile compile (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {r['name']} | {r['dtype']} | {r['sizes']} | {r['eager_s'] * 1e3:.2f} | {r['compiled_s'] * 1e3:.2f} | "
              f"{r['ours_s'] * 1e3:.2f} | {r['compile_ratio']:.2f} | {r['eager_ratio']:.2f} | "
              f"{r['error']:.1e} / {r['compiled_error']:.1e} | {r['inductor_compile_s']:.1f} |" for r in rows]
    lines += [
        "",
        "Each kernel inside its block (`time.perf_counter` around the call, between the neighbouring torch ops)",
        "and alone (called back to back on the block's own inputs, in the same rounds): the median of the calls",
        "in a round, then over rounds; `in block / alone` is the median within-round ratio, for the whole call and",
        "for its compiled code (the rest is the host side: argument checks, Helion's host code, which allocates",
        "the output, and the launch); `page faults` the median per call (a fresh output of 23 MiB, newly mapped",
        "by the allocator, takes 5632 on first touch); `clone` is a torch op in the kernel's place, a clone of its",
        "first input (a fresh tensor of the same bytes), in block / alone, with its page faults in the block: what",
        "the same place does to a torch op; `share` is the kernel's part of the `ours` block's time.",
        "",
        "| block | dtype | kernel | in block (ms) | alone (ms) | in block / alone | compiled code in block / alone "
        "| page faults per call (in block / alone) | clone in block / alone (its page faults in block) "
        "| share of the block |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {r['name']} | {r['dtype']} | {k['name']} | {k['in_block_s'] * 1e3:.3f} | {k['alone_s'] * 1e3:.3f} | "
              f"{k['ratio']:.2f} | {k['code_ratio']:.2f} | {k['faults_in_block']:.0f} / {k['faults_alone']:.0f} | "
              f"{k['clone_ratio']:.2f} ({k['clone_faults_in_block']:.0f}) | {100 * k['share']:.1f}% |"
              for r, k in kernels]
    lines += ["", f"Largest in block / alone: {worst['ratio']:.2f} ({worst['name']} in the {worst_row['dtype']} "
                  f"{worst_row['name']} block).", *_torch_bounds(rows), "", *CAUSES, ""]
    return "\n".join(lines)


def _torch_bounds(rows: list[dict[str, Any]]) -> list[str]:
    """For each block slower than torch.compile's: whether its torch ops alone (the block's time
    less its kernels' time in the block) already take longer than torch.compile's whole block."""
    lines = []
    for row in rows:
        if row["compile_ratio"] <= 1:
            continue
        kernels_s = sum(k["in_block_s"] for k in row["kernels"])
        torch_s = row["ours_s"] - kernels_s
        verdict = ("longer than torch.compile's whole block: its torch ops bound it, whatever the kernels take"
                   if torch_s > row["compiled_s"] else
                   "less than torch.compile's whole block: the kernels' time decides")
        lines += ["", f"The {row['dtype']} {row['name']} block is {row['compile_ratio']:.2f}x torch.compile's time: "
                      f"its kernels take {kernels_s * 1e3:.2f} ms of its {row['ours_s'] * 1e3:.2f} ms, and its torch ops "
                      f"the other {torch_s * 1e3:.2f} ms, {verdict} ({row['compiled_s'] * 1e3:.2f} ms)."]
    return lines


if __name__ == "__main__":
    print(render_blocks(measure_blocks()))
