"""Secret redaction and the file blocklist (Vectora's "Guardian").

Text is redacted *before* it is stored or embedded, so a secret pasted into a
conversation never reaches the DuckDB file or the model.  What is found (the
rules are in :mod:`.rules`, each a :class:`~.rule.Rule`; docs/python-api.md lists them with their look-alikes):

* ``key: value`` in every notation agents write (:mod:`.keys`; code that only
  names a secret, ``password = getpass()``, is not one: :mod:`.code`) — JSON (escaped at any depth:
  ``\\"password\\": \\"x\\"``), Python dicts, YAML, env files, ``export
  DB_PASSWORD=…``, headers (``Authorization``, ``X-Api-Key``), ``user:password@``
  in URLs;
* markup between a name and its value (:mod:`.layouts`): ``**Password:** …``,
  Markdown tables, Kubernetes' ``- name: DB_PASSWORD`` / ``value: …``, ``pass: …``;
* JSON decoded wherever it sits (:mod:`.structure`): tool-call arguments that are
  JSON-encoded strings, JSON content, JSON inside JSON; a value under a key that
  names a secret is replaced whatever its type, and the text stays valid JSON;
* private key blocks (PEM, OpenSSH, PGP) whole, with real or escaped newlines,
  with or without their END line;
* prose ("the DB password is Tr0ub4dor&3", "pw: hunter2", "the wifi passcode is
  88412299"), with a rule for what counts as the secret (:mod:`.prose`);
* a password given with logging in, without its name ("log in with Winter2024!",
  "use hunter2 to sign in", "creds are admin:…"), when it is shaped like one
  ("log in with SSO", "sign in using OAuth2" stay: :mod:`.logins`);
* passwords on command lines (``curl -u user:pass``, ``mysql -pPASS``,
  ``sshpass -p``, ``--password=…``), only for the commands whose flag is one
  (:mod:`.commands`);
* well-known token formats (AWS, GitHub, GitLab, Hugging Face, npm, PyPI,
  OpenAI, Anthropic, Slack, Stripe, Twilio, SendGrid, DigitalOcean, Shopify,
  Azure, Google, Databricks, Vault, Grafana, JWTs, bearer tokens …) and card
  numbers (Luhn-checked);
* with ``Settings(redact_pii=True)`` also personal data: e-mail addresses, phone
  numbers, IBANs (mod-97), US SSNs, Brazilian CPFs and Spanish DNI/NIE numbers
  (check digits).

More patterns are added with ``Settings(redact_patterns=(...))``;
``Settings(redaction=False)`` turns redaction off.  Only the secret is replaced by
:data:`REDACTED` (``password: [REDACTED]``), so the memory still says *that* a
password was given.  Redaction is idempotent: redacting already-redacted text
changes nothing and counts nothing; a text with nothing to redact is returned
byte for byte.

Most texts hold no secret: each rule has a *needle*, a cheap regex every match
contains, and a text with no needle is returned after one scan
(:meth:`Redactor.suspects` finds the few texts of a batch that need more).

:func:`check_ingestable` refuses files that commonly hold secrets (``.env``,
``*.key``, ``*.pem``) before anything reads them.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInput
from . import structure
from .rules import REDACTED, RULES, Rule, secret_span

__all__ = [
    "BLOCKED_FILES",
    "DEFAULT_PATTERNS",
    "PII_PATTERNS",
    "REDACTED",
    "Redaction",
    "Redactor",
    "blocked_reason",
    "check_ingestable",
    "compile_pattern",
    "redact",
]

#: (name, regex) of the secrets found by default, in the order they are tried.
DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = tuple((r.name, r.regex) for r in RULES if not r.pii)
#: (name, regex) of the personal data found with ``redact_pii=True``.
PII_PATTERNS: tuple[tuple[str, str], ...] = tuple((r.name, r.regex) for r in RULES if r.pii)

#: What the JSON walk finds beyond the rules' matches, and the needles that send a
#: text to it: a name/value pair (``{"name": "DB_PASSWORD", "value": …}``), an
#: argv list (``["sshpass", "-p", "…"]``, whose flag and value are two strings) and
#: a Kubernetes Secret (``{"kind": "Secret", "data": {…}}``).
_STRUCTURE_NEEDLES: dict[str, str | tuple[str, ...]] = {
    "secret_pair": r"""value\\*["']\s*:""",
    "command_argv": r"""["']-{1,2}[\w-]+\\*["']""",
    "secret_manifest": tuple(
        f"kind{q}:{space}{q}secret" for q in ('"', '\\"') for space in ("", " ")
    ),
}


