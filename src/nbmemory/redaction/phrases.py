"""Secrets that are not one word after their name: wallet seed phrases, and a
password given on the line after its label.

* A wallet's seed (recovery, backup, mnemonic) phrase is 12 to 25 plain words
  ("my seed phrase is abandon ability able about …"); the whole run of words is
  the secret, whatever the words are (BIP-39's list holds "about", "above",
  "again", which prose would read as describing).  Its words have 3 to 8 letters
  (BIP-39; up to 10 here), so "the seed phrase is written on the back of the card"
  (a word of two letters, and too few words) stays prose.
* A form pasted as it shows on screen puts the value on the next line
  ("Password:\\nhunter2xyz"): a line that is only a password's label, then a line
  that is only one word, judged as the word after "the password is" would be
  (:func:`nbmemory.redaction.prose.looks_secret`), so "Password:\\nrequired" and
  "Password:\\n********" stay.
"""

from __future__ import annotations

import re

from . import prose
from .rule import Rule, Span

#: "seed phrase", "secret recovery phrase", "recovery words", "mnemonic", "wallet seed".
_SEED_NAME = (
    r"(?:(?:secret|wallet)[ _-])?(?:seed|recovery|backup|mnemonic|wallet)[ _-]?(?:phrase|words|seed)"
    r"|mnemonic"
)
#: Between two words of a phrase: spaces, a comma, or one line break.
_GAP = r"(?:[ \t]*,[ \t]*(?:\r?\n[ \t]*)?|[ \t]+|[ \t]*\r?\n[ \t]*)"
_SEED = (
    rf"(?i)(?<![\w-])(?:{_SEED_NAME})(?![\w-])"
    r"(?:\s+(?:is|was|are|were)(?![\w-])|[ \t]*[:=]|[ \t]*(?:-+>|→))[ \t]*(?:\r?\n[ \t]*)?"
    rf"(?P<secret>[A-Za-z]{{3,10}}(?:{_GAP}[A-Za-z]{{3,10}}){{11,24}})(?![\w-])"
)

#: A line that is only a password's label ("Password:", "PIN:", "passcode ="), then
#: a line that is only one word.
_NEXT_LINE = (
    r"(?im)^[ \t]*(?P<name>pass(?:word|wd|code|phrase)|pwd?|pin)[ \t]*[:=][ \t]*\r?\n"
    r"""[ \t]*(?P<bare>[^\s"'`]{3,200})[ \t]*$"""
)


def _next_line_span(match: re.Match[str]) -> Span | None:
    start = match.start("bare")
    value = prose.strip_trailing(match.group("bare"))
    kind = prose.name_class(match.group("name"))
    if not prose.looks_secret(value, kind, quoted=False, code=True):
        return None
    return start, start + len(value)


PHRASE_RULES: tuple[Rule, ...] = (
    Rule("seed_phrase", _SEED, ("phrase", "words", "seed", "mnemonic")),
    Rule(
        "secret_prose",
        _NEXT_LINE,
        r"(?:word|wd|code|phrase|pw|pwd|pin)[ \t]*[:=][ \t]*\r?\n",
        _next_line_span,
    ),
)
