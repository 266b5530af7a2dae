"""The input transformer that keeps questions to the magics from becoming ``?`` help."""

from __future__ import annotations

import re
from typing import Any

_QUESTION_LINE = re.compile(
    r"^(?P<indent>[ \t]*)(?:(?P<target>[A-Za-z_][\w.]*)\s*=\s*)?"
    r"%(?P<magic>recall|context|memory)[ \t]+(?P<args>.*\S)[ \t]*$"
)
_REMEMBER_CELL = re.compile(r"^%%remember(?:[ \t]|$)")


def protect_questions(lines: list[str]) -> list[str]:
    """Input transformer: questions to our magics are calls, not ``?`` help requests.

    ``%recall what do I like?`` (and ``%context ...?``) would otherwise become
    ``%pinfo``; ``%memory forget?`` means ``%memory forget --help``; ``%recall?``
    alone stays IPython's help.  A ``%%remember`` cell is turned into its call here
    too, before IPython's prompt stripping could alter a body with ``>>>`` lines.
    """
    first = next((i for i, text in enumerate(lines) if text.strip()), None)
    if first is not None and _REMEMBER_CELL.match(lines[first]):
        head = lines[first].rstrip("\r\n")
        args = head[len("%%remember") :].strip()
        body = "".join(lines[first + 1 :])
        return [f"get_ipython().run_cell_magic('remember', {args!r}, {body!r})\n"]
    result = []
    for text in lines:
        match = _QUESTION_LINE.match(text.rstrip("\r\n"))
        if match and match["args"].endswith("?"):
            args = match["args"]
            if match["magic"] == "memory":
                args = args.rstrip("?").rstrip() + " --help"
            target = f"{match['target']} = " if match["target"] else ""
            text = (
                f"{match['indent']}{target}get_ipython().run_line_magic("
                f"{match['magic']!r}, {args!r})\n"
            )
        result.append(text)
    return result


protect_questions._nbmemory = True  # type: ignore[attr-defined]
# check_complete (the terminal's "is this cell finished?") skips transforms marked
# like this, so a %%remember cell still waits for its body and its blank line.
protect_questions.has_side_effects = True  # type: ignore[attr-defined]


def is_ours(transform: Any) -> bool:
    return bool(getattr(transform, "_nbmemory", False))
