"""What the tuning process and the JIT worker (:mod:`.worker`, :mod:`.worker_process`)
send each other: candidate modules, compiled functions' signatures, pickled messages.

Messages are pickled through the pipe, except the data of large tensors: a tensor whose
storage holds at least :data:`SHARED_MEMORY_MIN_BYTES` travels as a description (dtype,
sizes, strides, offset) in the pickle, and its storage's bytes are copied into an anonymous
shared-memory file (``memfd_create``) whose descriptor is passed beside the message
(``SCM_RIGHTS`` over the pipe's Unix socket). The sender closes its copy once sent, so the
receiver owns the only one: nothing the sender does later can change what was received, and
the kernel frees the memory when the receiver drops its tensors or dies. The file has no
name, so a killed process leaves nothing behind in ``/dev/shm``. Tensors sharing a storage
in one message share one copy of it on the other side, as pickled tensors do.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import socket
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import torch

from ...output_type import OutputType
from ..params import Param, TensorParam

__all__ = ["SHARED_MEMORY", "SHARED_MEMORY_MIN_BYTES", "CandidateModule", "Signature", "Traffic", "receive", "send"]

#: Tensors whose storage is at least this large cross in shared memory, smaller ones pickled.
SHARED_MEMORY_MIN_BYTES = 1 << 16
#: Whether this system can pass shared memory (Linux: ``memfd_create`` and ``/proc/self/fd``).
SHARED_MEMORY = hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")
#: Descriptors passed in one ``sendmsg`` (below Linux's SCM_MAX_FD of 253).
_FDS_PER_MESSAGE = 250


@dataclass(frozen=True)
class CandidateModule:
    """What determines a candidate's compiled function: the module and how it is compiled."""

    text: str
    func_name: str
    output_type: OutputType
    pipeline: str
    threads: int
    in_place: bool

    @property
    def key(self) -> str:
        """Candidates with equal keys compile to the same code (the autotuner times one)."""
        options = f"{self.func_name}|{self.output_type.value}|{self.pipeline}|{self.threads}|{self.in_place}"
        return hashlib.sha256(f"{options}\n{self.text}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Signature:
    """What a caller needs to know of a compiled function."""

    params: tuple[Param, ...]
    results: tuple[TensorParam, ...]
    held_by: tuple[int | None, ...]


@dataclass
class Traffic:
    """Bytes one side has sent or received: through the pipe, and in shared memory."""

    pipe_bytes: int = 0
    shared_bytes: int = 0
    messages: int = 0


def _shareable(value: object) -> bool:
    return (
        SHARED_MEMORY
        and type(value) is torch.Tensor
        and value.device.type == "cpu"
        and value.layout == torch.strided
        and not value.is_quantized
        and not value.is_conj()
        and not value.is_neg()
        and value.untyped_storage().nbytes() >= SHARED_MEMORY_MIN_BYTES
    )


def _map(fd: int, nbytes: int) -> torch.UntypedStorage:
    """The shared-memory file ``fd`` mapped as a storage (the mapping keeps no descriptor)."""
    return torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=nbytes, dtype=torch.uint8).untyped_storage()


class _Pickler(pickle.Pickler):
    """Pickles large tensors as references to storages copied into shared memory."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.storages: dict[tuple[int, int], int] = {}  # (data pointer, bytes) -> index
        self.tensors: dict[int, int] = {}  # id -> number, so a tensor sent twice arrives as one object
        self.fds: list[int] = []
        self.shared_bytes = 0

    def persistent_id(self, obj: object) -> tuple[Any, ...] | None:
        if not _shareable(obj):
            return None
        tensor: torch.Tensor = obj  # type: ignore[assignment]
        storage = tensor.untyped_storage()
        nbytes = storage.nbytes()
        index = self.storages.get((storage.data_ptr(), nbytes))
        if index is None:
            index = self.storages[(storage.data_ptr(), nbytes)] = len(self.fds)
            fd = os.memfd_create("helion-mlir-tensor", os.MFD_CLOEXEC)
            self.fds.append(fd)
            os.ftruncate(fd, nbytes)
            _map(fd, nbytes).copy_(storage)
            self.shared_bytes += nbytes
        number = self.tensors.setdefault(id(tensor), len(self.tensors))
        return ("tensor", number, index, nbytes, tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()),
                tensor.storage_offset(), tensor.requires_grad)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, fds: list[int]) -> None:
        super().__init__(file)
        self.fds = fds
        self.storages: dict[int, torch.UntypedStorage] = {}
        self.tensors: dict[int, torch.Tensor] = {}
        self.shared_bytes = 0

    def persistent_load(self, pid: tuple[Any, ...]) -> torch.Tensor:
        kind, number, index, nbytes, dtype, shape, stride, offset, requires_grad = pid
        if kind != "tensor":
            raise pickle.UnpicklingError(f"unknown reference {kind!r}")
        if number in self.tensors:
            return self.tensors[number]
        storage = self.storages.get(index)
        if storage is None:
            storage = self.storages[index] = _map(self.fds[index], nbytes)
            self.shared_bytes += nbytes
        tensor = torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride).requires_grad_(requires_grad)
        self.tensors[number] = tensor
        return tensor


def send(conn: Connection, message: object, traffic: Traffic | None = None) -> None:
    """Send ``message``: a pickle (its first 4 bytes the number of shared-memory files),
    then the files' descriptors, one byte each batch. The sender's descriptors are closed
    whether or not the message went."""
    # Not torch's multiprocessing reductions: they pass storages through a descriptor server
    # authenticated for multiprocessing's own children, which the worker is not.
    buffer = io.BytesIO()
    buffer.write(bytes(4))
    pickler = _Pickler(buffer)
    try:
        pickler.dump(message)
        payload = buffer.getbuffer()
        payload[:4] = len(pickler.fds).to_bytes(4, "little")
        conn.send_bytes(payload)
        del payload
        if pickler.fds:
            with socket.socket(fileno=os.dup(conn.fileno())) as sock:
                for start in range(0, len(pickler.fds), _FDS_PER_MESSAGE):
                    socket.send_fds(sock, [b"\0"], pickler.fds[start:start + _FDS_PER_MESSAGE])
    finally:
        for fd in pickler.fds:
            os.close(fd)
    if traffic is not None:
        traffic.pipe_bytes += buffer.getbuffer().nbytes
        traffic.shared_bytes += pickler.shared_bytes
        traffic.messages += 1


def receive(conn: Connection, traffic: Traffic | None = None) -> Any:
    """Receive a message that :func:`send` sent."""
    data = conn.recv_bytes()
    count = int.from_bytes(data[:4], "little")
    fds: list[int] = []
    try:
        if count:
            with socket.socket(fileno=os.dup(conn.fileno())) as sock:
                while len(fds) < count:
                    message, received, flags, _ = socket.recv_fds(sock, 1, min(_FDS_PER_MESSAGE, count - len(fds)))
                    fds += received
                    if not message:
                        raise EOFError("the pipe closed before the shared-memory files of a message came")
                    if flags & socket.MSG_CTRUNC or not received:
                        raise OSError("the shared-memory files of a message did not arrive (descriptor limit?)")
        unpickler = _Unpickler(io.BytesIO(data[4:]), fds)
        message = unpickler.load()
    finally:
        for fd in fds:
            os.close(fd)
    if traffic is not None:
        traffic.pipe_bytes += len(data)
        traffic.shared_bytes += unpickler.shared_bytes
        traffic.messages += 1
    return message
