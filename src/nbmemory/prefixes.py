"""terminal_allowed_prefixes (seed 000): command prefixes a person allowed "always".

A command is allowed when it starts with an allowed prefix at a word boundary
(``"git status"`` allows ``"git status --short"``, not ``"git statusx"``), is one
line, and has no shell control operator (``;``, ``&``, ``|``, backquote, ``$(``,
``<``, ``>``) after the prefix: ``"git status; rm -rf ~"`` is refused even though
it starts with an allowed prefix.  The table is global
to the store (seed 000 has no namespace for it).
"""

from __future__ import annotations

import re

from . import events as ev
from .errors import InvalidInput

#: Shell syntax that chains, substitutes or redirects commands.
_CONTROL = re.compile(r"[;&|`<>\n\r]|\$\(")


def _check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise InvalidInput(f"prefix must be text, got {type(prefix).__name__}")
    text = " ".join(prefix.split())
    if not text:
        raise InvalidInput("prefix is empty; pass the start of a command such as 'git status'")
    return ev.check_text(text, "prefix", max_bytes=4096)


class PrefixesMixin:
    """Allowed-prefix methods of :class:`nbmemory.Memory`."""

    def add_allowed_prefix(self, prefix: str) -> bool:
        """Allow commands starting with ``prefix``; False if it was already allowed."""
        self._check_open()
        prefix = _check_prefix(prefix)
        rows = self.store.fetchall(
            "INSERT INTO terminal_allowed_prefixes VALUES (?, ?) ON CONFLICT DO NOTHING"
            " RETURNING prefix",
            [prefix, ev.utcnow()],
        )
        if rows:
            self._audit("allow_prefix", [prefix], None)
        return bool(rows)

    def allowed_prefixes(self) -> list[str]:
        """Every allowed prefix, sorted."""
        self._check_open()
        return [
            r[0]
            for r in self.store.fetchall(
                "SELECT prefix FROM terminal_allowed_prefixes ORDER BY prefix"
            )
        ]

    def remove_allowed_prefix(self, prefix: str) -> bool:
        """Withdraw a prefix; True if it was allowed."""
        self._check_open()
        prefix = _check_prefix(prefix)
        rows = self.store.fetchall(
            "DELETE FROM terminal_allowed_prefixes WHERE prefix = ? RETURNING prefix", [prefix]
        )
        if rows:
            self._audit("remove_prefix", [prefix], None)
        return bool(rows)

    def is_command_allowed(self, command: str) -> bool:
        """Whether ``command`` may run without asking (see the module doc for the rules)."""
        self._check_open()
        if not isinstance(command, str):
            raise InvalidInput(f"command must be text, got {type(command).__name__}")
        if "\n" in command.strip() or "\r" in command.strip():
            return False  # a second line is a second command
        text = " ".join(command.split())
        if not text:
            return False
        for prefix in self.allowed_prefixes():
            if text != prefix and not text.startswith(prefix + " "):
                continue
            if _CONTROL.search(text[len(prefix) :]):
                continue  # chains, substitutes or redirects past the allowed part
            return True
        return False
