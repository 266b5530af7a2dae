"""Secrets not written as "<name> is <value>": wallet seed phrases and private keys,
recovery keys, a password given on the line after its label, and a password right
after its name ("pw hunter2xyz").

* A wallet's seed (recovery, backup, mnemonic) phrase is 12 to 25 plain words
  ("my seed phrase is abandon ability able about …"); the whole run of words is
  the secret, whatever the words are (BIP-39's list holds "about", "above",
  "again", which prose would read as describing).  Its words have 3 to 8 letters
  (BIP-39; up to 10 here), so "the seed phrase is written on the back of the card"
  (a word of two letters, and too few words) stays prose.
* A form pasted as it shows on screen puts the value on the next line
  ("Password:\\nhunter2xyz", "the password is\\nMultiL1ne!Pw"): a line that is
  only a password's label, then a line that is only one word, judged as the word after "the password is" would be
  (:func:`nbmemory.redaction.prose.looks_secret`), so "Password:\\nrequired" and
  "Password:\\n********" stay.
"""

from __future__ import annotations

import re

from . import code, prose
from .rule import Rule, Span

#: A card's security code ("cvv: 123", "the CVC is 4412"): digits, as a door code.
CARD_CODE = r"cvv2?|cvc2?|csc"

#: "seed phrase", "secret recovery phrase", "recovery words", "mnemonic", "wallet seed".
_SEED_NAME = (
    r"(?:(?:secret|wallet)[ _-])?(?:seed|recovery|backup|mnemonic|wallet)[ _-]?(?:phrase|words|seed)"
    r"|mnemonic|(?:12|24|twelve|twenty[ -]four)[ -](?:secret[ -])?words"
)
#: Between two words of a phrase: spaces, a comma, or one line break.
_GAP = r"(?:[ \t]*,[ \t]*(?:\r?\n[ \t]*)?|[ \t]+|[ \t]*\r?\n[ \t]*)"
_SEED = (
    rf"(?i)(?<![\w-])(?:{_SEED_NAME})(?![\w-])"
    r"(?:\s+(?:is|was|are|were)(?![\w-])(?:[ \t]*:)?|[ \t]*[:=]|[ \t]*(?:-+>|→))[ \t]*"
    r"""(?:\r?\n[ \t]*)?["']?"""
    rf"(?P<secret>[A-Za-z]{{3,10}}(?:{_GAP}[A-Za-z]{{3,10}}){{11,24}})(?![\w-])"
)

#: A line that is only a password's label ("Password:", "PIN:", "passcode =", "the
#: password is", "my wifi password is:"), then a line that is only one word.
_NEXT_LINE = (
    r"(?im)^[ \t]*(?:(?:the|my|our|your)[ \t]+(?:[\w-]+[ \t]+)?)?"
    r"(?P<name>pass(?:word|wd|code|phrase)|pwd?|pin)"
    r"(?:[ \t]*[:=]|[ \t]+(?:is|was)[ \t]*:?)[ \t]*\r?\n"
    r"""[ \t]*(?P<bare>[^\s"'`]{3,200})[ \t]*$"""
)


def _next_line_span(match: re.Match[str]) -> Span | None:
    start, end = prose.bare_span(match)
    kind = prose.name_class(match.group("name"))
    if not prose.looks_secret(match.string[start:end], kind, quoted=False, code=True):
        return None
    return start, end


#: "pw hunter2xyz", "my passwd Qwerty!23 for the vpn": a password's name and its value
#: with nothing between them; only a value that looks like a credential (a letter
#: and a digit or a symbol, 6+ characters; not a flag, a path, a placeholder, a bracket
#: or a ``key=value``), as "password manager" and "pw reset" say what the password is
#: for.  (``pwd`` is left out: it is a shell command.)
_PROSE_BARE = (
    rf"(?i)(?<![\w-])(?P<name>pass(?:word|wd|code)|pw|{CARD_CODE})[ \t]+"
    r"""(?P<bare>(?![-/~.<$(\[{])[^\s"'`=]{3,200}(?![^\s"'`]))"""
)


def _prose_bare_span(match: re.Match[str]) -> Span | None:
    start, end = prose.bare_span(match)
    value = match.string[start:end]
    if prose.name_class(match.group("name")) == prose.CODE:  # "cvv 123": 3 or 4 digits
        return (start, end) if value.isdigit() and len(value) in (3, 4) else None
    credential = any(c.isalpha() for c in value) and any(
        c.isdigit() or not c.isalnum() for c in value
    )
    if len(value) < 6 or not credential:
        return None
    if not prose.looks_secret(value, prose.STRONG, quoted=False, code=True):
        return None
    return start, end


