"""The JIT worker's message format: large tensors cross in shared memory, unchanged.

Both ends run in this process over a real pipe, so what arrives can be compared with what
was sent bit for bit; tests/test_autotune.py covers the same through the worker process.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Pipe
from typing import Any

import pytest
import torch

from helion_mlir.runtime.tuning.protocol import SHARED_MEMORY, SHARED_MEMORY_MIN_BYTES, Traffic, receive, send

pytestmark = pytest.mark.skipif(not SHARED_MEMORY, reason="needs memfd_create and /proc/self/fd (Linux)")

LARGE = SHARED_MEMORY_MIN_BYTES // 4 * 3  # elements of a 4-byte dtype well past the threshold


def _round_trip(message: Any) -> tuple[Any, Traffic, Traffic]:
    sending, receiving = Pipe(duplex=True)
    sent, received = Traffic(), Traffic()
    with sending, receiving:
        send(sending, message, sent)
        return receive(receiving, received), sent, received


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and a.storage_offset() == b.storage_offset() and a.requires_grad == b.requires_grad
            and torch.equal(_bits(a.detach().contiguous()), _bits(b.detach().contiguous())))


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(LARGE // 64, 64, generator=g)
    return {
        "f32": torch.randn(LARGE, generator=g),
        "transposed": base.t(),
        "strided slice": base[1::3, 5:40:2],
        "zero-size": torch.empty(0, 7),
        "zero-size view of a large storage": base[:, 64:],
        "bf16": torch.randn(LARGE, generator=g).to(torch.bfloat16),
        "int64": torch.randint(-2**62, 2**62, (LARGE,), generator=g, dtype=torch.int64),
        "bool": torch.rand(LARGE * 4, generator=g) > 0.5,
        "small int8": torch.arange(-8, 8, dtype=torch.int8),
        "nan and -0.0": torch.tensor([float("nan"), -0.0, float("inf")]).repeat(LARGE),
        "requires grad": torch.randn(LARGE, generator=g).requires_grad_(),
        "scalar": torch.tensor(3.5),
    }


def test_tensors_of_every_layout_dtype_and_size_arrive_bit_for_bit() -> None:
    tensors = _tensors()
    got, sent, received = _round_trip(tensors)
    for name, tensor in tensors.items():
        assert _same(got[name], tensor), name
    assert sent.shared_bytes == received.shared_bytes > 0


def test_large_tensors_do_not_go_through_the_pipe() -> None:
    x = torch.randn(16 * LARGE)
    got, sent, received = _round_trip(("run", "key", (x, 2.0)))
    assert torch.equal(got[2][0], x)
    assert sent.pipe_bytes < 4096 and received.pipe_bytes == sent.pipe_bytes
    assert sent.shared_bytes == x.nbytes


def test_views_of_one_storage_arrive_as_views_of_one_copy() -> None:
    base = torch.randn(LARGE)
    got, _, received = _round_trip((base, base[10:], base, base.view(2, -1)))
    assert got[0] is got[2]  # one object sent twice
    assert received.shared_bytes == base.nbytes  # one storage, copied once
    assert len({t.untyped_storage().data_ptr() for t in got}) == 1
    got[0][10] = 42.0  # writes through one view show in the others, as in the sender
    assert got[1][0] == 42.0 and got[3][0, 10] == 42.0 and base[10] != 42.0


def test_what_arrived_is_the_receivers_alone() -> None:
    """The sender reusing its tensors cannot change a message already sent, nor the other way."""
    x = torch.randn(LARGE)
    kept = x.clone()
    (got,), _, _ = _round_trip((x,))
    x.fill_(1.0)
    assert torch.equal(got, kept)
    got.fill_(2.0)
    assert torch.equal(x, torch.ones(LARGE))


def test_round_trips_leave_no_descriptor_open() -> None:
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    _round_trip(_tensors())  # first use: anything torch opens once
    before = open_descriptors()
    kept = [_round_trip(_tensors())[0] for _ in range(5)]  # received tensors stay alive
    assert open_descriptors() == before
    assert all(_same(k["f32"], kept[0]["f32"]) for k in kept)