def _trie(words: Iterable[str]) -> str:
    """One regex for many literals, shaped as a trie (``gh(?:o_|p_|...)``): the
    regex engine tries one alternative per first character instead of one per word."""
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:
        ends = "" in node
        branches = [re.escape(char) + emit(node[char]) for char in sorted(node) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and not ends else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if ends else body

    return emit(root)


def _needle_regex(needles: Iterable[str | tuple[str, ...]]) -> str:
    """One regex for needles given as literal tuples and regexes."""
    literals = [word for n in needles if isinstance(n, tuple) for word in n]
    regexes = [n for n in needles if isinstance(n, str)]
    parts = ([_trie(dict.fromkeys(literals))] if literals else []) + [
        f"(?:{r})" for r in dict.fromkeys(regexes)
    ]
    return "|".join(parts) or r"(?!)"


def _rule_needles(
    names: Iterable[str], separated: bool | None = None
) -> dict[str, list[str | tuple[str, ...]]]:
    """The needles of the rules called ``names`` (only those whose needle holds a
    separator, or only the others, when ``separated`` says which)."""
    wanted = set(names)
    needles: dict[str, list[str | tuple[str, ...]]] = {}
    for rule in RULES:
        if rule.name in wanted and separated in (None, rule.separated):
            needles.setdefault(rule.name, []).append(rule.needle)
    for name, needle in _STRUCTURE_NEEDLES.items():
        if name in wanted and separated in (None, name in _SEPARATED_STRUCTURE):
            needles[name] = [needle]
    return needles


#: The structure needles that hold a ``:`` (see :attr:`Rule.separated`).
_SEPARATED_STRUCTURE = frozenset({"secret_pair"})
#: For each rule name, a cheap regex that the lowercased text of every match of its
#: rules contains (a literal it starts with, or a word every secret name holds): a
#: text without it is not searched with those rules (most texts hold none).
_NEEDLES: dict[str, str] = {
    name: _needle_regex(needles)
    for name, needles in _rule_needles([r.name for r in RULES] + list(_STRUCTURE_NEEDLES)).items()
}
_COMPILED_NEEDLES = {name: re.compile(needle) for name, needle in _NEEDLES.items()}
#: Where a name has several rules (seven ``secret_prose``), each rule's own needle
#: too: once the name's needle is in a text, only the rules whose own needle is
#: there run (a long message naming a password is not searched for "use … as").
#: Rules with the same needle share one regex, searched once a text.
_OWN_REGEXES = {
    rule: _needle_regex([rule.needle])
    for rule in RULES
    if sum(other.name == rule.name for other in RULES) > 1
}
_SHARED = {regex: re.compile(regex) for regex in _OWN_REGEXES.values()}
_OWN_NEEDLES: dict[Rule, re.Pattern[str]] = {
    rule: _SHARED[regex] for rule, regex in _OWN_REGEXES.items()
}


def _few_literals(needles: Sequence[str | tuple[str, ...]]) -> tuple[str, ...] | None:
    """The literals of needles that are a few literals only, not all starting alike."""
    if not all(isinstance(needle, tuple) for needle in needles):
        return None
    words = tuple(dict.fromkeys(word for needle in needles for word in needle))
    return words if 1 < len(words) <= 8 and len({word[0] for word in words}) > 1 else None


#: The needles that are a few literals starting with different characters: ``in``
#: finds them faster than their regex, whose alternatives are tried at every position
#: (5 us instead of 15 on 3,000 characters).
_LITERALS: dict[re.Pattern[str], tuple[str, ...]] = {
    pattern: words
    for pattern, words in [
        *(
            (_COMPILED_NEEDLES[name], _few_literals(needles))
            for name, needles in _rule_needles([r.name for r in RULES]).items()
        ),
        *((pattern, _few_literals([rule.needle])) for rule, pattern in _OWN_NEEDLES.items()),
    ]
    if words is not None
}


def _holds(needle: re.Pattern[str], lowered: str) -> bool:
    """Whether the lowercased text holds the needle."""
    words = _LITERALS.get(needle)
    if words is not None:
        return any(word in lowered for word in words)
    return needle.search(lowered) is not None


def _combined(names: Iterable[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The needles of ``names`` in two regexes over lowercased text: those searched in
    every text, and those (holding a ``:`` or ``=``) searched only in texts with one."""
    names = list(names)
    plain = [n for ns in _rule_needles(names, separated=False).values() for n in ns]
    separated = [n for ns in _rule_needles(names, separated=True).values() for n in ns]
    return re.compile(_needle_regex(plain)), re.compile(_needle_regex(separated))


_DEFAULT_NAMES = [r.name for r in RULES if not r.pii] + list(_STRUCTURE_NEEDLES)
_ANY_NEEDLE, _ANY_SEPARATED_NEEDLE = _combined(_DEFAULT_NAMES)


def _some_needle(text: str) -> bool:
    """Whether any default needle is in ``text`` (else no default rule can match it)."""
    lowered = text.lower()
    if _ANY_NEEDLE.search(lowered) is not None:
        return True
    return ("=" in text or ":" in text) and _ANY_SEPARATED_NEEDLE.search(lowered) is not None


#: JSON decoded inside JSON at most this deep (each level is a shorter string).
_MAX_DEPTH = 16


@dataclass(frozen=True)
class Redaction:
    """The result of redacting one text: the safe text, how many secrets went, and
    their kinds (rule names such as ``"secret_value"``, ``"private_key"``), in rule order."""

    text: str
    count: int
    kinds: tuple[str, ...] = ()


class Redactor:
    """Compiled redaction rules; ``redact(text)`` returns a :class:`Redaction`.

    ``extra`` adds regexes (a ``secret`` group, when present, is the part replaced;
    otherwise the whole match is); ``pii=True`` adds the personal-data rules;
    ``defaults=False`` keeps only ``extra``.
    """

    def __init__(
        self, extra: Iterable[str] = (), *, defaults: bool = True, pii: bool = False
    ) -> None:
        rules = [r for r in RULES if defaults and (pii or not r.pii)]
        for index, pattern in enumerate(extra):
            rules.append(Rule(f"custom_{index}", pattern, ""))
        self._rules: list[tuple[Rule, re.Pattern[str]]] = [
            (rule, compile_pattern(rule.regex, rule.name)) for rule in rules
        ]
        #: (name, compiled regex) of every rule, in the order they are tried.
        self.patterns: list[tuple[str, re.Pattern[str]]] = [(r.name, p) for r, p in self._rules]
        self._structured = defaults
        names = [r.name for r in rules] + (list(_STRUCTURE_NEEDLES) if defaults else [])
        #: Whether every rule has a needle (then a text with none is returned as is).
        self._all_needled = all(name in _COMPILED_NEEDLES for name in names)
        self._plain, self._separated = _combined(names)
        self._order = {name: index for index, name in enumerate(dict.fromkeys(names))}
        self._command_rules = [(r, p) for r, p in self._rules if r.name == "command_password"]

    def _has_needle(self, text: str) -> bool:
        lowered = text.lower()
        if self._plain.search(lowered) is not None:
            return True
        return ("=" in text or ":" in text) and self._separated.search(lowered) is not None

    def suspects(self, texts: Sequence[str]) -> list[int]:
        """The positions of the texts :meth:`redact` may change, ascending: those
        holding a needle (all of them when a pattern has none).

        The batch is searched as one string, its texts joined by NUL, which no
        needle matches: one regex call per needle found instead of two per text
        (about a tenth of ``add_events``' time in batches of 1,000, profiled at 400k rows).
        """
        if not self._all_needled:
            return list(range(len(texts)))
        joined = "\0".join(texts)
        lowered = joined.lower()
        if len(lowered) != len(joined):  # a character lowercases to two: their own lengths
            texts = [text.lower() for text in texts]
            lowered = "\0".join(texts)
        starts = [0] * len(texts)
        for index in range(1, len(texts)):
            starts[index] = starts[index - 1] + len(texts[index - 1]) + 1
        found: set[int] = set()
        for pattern in (self._plain, self._separated):
            if pattern is self._separated and "=" not in joined and ":" not in joined:
                continue
            position = 0
            while (match := pattern.search(lowered, position)) is not None:
                index = bisect.bisect_right(starts, match.start()) - 1
                found.add(index)
                if index + 1 == len(texts):
                    break
                position = starts[index + 1]
        return sorted(found)

    def redact(self, text: str) -> Redaction:
        """Replace every secret in ``text`` by ``[REDACTED]``."""
        if self._all_needled and not self._has_needle(text):
            return Redaction(text, 0)
        redacted, kinds = self._redact_text(text, 0)
        if not kinds:
            return Redaction(text, 0)
        ordered = tuple(
            sorted(set(kinds), key=lambda kind: self._order.get(kind, len(self._order)))
        )
        return Redaction(redacted, len(kinds), ordered)

    def _redact_text(self, text: str, depth: int) -> tuple[str, list[str]]:
        """``text`` redacted, and the kind of each secret removed."""
        if depth and self._all_needled and not self._has_needle(text):
            return text, []
        if self._structured and depth < _MAX_DEPTH:
            document = structure.loads(text)
            if structure.is_json(document):
                walker = structure.Walker(self._redact_text, self._argv_spans, depth)
                try:
                    new = walker.walk(document)
                except RecursionError:  # nested deeper than Python recurses: as text
                    return self._replace(text, self._spans(text, self._rules))
                if not walker.found:
                    return text, []
                return structure.dumps_like(text, document, new), walker.found
        return self._replace(text, self._spans(text, self._rules))

    def _argv_spans(self, joined: str) -> list[tuple[int, int, str]]:
        return self._spans(joined, self._command_rules)

    @staticmethod
    def _spans(
        text: str, rules: Sequence[tuple[Rule, re.Pattern[str]]]
    ) -> list[tuple[int, int, str]]:
        """The secrets in ``text``: (start, end, kind), merged where they overlap
        (the earlier rule's kind wins), in text order."""
        found: list[tuple[int, int, int, str]] = []
        lowered = text.lower()
        #: name -> whether its needle is in the text: the rules of one name (seven
        #: ``secret_prose``) share one needle, searched once (~80 us on 2.6k characters)
        present: dict[str, bool] = {}
        holds: dict[re.Pattern[str], bool] = {}  # own needles shared by rules: searched once
        for order, (rule, pattern) in enumerate(rules):
            if rule.name not in present:
                needle = _COMPILED_NEEDLES.get(rule.name)
                present[rule.name] = needle is None or _holds(needle, lowered)
            if not present[rule.name]:
                continue
            own = _OWN_NEEDLES.get(rule)
            if own is not None:
                if own not in holds:
                    holds[own] = _holds(own, lowered)
                if not holds[own]:
                    continue
            span_of = rule.span or secret_span
            for match in pattern.finditer(text):
                if rule.spans is not None:
                    spans = rule.spans(match)
                else:
                    span = span_of(match)
                    spans = [] if span is None else [span]
                for start, end in spans:
                    if end > start and not text.startswith(REDACTED, start):
                        found.append((start, order, end, rule.name))
        found.sort()
        merged: list[tuple[int, int, str]] = []
        for start, _, end, name in found:
            if merged and start < merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end, merged[-1][2])
                continue
            merged.append((start, end, name))
        return merged

    @staticmethod
    def _replace(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, list[str]]:
        if not spans:
            return text, []
        parts = []
        position = 0
        for start, end, _ in spans:
            parts.append(text[position:start])
            parts.append(REDACTED)
            position = end
        parts.append(text[position:])
        return "".join(parts), [kind for _, _, kind in spans]


def compile_pattern(regex: str, name: str = "pattern") -> re.Pattern[str]:
    """Compile one redaction regex; a bad one is an :class:`InvalidInput` naming it."""
    if not isinstance(regex, str) or not regex:
        raise InvalidInput(f"redaction {name} must be a non-empty regex string, got {regex!r}")
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise InvalidInput(f"redaction {name} {regex!r} is not a valid regex: {exc}") from None
    if compiled.match(""):
        raise InvalidInput(
            f"redaction {name} {regex!r} matches empty text; it would redact nothing"
        )
    return compiled


def redact(text: str, extra: Iterable[str] = (), *, pii: bool = False) -> Redaction:
    """Redact ``text`` with the default rules plus ``extra``.

    The rules are compiled once per (``extra``, ``pii``) and kept: building a
    :class:`Redactor` (its needle index over every rule) takes ~250 us, ten times
    what redacting a short turn does, so a loop over ``redact`` costs what one
    :class:`Redactor` reused does."""
    return _redactor(tuple(extra), pii).redact(text)


@functools.lru_cache(maxsize=16)
def _redactor(extra: tuple[str, ...], pii: bool) -> Redactor:
    return Redactor(extra, pii=pii)


#: File names refused for ingestion (fnmatch patterns on the base name, case-insensitive).
BLOCKED_FILES: tuple[str, ...] = (".env", ".env.*", "*.env", "*.key", "*.pem")


def blocked_reason(path: str | os.PathLike[str]) -> str | None:
    """Which blocklist pattern refuses ``path`` (by its base name), or None."""
    name = Path(path).name.lower()
    for pattern in BLOCKED_FILES:
        if fnmatch.fnmatchcase(name, pattern):
            return pattern
    return None


def check_ingestable(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if it may be ingested; :class:`InvalidInput` for secret files.

    ``.env``, ``*.key`` and ``*.pem`` files usually hold credentials; they are never
    read, stored or embedded (the same blocklist applies to AGENTS.md).
    """
    resolved = Path(path).expanduser()
    pattern = blocked_reason(resolved)
    if pattern is not None:
        raise InvalidInput(
            f"refusing to ingest {resolved.name}: files matching {pattern!r} hold secrets and "
            "are never stored or embedded (blocklist: .env, *.key, *.pem); "
            "copy what the agent should know into a plain file such as AGENTS.md"
        )
    return resolved