#: "with password 'Adm1nLog!n'": a quoted value right after a password's name, when it
#: looks like a credential ("the password 'required' field" stays).
_PROSE_QUOTED = (
    r"(?i)(?<![\w-])(?P<name>pass(?:word|wd|phrase|code)|pw) "
    r"""(?P<q>["'`])(?P<secret>[^"'`\n]{6,200})(?P=q)"""
)


def _prose_quoted_span(match: re.Match[str]) -> Span | None:
    start, end = match.span("secret")
    value = match.string[start:end]
    if " " in value or not prose.looks_secret(value, prose.STRONG, quoted=False, code=True):
        return None
    return start, end


#: "my api key: 4e5f…", "API Key: …", "Secret Access Key: …", "bot token: …": a
#: secret's name of two or three words, a colon, and a value that looks like a
#: credential ("api key: see the docs" stays).
_SPACED_NAME = (
    r"(?i)(?<![\w-])(?P<name>(?:api|access|secret|auth|bot|bearer|session|refresh|private"
    r"|client|app|personal[ ]access|secret[ ]access)[ ](?:key|token|secret|password))"
    r"(?:[ ]id)?(?P<verb>[ \t]*:)[ \t]*"
    r"""(?:(?P<open>["'`])(?P<quoted>[^"'`\n]{1,200})["'`]|(?P<bare>[^\s"'`]{1,200}))"""
)


def _spaced_name_span(match: re.Match[str]) -> Span | None:
    if match.group("quoted") is not None:
        start, end = match.span("quoted")
    else:
        start, end = prose.bare_span(match)
        if code.is_code(match.string, start, end):
            return None  # f"access token: {error}"
    value = match.string[start:end]
    return (
        (start, end) if prose.looks_secret(value, prose.STRONG, quoted=False, code=True) else None
    )


#: A wallet's private key after its name: 64 hex digits (Ethereum, ``0x…`` or not) or
#: a Bitcoin key in WIF (base58, 51 or 52 characters from 5, K or L).
_WALLET_KEY = (
    r"(?i)(?<![\w-])private[ _-]?key(?:[ \t]+(?:is|was))?[ \t]*[:=]?[ \t]*"
    r"(?P<secret>(?:0x)?[0-9a-f]{64}|(?-i:[5KL][1-9A-HJ-NP-Za-km-z]{50,51}))(?![\w-])"
)
#: A disk's or an account's recovery key: groups of 4 to 8 letters and digits joined
#: by dashes, 4 groups or more (FileVault, BitLocker, a password manager's).
_RECOVERY_KEY = (
    r"(?i)(?<![\w-])recovery[ _-]key(?:[ \t]+(?:is|was))?[ \t]*[:=]?[ \t]*"
    r"(?P<secret>[a-z0-9]{4,8}(?:-[a-z0-9]{4,8}){3,15})(?![\w-])"
)


def _mixed_digits_span(match: re.Match[str]) -> Span | None:
    """The recovery key, when its groups hold digits (not "see-the-docs-page")."""
    value = match.group("secret")
    return match.span("secret") if sum(c.isdigit() for c in value) >= 4 else None


PHRASE_RULES: tuple[Rule, ...] = (
    Rule("seed_phrase", _SEED, ("phrase", "words", "seed", "mnemonic")),
    Rule("wallet_key", _WALLET_KEY, r"private[ _-]?key"),
    Rule("secret_value", _RECOVERY_KEY, r"recovery[ _-]key", _mixed_digits_span),
    Rule(
        "secret_prose",
        _NEXT_LINE,
        r"(?:word|wd|code|phrase|pw|pwd|pin)(?:[ \t]*[:=]|[ \t]+(?:is|was)[ \t]*:?)[ \t]*\r?\n",
        _next_line_span,
    ),
    Rule(
        "secret_prose",
        _PROSE_BARE,
        r"(?:pass(?:word|wd|code)|pw|cvv2?|cvc2?|csc)[ \t]",
        _prose_bare_span,
    ),
    Rule(
        "secret_prose",
        _PROSE_QUOTED,
        tuple(
            f"{end} {quote}" for end in ("word", "wd", "phrase", "code", "pw") for quote in "\"'`"
        ),
        _prose_quoted_span,
    ),
    Rule(
        "secret_prose",
        _SPACED_NAME,
        r"(?:key|token|secret|password)(?: id)?[ \t]*:",
        _spaced_name_span,
        separated=True,
    ),
)
