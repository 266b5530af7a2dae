"""The part of a long memory :meth:`Context.to_prompt` writes when it does not fit whole.

An excerpt is ``text[start:stop]`` on the memory's line, marked: "… " where it
starts after the text's beginning, " … [excerpt]" where it stops before its end.
It starts at the beginning of the line of the passage that matched the query (else
at the text's beginning: :func:`line_start`) and runs to the passage's end, or less
when the room is less (:func:`cut_to_fit`); with room left once the memories ranked
below it are in, it runs on past the passage, then starts earlier
(:func:`start_earlier`).

Markdown code fences stay balanced: an excerpt cut inside a ```` ``` ```` block
closes it before the mark (else the mark and every later memory line of the prompt
read as code), and one starting inside a block opens it again with the block's own
fence line (else only the closing fence is there, and what follows the block reads
as code).  These characters are part of the line the room is counted on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

#: A fence line (CommonMark): up to three spaces, then ``` or ~~~ (or longer), then
#: an info string such as ``python``.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")

#: How far a cut moves back to end at a space, and a start forward to begin a line.
_SNAP_END, _SNAP_LINE, _SNAP_WORD = 40, 80, 40

START_MARK, END_MARK = "…", "… [excerpt]"


def indented(text: str) -> str:
    """``text`` with every line after the first indented by two spaces, each line
    ending in "\\n".  Every line boundary :meth:`str.splitlines` knows (a bare "\\r"
    of a progress bar, "\\r\\n", U+2028/U+2029, "\\x0b", "\\x0c", "\\x1c"-"\\x1e",
    "\\x85") is one, not only "\\n": a reader that splits the prompt so would
    otherwise see a line of a tool's output such as ``[2026-03-05 10:00] user: …``
    as a memory of its own."""
    return "\n  ".join(text.splitlines())


@dataclass(frozen=True)
class Fence:
    """A fenced code block of a text, as character offsets."""

    #: Where its opening fence line starts, and where that line's fence run ends
    open_start: int
    run_stop: int
    #: Where its closing fence line starts (the text's end for a block never closed)
    close_start: int
    #: The opening line as written (``` ```python ```), to open it again
    opener: str
    #: The fence run (``` ``` ``` or longer, or ``~~~``), to close it
    run: str


def fences(text: str) -> list[Fence]:
    """The fenced code blocks of ``text``, in order, by the lines ``str.splitlines``
    cuts (the lines of the prompt): a closing fence is of the opener's character and
    at least as long, with nothing after it."""
    found: list[Fence] = []
    opened: tuple[int, int, str, str] | None = None
    stop = 0
    for line in text.splitlines(keepends=True):
        start, stop = stop, stop + len(line)
        bare = line.splitlines()[0] if line.splitlines() else ""
        match = _FENCE.fullmatch(bare)
        if match is None:
            continue
        run, info = match.groups()
        if opened is None:
            if _opens(match):
                opened = (start, start + match.end(1), bare.strip(), run)
        elif run[0] == opened[3][0] and len(run) >= len(opened[3]) and not info.strip():
            found.append(Fence(opened[0], opened[1], start, opened[2], opened[3]))
            opened = None
    if opened is not None:
        found.append(Fence(opened[0], opened[1], len(text), opened[2], opened[3]))
    return found


def _opens(match: re.Match[str]) -> bool:
    """Whether a fence line can open a block (a ``` info string has no backtick)."""
    run, info = match.groups()
    return run[0] != "`" or "`" not in info


def render(lead: str, text: str, start: int, stop: int, blocks: list[Fence]) -> str:
    """The line of the excerpt ``text[start:stop]``: ``lead``, the marks, a fence
    opened again or closed where the excerpt starts or stops inside a block."""
    body = text[start:stop]
    mark = START_MARK if start else ""
    inside = next((b for b in blocks if b.open_start < start < b.close_start), None)
    if inside is not None:  # the opening fence on a line of its own, as written
        head = f"{mark}\n{inside.opener}\n"
    elif any(b.open_start == start for b in blocks) or _indents(text, start):
        head = f"{mark}\n"  # a fence, or an indented line, starts a line of its own
    else:
        head = f"{mark} " if mark else ""
    cut = stop < len(text)
    open_at_stop = next((b for b in blocks if b.run_stop <= stop <= b.close_start), None)
    if open_at_stop is not None:
        tail = f"\n{open_at_stop.run}" + (f"\n{END_MARK}" if cut else "")
        body = body.rstrip()
    elif cut:
        tail = f" {END_MARK}"
        body = body.rstrip()
    else:
        tail = ""
    return (lead.rstrip() if head[:1] == "\n" else lead) + indented(head + body + tail)


def _indents(text: str, start: int) -> bool:
    """Whether ``text[start:]`` is an indented line (code, a nested list item)."""
    return start > 0 and text[start - 1] == "\n" and text[start : start + 1] in (" ", "\t")


def whole(lead: str, text: str) -> str:
    """The line of a memory written whole: a text that starts with a code fence
    starts on the next line, where the fence is one (after ``lead`` it is not, and
    its closing fence would open a block); a block the text opens and never closes
    (a paste cut short) is closed after it, else every later line of the prompt
    reads as code."""
    first = text.split("\n", 1)[0].splitlines()[:1]  # (only its first line is read)
    match = _FENCE.fullmatch(first[0]) if first else None
    body = text
    if "```" in text or "~~~" in text:  # (fences are looked for only then)
        blocks = fences(text)
        if blocks and blocks[-1].close_start == len(text):
            body = text.rstrip() + "\n" + blocks[-1].run
    if match is not None and _opens(match):
        return lead.rstrip() + indented("\n" + body)
    return lead + indented(body)


def line_start(text: str, start: int) -> int:
    """``start``, or the beginning of its line when only blanks come before it there:
    a passage starts at its first word-piece, after the indentation of a code line,
    which an excerpt keeps."""
    begin = text.rfind("\n", 0, start) + 1
    return begin if not text[begin:start].strip() else start


def cut_to_fit(
    lead: str, text: str, start: int, fits: Callable[[str], bool], limit: int | None = None
) -> tuple[str, int] | None:
    """The longest excerpt from ``start`` to at most ``limit`` (the text's end when
    None) whose line ``fits`` (the counter is any function of the text: the stop is
    searched for), cut at a space when one is near and it does not stop at one
    already; its line and stop, or None when no word fits."""
    blocks = fences(text)
    low, high = start, len(text) if limit is None else max(start, min(limit, len(text)))
    while low < high:
        middle = (low + high + 1) // 2
        if fits(render(lead, text, start, middle, blocks)):
            low = middle
        else:
            high = middle - 1
    stop = low
    if stop < len(text) and not text[stop].isspace() and not text[stop - 1].isspace():
        space = max(text.rfind(" ", max(start, stop - _SNAP_END), stop), start)
        snapped = len(text[start:space].rstrip()) + start
        if snapped > start and fits(line := render(lead, text, start, snapped, blocks)):
            return line, snapped
        if not text[start:stop].strip():
            return None
    line = render(lead, text, start, stop, blocks)
    return (line, stop) if fits(line) and text[start:stop].strip() else None


def start_earlier(
    lead: str, text: str, start: int, stop: int, fits: Callable[[str], bool]
) -> tuple[str, int] | None:
    """The excerpt ending at ``stop`` that starts earliest before ``start`` and
    ``fits``, moved forward to begin a line (else a word) when one is near; its line
    and start, or None when it cannot start earlier."""
    blocks = fences(text)
    low, high = 0, start
    while low < high:
        middle = (low + high) // 2
        if fits(render(lead, text, middle, stop, blocks)):
            high = middle
        else:
            low = middle + 1
    earliest = low
    if earliest:
        line_start = text.find("\n", earliest - 1, earliest + _SNAP_LINE)
        word_start = text.find(" ", earliest - 1, earliest + _SNAP_WORD)
        if 0 <= line_start < start - 1:
            earliest = line_start + 1
        elif 0 <= word_start < start - 1:
            earliest = word_start + 1
    if any(b.close_start == earliest < len(text) for b in blocks):
        # not from a block's closing fence, whose opening one is not in the excerpt
        after = text.find("\n", earliest)
        earliest = after + 1 if after >= 0 else start
    if earliest >= start:
        return None
    line = render(lead, text, earliest, stop, blocks)
    return (line, earliest) if fits(line) else None
