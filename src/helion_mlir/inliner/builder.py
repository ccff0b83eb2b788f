"""Accumulate the text of one MLIR module.

The emitter writes ops line by line and inlines torch-mlir's output into the same module,
so it needs one authority for SSA names and block labels (no name may be defined twice),
and one place that collects what lives outside ``module { ... }``: alias definitions and
the ``dialect_resources`` section that ``dense_resource<...>`` constants point into.
:class:`MLIRBuilder` is that place. It only assembles text: the caller verifies the
rendered module (see :mod:`helion_mlir.verify`).

A :class:`Slot` keeps a place in the body for text that is written later: the emitter
names the results of an ATen op at once and fills in its inlined body after one
torch-mlir pipeline run has lowered every ATen op of the kernel.
"""

from __future__ import annotations

import logging
import re
import textwrap
import types
from collections.abc import Iterator, KeysView, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import MLIRSyntaxError
from .lexer import TokenKind, is_bare_identifier, is_suffix_id, tokenize

__all__ = ["MLIRBuilder", "Slot", "format_resource_key"]

log = logging.getLogger(__name__)

_INDENT = "  "
_HINT_JUNK = re.compile(r"[^A-Za-z0-9_$.\-]")


def format_resource_key(key: str) -> str:
    """A resource key as written in ``dense_resource<...>`` and in the resources section."""
    return key if is_bare_identifier(key) else f'"{key}"'


def _sanitize_hint(hint: str, default: str) -> str:
    """Keep the characters a name may contain; a name may not start with a digit unless all digits."""
    cleaned = _HINT_JUNK.sub("", hint.lstrip("%^"))
    if not cleaned:
        return default
    return default + cleaned if cleaned[0].isdigit() else cleaned


def _check_string_body(what: str, body: str) -> None:
    """Reject text that would not stay one string literal once wrapped in quotes."""
    quoted = f'"{body}"'
    try:
        tokens = tokenize(quoted)
    except MLIRSyntaxError:
        tokens = []
    if len(tokens) != 1 or tokens[0].kind is not TokenKind.STRING:
        raise MLIRSyntaxError(f"{what} {body!r} is not the body of an MLIR string literal")


@dataclass(eq=False)
class Slot:
    """A place in the body, at the indentation it was opened at, filled in later."""

    depth: int
    lines: list[str] = field(default_factory=list)
    filled: bool = False


