"""Learnings appended to AGENTS.md by the agent itself.

Vectora's state persistence (003) keeps the agent's long-term knowledge in AGENTS.md:
"Atualizações incrementais: Novos aprendizados são anexados ao AGENTS.md e
re-embedados sem re-indexar o arquivo inteiro" (new learnings are appended to
AGENTS.md and re-embedded without re-indexing the whole file).
:meth:`Learnings.add_learning` does that:

1. the text (and the section's name) is redacted first, so no secret reaches the
   file a person reads, nor the store;
2. it is appended as a list item (``- text``) at the end of the section whose
   heading (or heading path, ``Project > Preferences``) is ``section``; a section
   that is not there is added at the end of the file, and a file that is not there
   is created;
3. the file is synced (:func:`~.agents_md.sync`): only that section is updated and
   re-embedded;
4. an audit row ``agents_md_learning`` names the section and how many secrets were
   redacted, never the text.

The file is written whole to a temporary file beside it and renamed over it, so a
reader (a person, the watcher) never sees half of it.  Writers of this process take
turns; another process appending at the same instant is not guarded against.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..atomic import write_text_atomically
from ..core import Core
from ..errors import InvalidInput
from ..file_kinds import HEAD_BYTES, database_kind, is_binary, named_like_database
from ..redaction import check_ingestable
from ..store.files import read_span
from ..validation import MAX_NAME_BYTES, check_path, check_text, shown
from .agents_md import SyncResult, read_agents_file, scan_lines, section_id, sync

_WRITING = threading.Lock()

#: The names of a file a learning may be appended to: Markdown or plain text (a file
#: with no suffix, such as ``.cursorrules``, too).  Any other (``data.csv``, ``app.py``,
#: ``agent.duckdb``) is another program's: Markdown appended to it would break it.
TEXT_SUFFIXES = frozenset({"", ".md", ".markdown", ".mdx", ".mdc", ".txt"})


def check_learning_file(file: Path) -> None:
    """Refuse, before anything is written, a file a learning must not be appended to: a
    name that is not Markdown or text, a database (the store's own file among them), a
    binary file.  Its first bytes are read through the store layer, which keeps DuckDB's
    lock of a store this process has open."""
    head = read_span(file, 0, HEAD_BYTES) if file.is_file() else None
    kind = database_kind(head)
    if kind is not None or named_like_database(file):
        raise InvalidInput(
            f"{file} is {f'a {kind} database' if kind else 'named like a database'}; "
            "nothing was written. Pass a Markdown file such as AGENTS.md"
        )
    if file.suffix.lower() not in TEXT_SUFFIXES:
        raise InvalidInput(
            f"{file} is a {file.suffix} file, not Markdown; nothing was written. "
            "Pass a Markdown file such as AGENTS.md"
        )
    if is_binary(head):
        raise InvalidInput(
            f"{file} is not a text file; nothing was written. Pass a Markdown file such as AGENTS.md"
        )


def append_learning(markdown: str, section: str, text: str) -> tuple[str, str]:
    """``markdown`` with ``- text`` appended to ``section`` (added at the end when
    missing), and the key (heading path) of the section that holds it.

    ``section`` matches a heading's text or its heading path (``A > B``), ignoring
    case; the first match wins.  The item goes after the section's last non-blank
    line, before the next heading.  A missing section is a level-2 heading under a
    single level-1 title, else at the level of the file's top headings.
    """
    lines = markdown.splitlines()
    wanted = section.strip().casefold()
    stack: list[tuple[int, str]] = []
    headings: list[tuple[int, int]] = []  # (line index, level)
    start: int | None = None
    key = ""
    for index, (_, found) in enumerate(scan_lines(markdown)):
        if found is None:
            continue
        level, heading = found
        headings.append((index, level))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        path = " > ".join(h for _, h in stack)
        if start is None and wanted in (heading.casefold(), path.casefold()):
            start, key = index, path
    item = _item(text)
    if start is not None:
        end = next((i for i, _ in headings if i > start), len(lines))
        last = end - 1
        while last > start and not lines[last].strip():
            last -= 1
        if last == start:  # a heading with no body yet: a blank line, then the item
            return _joined([*lines[: start + 1], "", *item, *lines[start + 1 :]]), key
        return _joined([*lines[: last + 1], *item, *lines[last + 1 :]]), key
    levels = [level for _, level in headings]
    level = 2 if levels.count(1) == 1 and levels[0] == 1 else min(levels, default=2)
    name = section.split(" > ")[-1].strip()
    while stack and stack[-1][0] >= level:
        stack.pop()
    key = " > ".join([*(h for _, h in stack), name])
    while lines and not lines[-1].strip():
        lines.pop()
    block = ["#" * level + " " + name, "", *item]
    return _joined([*lines, "", *block] if lines else block), key


def _item(text: str) -> list[str]:
    """The learning as a Markdown list item (continuation lines indented under it)."""
    first, *rest = text.strip().splitlines()
    head = first if first.lstrip().startswith(("- ", "* ")) else f"- {first}"
    return [head, *(f"  {line}" if line.strip() else "" for line in rest)]


def _joined(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


class Learnings:
    """``add_learning`` (``mem.agents_md.add_learning``)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def add_learning(
        self,
        section: str,
        text: str,
        *,
        path: str | os.PathLike[str] | None = None,
        namespace: str | None = None,
    ) -> SyncResult:
        """Append ``text`` as a list item to ``section`` of AGENTS.md, then sync the file.

        ``path``: the file (default: ``Settings.agents_file``, else ``AGENTS.md`` in the
        working folder); created, like the section, when missing.  The text and the
        section's name are redacted before anything is written; only that section is
        re-embedded; an audit row ``agents_md_learning`` names the section.  Returns
        what the sync did; ``result.learning`` is the key of the section that holds it.
        """
        ns = self.core.ns(namespace)
        if not isinstance(section, str) or not isinstance(text, str):
            bad, value = ("section", section) if not isinstance(section, str) else ("text", text)
            raise InvalidInput(f"{bad} must be a string, got {shown(value)}")
        check_text(section, "section", max_bytes=MAX_NAME_BYTES)
        if "\n" in section.strip() or section.strip().startswith("#") or not section.strip():
            raise InvalidInput(
                f"section must be a heading's text on one line, without '#', got {shown(section)}"
            )
        check_text(text, "text", max_bytes=self.core.settings.max_content_bytes)
        if not text.strip():
            raise InvalidInput("text is blank; pass the learning to append")
        if self.core.store.read_only:
            raise InvalidInput("this store is read-only; open it writable to add a learning")
        default = self.core.settings.agents_file or "AGENTS.md"
        file = check_ingestable(check_path(default if path is None else path)).resolve()
        check_learning_file(file)
        safe_section, hidden_in_section = self.core.redact(section.strip())
        safe_text, hidden = self.core.redact(text)
        with _WRITING:
            if file.exists():
                _, before = read_agents_file(file)
            elif not file.parent.is_dir():
                raise InvalidInput(f"no folder {file.parent} for {file.name}; create it first")
            else:
                before = ""
            after, key = append_learning(before, safe_section, safe_text)
            write_text_atomically(file, after)
            result = sync(self.core, file, namespace=ns)
        result.learning = key
        redacted = hidden + hidden_in_section
        with self.core.writer.transaction() as tx:
            tx.audit(
                "agents_md_learning",
                [section_id(ns, result.path, key)],
                ns,
                {
                    "source": result.path,
                    "sections": [key],
                    **({"redacted": redacted} if redacted else {}),
                },
            )
        return result
