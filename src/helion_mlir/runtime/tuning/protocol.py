"""What the tuning process and the JIT worker (:mod:`.worker`, :mod:`.worker_process`)
send each other: candidate modules, compiled functions' signatures, pickled messages."""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ...output_type import OutputType
from ..params import Param, TensorParam

__all__ = ["CandidateModule", "Signature", "receive", "send"]


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


def send(conn: Connection, message: object) -> None:
    # Plain pickle: torch's multiprocessing reductions would pass tensors as shared-memory
    # handles authenticated for multiprocessing's own children, which the worker is not.
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive(conn: Connection) -> Any:
    return pickle.loads(conn.recv_bytes())