class MLIRBuilder:
    """Text of one MLIR module: unique names, indented body lines, aliases and resources."""

    def __init__(self) -> None:
        self._lines: list[str | Slot] = []
        self._target = self._lines  # where emit() appends: the body, or a slot being filled
        self._depth = 0
        # dicts used as ordered sets: their key views are live, read-only and set-like.
        self._names: dict[str, None] = {}
        self._labels: dict[str, None] = {}
        self._counters: dict[str, int] = {}
        self._aliases: dict[str, str] = {}
        self._resources: dict[str, dict[str, str]] = {}

    # ----------------------------------------------------------------- names
    def _unique(self, sigil: str, hint: str, taken: dict[str, None]) -> str:
        # A hint ending in a digit gets a separator, so 'x1' + 3 does not read as 'x13'.
        separator = "_" if hint[-1].isdigit() else ""
        counter = self._counters.get(sigil + hint, 0)
        while True:
            name = f"{sigil}{hint}{separator}{counter}"
            counter += 1
            if name not in taken:
                self._counters[sigil + hint] = counter
                taken[name] = None
                return name

    def fresh(self, hint: str = "v") -> str:
        """A new SSA name (``%v12``) that was never handed out or reserved before."""
        return self._unique("%", _sanitize_hint(hint, "v"), self._names)

    def fresh_block(self, hint: str = "bb") -> str:
        """A new block label (``^bb3``) that was never handed out or reserved before."""
        return self._unique("^", _sanitize_hint(hint, "bb"), self._labels)

    def reserve(self, name: str) -> None:
        """Mark a name chosen elsewhere (``%x``, ``^entry``) as taken; raise if it already is."""
        sigil, body = name[:1], name[1:]
        if sigil not in ("%", "^") or not is_suffix_id(body):
            raise MLIRSyntaxError(f"{name!r} is not an SSA name (%name) or block label (^name)")
        taken = self._names if sigil == "%" else self._labels
        if name in taken:
            raise MLIRSyntaxError(f"{name} is already taken in this module")
        taken[name] = None

    def is_taken(self, name: str) -> bool:
        """Whether ``name`` (an SSA name or a block label) was handed out or reserved."""
        return name in self._names or name in self._labels

    @property
    def names(self) -> KeysView[str]:
        """Every SSA name handed out or reserved so far (a live, read-only, set-like view)."""
        return self._names.keys()

    # ------------------------------------------------------------------ text
    def emit(self, text: str) -> None:
        """Append ``text`` (one or more lines) at the current indentation.

        Multi-line text keeps its internal structure: it is dedented by its own smallest
        indentation, then indented to the current level. Blank lines stay empty.
        """
        prefix = _INDENT * self._depth
        for line in textwrap.dedent(text).splitlines() or [""]:
            stripped = line.rstrip()
            self._target.append(prefix + stripped if stripped else "")

    @contextmanager
    def indented(self) -> Iterator[None]:
        """Emit what the ``with`` body emits one level deeper (a nested region)."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    @contextmanager
    def block(self, header: str, footer: str = "}") -> Iterator[None]:
        """Emit ``header``, the ``with`` body one level deeper, then ``footer``."""
        self.emit(header)
        with self.indented():
            yield
        self.emit(footer)

    def slot(self) -> Slot:
        """Keep the current place (and indentation) for text emitted later with :meth:`filling`."""
        if self._target is not self._lines:
            raise MLIRSyntaxError("a slot cannot be opened while another slot is being filled")
        slot = Slot(self._depth)
        self._lines.append(slot)
        return slot

    @contextmanager
    def filling(self, slot: Slot) -> Iterator[None]:
        """Emit what the ``with`` body emits into ``slot`` (once), at the slot's indentation."""
        if slot.filled or self._target is not self._lines:
            raise MLIRSyntaxError("a slot is filled once, and one slot at a time")
        slot.filled = True
        depth, self._depth, self._target = self._depth, slot.depth, slot.lines
        try:
            yield
        finally:
            self._depth, self._target = depth, self._lines

    @property
    def open_slots(self) -> int:
        """How many slots still wait for their text (rendering needs none)."""
        return sum(1 for line in self._lines if isinstance(line, Slot) and not line.filled)

    # -------------------------------------------------------- module sections
    @property
    def aliases(self) -> Mapping[str, str]:
        """Alias definitions in the order they render: name (``#map``, ``!t``) -> definition."""
        return types.MappingProxyType(self._aliases)

    @property
    def resources(self) -> Mapping[str, Mapping[str, str]]:
        """Resource blobs by dialect, then key (the text inside the blob's quotes)."""
        return types.MappingProxyType(
            {dialect: types.MappingProxyType(entries) for dialect, entries in self._resources.items()}
        )

    def add_alias(self, name: str, definition: str) -> str:
        """Define the attribute alias ``#name`` or type alias ``!name``; return ``name``.

        Defining the same alias again with the same definition is a no-op; a different
        definition under a taken name raises, since uses of the alias would change meaning.
        """
        sigil, body = name[:1], name[1:]
        if sigil not in ("#", "!") or not is_bare_identifier(body) or "." in body:
            raise MLIRSyntaxError(f"{name!r} is not an alias name (#name or !name without dots)")
        definition = definition.strip()
        if not definition or "\n" in definition:
            raise MLIRSyntaxError(f"the definition of alias {name} must be one non-empty line")
        known = self._aliases.get(name)
        if known is not None and known != definition:
            raise MLIRSyntaxError(f"alias {name} is already defined as {known!r}, not {definition!r}")
        self._aliases[name] = definition
        return name

    def add_resource(self, dialect: str, key: str, blob: str) -> str:
        """Add a ``dialect_resources`` entry; return the key to reference it by.

        ``blob`` is the text inside the entry's string literal (``0x04000000...``). Adding
        an identical entry again returns its key; a different blob under a taken key is
        stored under a new key (``key_1``, ...), which is returned.
        """
        if not is_bare_identifier(dialect):
            raise MLIRSyntaxError(f"{dialect!r} is not a dialect name")
        if not key:
            raise MLIRSyntaxError("a resource key must not be empty")
        _check_string_body("resource key", key)
        _check_string_body("resource blob", blob)
        entries = self._resources.setdefault(dialect, {})
        candidate, suffix = key, 0
        while candidate in entries and entries[candidate] != blob:
            suffix += 1
            candidate = f"{key}_{suffix}"
        if candidate != key:
            log.debug("resource key %s:%s renamed to %s (different blob)", dialect, key, candidate)
        entries[candidate] = blob
        return candidate

    # ---------------------------------------------------------------- render
    def render(self) -> str:
        """The whole module: alias definitions, ``module { ... }``, then the resources section."""
        if self.open_slots:
            raise MLIRSyntaxError(f"{self.open_slots} slot(s) of the module were never filled")
        out = [f"{name} = {definition}" for name, definition in self._aliases.items()]
        out.append("module {")
        for entry in self._lines:
            lines = entry.lines if isinstance(entry, Slot) else [entry]
            out.extend(_INDENT + line if line else "" for line in lines)
        out.append("}")
        if self._resources:
            out += ["", "{-#", _INDENT + "dialect_resources: {"]
            dialects = list(self._resources.items())
            for d_index, (dialect, entries) in enumerate(dialects):
                out.append(_INDENT * 2 + f"{dialect}: {{")
                items = list(entries.items())
                for e_index, (key, blob) in enumerate(items):
                    comma = "," if e_index < len(items) - 1 else ""
                    out.append(_INDENT * 3 + f'{format_resource_key(key)}: "{blob}"{comma}')
                out.append(_INDENT * 2 + ("}," if d_index < len(dialects) - 1 else "}"))
            out += [_INDENT + "}", "#-}"]
        return "\n".join(out) + "\n"
