"""Allowed command prefixes (``terminal_allowed_prefixes``): what a person allowed "always".

A command is allowed when it starts with an allowed prefix at a word boundary
(``"git status"`` allows ``"git status --short"``, not ``"git statusx"``), is one
line, and has no shell control operator (``;``, ``&``, ``|``, backquote, ``$(``,
``<``, ``>``) after the prefix: ``"git status; rm -rf ~"`` is refused even though
it starts with an allowed prefix.  The table is global
to the store (the Rust agent's schema has no namespace for it).
"""

from __future__ import annotations

import re

from ..core import Core
from ..errors import InvalidInput
from ..validation import check_text, utcnow

#: Shell syntax that chains, substitutes or redirects commands.
_CONTROL = re.compile(r"[;&|`<>\n\r]|\$\(")


def _check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise InvalidInput(f"prefix must be text, got {type(prefix).__name__}")
    text = " ".join(prefix.split())
    if not text:
        raise InvalidInput("prefix is empty; pass the start of a command such as 'git status'")
    return check_text(text, "prefix", max_bytes=4096)


class Prefixes:
    """``add``, ``list``, ``remove`` and ``allows`` (``mem.prefixes``)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def add(self, prefix: str) -> bool:
        """Allow commands starting with ``prefix``; False if it was already allowed."""
        prefix = _check_prefix(prefix)
        with self.core.writer.transaction() as tx:
            added = tx.prefixes.add(prefix, utcnow())
            if added:
                tx.audit("allow_prefix", [prefix], None)
        return added

    def list(self) -> list[str]:
        """Every allowed prefix, sorted."""
        return self.core.store.prefixes.all()

    def remove(self, prefix: str) -> bool:
        """Withdraw a prefix; True if it was allowed."""
        prefix = _check_prefix(prefix)
        with self.core.writer.transaction() as tx:
            removed = tx.prefixes.remove(prefix)
            if removed:
                tx.audit("remove_prefix", [prefix], None)
        return removed

    def allows(self, command: str) -> bool:
        """Whether ``command`` may run without asking (see the module doc for the rules)."""
        if not isinstance(command, str):
            raise InvalidInput(f"command must be text, got {type(command).__name__}")
        if "\n" in command.strip() or "\r" in command.strip():
            return False  # a second line is a second command
        text = " ".join(command.split())
        if not text:
            return False
        for prefix in self.list():
            if text != prefix and not text.startswith(prefix + " "):
                continue
            if _CONTROL.search(text[len(prefix) :]):
                continue  # chains, substitutes or redirects past the allowed part
            return True
        return False
