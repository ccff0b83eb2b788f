"""Choices users name by a string (an output type, a pipeline, a runtime), as enums.

A member is a ``str`` equal to its spelling, so ``compile_kernel(..., pipeline="fast")``
keeps working while the package compares members, never strings.
"""

from __future__ import annotations

import enum
import re
from typing import TypeVar

__all__ = ["Kind"]

K = TypeVar("K", bound="Kind")


class Kind(str, enum.Enum):
    """Base of the package's string enums: :meth:`parse` accepts a member or its spelling."""

    @classmethod
    def parse(cls: type[K], value: K | str) -> K:
        if isinstance(value, cls):
            return value
        spelled = cls._spelling(str(value))
        for member in cls:
            if member.value == spelled:
                return member
        noun = re.sub(r"(?<!^)(?=[A-Z])", " ", cls.__name__).lower()
        raise ValueError(f"unknown {noun} {value!r}; choose one of: {', '.join(m.value for m in cls)}")

    @classmethod
    def _spelling(cls, value: str) -> str:
        """How a string names a member (subclasses accept variant spellings)."""
        return value

    def __str__(self) -> str:
        return self.value
