"""Which word after "the password is …" is a password.

Prose names a secret and then says something *about* it as often as it gives it:
"the password is hunter2" and "the password is incorrect" have the same shape.
The rule, in order (see :func:`looks_secret`):

* a quoted value (``'…'``, ``"…"``, ````…````, ``“…”``) is always the secret;
* a PIN or a door/alarm code is digits (4–12 for a PIN, 3+ digits for a code);
* an empty value, a placeholder (``<password>``, ``${DB_PASS}``, ``$PASSWORD``,
  ``****``, ``xxx``, ``...``) or a number followed by a unit ("12 characters
  long") is not a secret;
* a value that is an ordinary English word describing the secret — a stop word
  ("the", "to", "in", "not" …), one of :data:`DESCRIBING` ("incorrect",
  "required", "expired", "same" …) or a lowercase word ending in -ed, -ing or
  -ly ("stored", "expiring", "usually") — is not a secret;
* for the weak names (password, passcode, passwd, passphrase, pw, pwd, and "pass"
  after what it opens: "db pass", "root pass") anything
  else of at least 3 characters is the secret ("hunter2", "swordfish",
  "Tr0ub4dor&3");
* for the strong-evidence names (secret, token, api key …), which English uses
  idiomatically ("the secret is patience"), the value must also look like a
  credential: a digit, a symbol, mixed case past the first letter, or 16+
  characters.

So "my password is the same as before" is left alone (its value would be "the"),
and "the secret is love" too; "the wifi password is sunshine" is redacted.

A password named in another language ("a senha é …", "la contraseña es …", "das
Passwort ist …") is of class :data:`OTHER`: weak evidence, judged with that
language's describing words too (:data:`OTHER_DESCRIBING`, and Portuguese, Spanish
and French participles).
"""

from __future__ import annotations

import re

#: Words that describe a secret rather than give it (compared lowercased).
DESCRIBING = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "it's",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "mine",
        "yours",
        "ours",
        "theirs",
        "one",
        "some",
        "any",
        "no",
        "not",
        "none",
        "null",
        "nil",
        "undefined",
        "empty",
        "blank",
        "missing",
        "unknown",
        "unset",
        "n/a",
        "na",
        "tbd",
        "same",
        "different",
        "also",
        "too",
        "very",
        "so",
        "just",
        "still",
        "now",
        "only",
        "already",
        "then",
        "there",
        "here",
        "in",
        "on",
        "at",
        "for",
        "to",
        "of",
        "from",
        "by",
        "with",
        "without",
        "about",
        "as",
        "like",
        "than",
        "into",
        "under",
        "over",
        "within",
        "via",
        "and",
        "or",
        "but",
        "if",
        "when",
        "while",
        "because",
        "since",
        "until",
        "unless",
        "either",
        "neither",
        "both",
        "all",
        "each",
        "every",
        "more",
        "less",
        "most",
        "least",
        "much",
        "many",
        "few",
        "enough",
        "what",
        "where",
        "how",
        "why",
        "who",
        "which",
        "whatever",
        "something",
        "nothing",
        "anything",
        "everything",
        "someone",
        "somewhere",
        "what's",
        "where's",
        "correct",
        "incorrect",
        "wrong",
        "right",
        "invalid",
        "valid",
        "expired",
        "expiring",
        "required",
        "optional",
        "mandatory",
        "weak",
        "strong",
        "secure",
        "insecure",
        "safe",
        "unsafe",
        "simple",
        "complex",
        "long",
        "short",
        "new",
        "old",
        "default",
        "sensitive",
        "case-sensitive",
        "insensitive",
        "good",
        "bad",
        "fine",
        "ok",
        "okay",
        "great",
        "important",
        "public",
        "private",
        "visible",
        "invisible",
        "hidden",
        "secret",
        "same-as",
        "ready",
        "available",
        "unavailable",
        "active",
        "inactive",
        "disabled",
        "enabled",
        "locked",
        "unlocked",
        "compromised",
        "leaked",
        "known",
        "shared",
        "personal",
        "temporary",
        "permanent",
        "random",
        "generated",
        "provided",
        "given",
        "sent",
        "needed",
        "necessary",
        "supposed",
        "meant",
        "used",
        "useless",
        "easy",
        "hard",
        "difficult",
        "obvious",
        "written",
        "printed",
        "on",
        "off",
        "yes",
        "true",
        "false",
        "masked",
        "redacted",
        "unchanged",
        "stored",
        "saved",
        "encrypted",
        "hashed",
        "salted",
        "changed",
        "reset",
        "set",
        "being",
        "been",
        "be",
        "going",
        "gonna",
        "usually",
        "always",
        "never",
        "sometimes",
        "probably",
        "really",
        "actually",
        "basically",
        "literally",
        "currently",
        "definitely",
        "certainly",
        "maybe",
        "perhaps",
        "likely",
        "unlikely",
        "too-short",
        "too-long",
        "short-lived",
        "long-lived",
        "rotated",
        "revoked",
        "working",
        "broken",
        "fixed",
        "different-from",
        "identical",
        "similar",
        "unique",
        "common",
        "reused",
        "blank",
        "stale",
        "fresh",
        "outdated",
        "updated",
        "wrong-again",
        "somewhere-safe",
        "attached",
        "below",
        "above",
        "following",
        "next",
        "previous",
        "last",
        "first",
        "second",
        "third",
        "case",
        "letters",
        "digits",
        "numbers",
        "characters",
        "numeric",
        "alphanumeric",
        "lowercase",
        "uppercase",
        "mixed",
        "strong-enough",
        "weak-enough",
        "good-enough",
        "fine-now",
        # what an instruction says after "password for …:" ("see the vault")
        "see",
        "ask",
        "check",
        "leave",
        "done",
        "use",
        "enter",
        "type",
        "click",
        "contact",
        "refer",
        "follow",
        "pending",
        "tbc",
    ]
)


def _words(text: str) -> list[str]:
    return text.split()


#: The same for a password named in Portuguese, Spanish, French, German, Dutch or
#: Italian ("a senha é a mesma", "la contraseña es incorrecta", "das Passwort ist
#: falsch"): articles, negations, adverbs and the adjectives said of a password.
OTHER_DESCRIBING = frozenset(
    _words(
        """
    o a os as um uma el la los las lo un una le les l' une der die das ein eine de het een
    il lo gli i uno
    não nao no nicht niet pas ne non kein keine geen nenhuma nenhum ninguna ninguno aucun
    aucune nessuna
    muito muy très tres sehr zu te troppo demasiado bem bien gut goed molto trop assez
    bastante pouco poco peu wenig weinig plutôt ziemlich vrij
    mesma mesmo igual misma mismo même meme gleich gleiche hetzelfde dezelfde stessa stesso
    errada errado incorreta incorreto incorrecta incorrecto incorrect incorrecte falsch
    fout sbagliata sbagliato
    inválida invalida inválido válida valida válido valide ungültig gültig ongeldig geldig
    fraca fraco débil debil faible schwach zwak debole
    forte fuerte fort stark sterk
    nova novo nueva nuevo nouvelle nouveau neu neue nieuw nieuwe nuova
    antiga antigo vieja viejo ancienne ancien alt alte oud oude vecchia
    diferente différente anders verschillend diversa
    obrigatória obrigatoria obligatoria obligatoire erforderlich verplicht obbligatoria
    necessária necessaria necesaria nécessaire nötig nodig
    segura seguro sûr sure sicher veilig sicura
    curta corta court courte kurz kort corta
    longa larga long longue lang
    secreta secreto secrète geheim segreta
    simples simple einfach eenvoudig semplice
    difícil dificil difficile schwierig moeilijk
    fácil facil facile leicht makkelijk
    sempre siempre toujours immer altijd
    """
    )
)
#: Portuguese, Spanish and French participles ("alterada", "guardado", "changé"): a
#: password is rarely one, a statement about it often is.
_OTHER_PARTICIPLE = re.compile(r"[a-zà-ÿ]+(?:ad[oa]s?|id[oa]s?|ée?s?)")

#: A number followed by one of these is a length, a count or a duration.
UNITS = frozenset(
    [
        "character",
        "characters",
        "char",
        "chars",
        "digit",
        "digits",
        "letter",
        "letters",
        "symbol",
        "symbols",
        "word",
        "words",
        "byte",
        "bytes",
        "bit",
        "bits",
        "long",
        "min",
        "mins",
        "minute",
        "minutes",
        "hour",
        "hours",
        "hr",
        "hrs",
        "day",
        "days",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "second",
        "seconds",
        "sec",
        "secs",
        "time",
        "times",
        "attempt",
        "attempts",
        "try",
        "tries",
        "percent",
        "%",
        "chars.",
    ]
)

_PLACEHOLDER = re.compile(
    r"""<[^<>]*>|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|%\(?\w*\)?s|\{\{?[^{}]*\}\}?"""
    r"""|[xX]{3,}|\*{3,}|•{3,}|\.{3,}|…+|_{3,}|-{3,}|\?+""",
)
_CALL_OR_ATTRIBUTE = re.compile(r"[A-Za-z_][\w.]*[(\[]|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_PATH = re.compile(r"[/~.]|[A-Za-z]:[\\/]")
_PIN = re.compile(r"\d{4,12}")
_WORD_SUFFIX = re.compile(r"[a-z]+(?:ed|ing|ly)")
#: Trailing sentence punctuation that is not part of a bare value.
TRAILING = ".,;:\"'`”’"
_CLOSERS = {")": "(", "]": "[", "}": "{"}


#: How much evidence a name needs: a PIN/code is digits; the weak names take any
#: value that is not a describing word; the strong names need a credential-like value.
PIN, CODE, WEAK, STRONG, PWD = "pin", "code", "weak", "strong", "pwd"
#: A password named in another language: weak evidence, with that language's words.
OTHER = "other"


def name_class(name: str) -> str:
    """The evidence class of a secret's name as written in prose."""
    lowered = re.sub(r"[\s_-]+", " ", name.lower())
    if lowered.startswith("pin"):
        return PIN
    if lowered in ("otp", "cvv", "cvv2", "cvc", "cvc2", "csc") or (
        lowered.endswith("code") and not lowered.startswith("pass")
    ):
        return CODE  # a door code, a one-time code, a card's security code
    if lowered == "pwd":
        return PWD
    if lowered.startswith(("pass", "pw")) or lowered.endswith(" pass"):
        return WEAK  # "db pass", as "password"
    return STRONG


def _credential_like(value: str) -> bool:
    if any(c.isdigit() for c in value) or len(value) >= 16:
        return True
    if any(not c.isalnum() and c not in "-'" for c in value):
        return True
    return any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)


def looks_secret(
    value: str, kind: str, *, quoted: bool, after: str = "", code: bool = False
) -> bool:
    """Whether ``value``, said to be a secret of class ``kind``, is one.

    ``after`` is the text that follows the value (to tell "12 characters" from
    "12"); ``code`` says the value followed ``=`` or ``:`` (``pw = getpass()``:
    a call or an attribute is code, not a password).
    """
    if not value or value.startswith("[REDACTED]"):
        return False
    if kind == PIN:
        return _PIN.fullmatch(value) is not None
    if kind == CODE:
        return sum(c.isdigit() for c in value) >= 3 and len(value) <= 16
    if _PLACEHOLDER.fullmatch(value) or value.startswith(("<", "{{")):
        return False  # <your password>, {{ secrets.DB }}: a placeholder, not the secret
    if quoted:
        return True
    if value[0] in ")]}>,":
        return False  # login(username, password)), </password></server>, a CSV's next column
    lowered = value.lower()
    if value.isdigit():
        next_word = after.split(None, 1)[0].lower().rstrip(".,;:") if after.strip() else ""
        if next_word in UNITS:
            return False
    if lowered in DESCRIBING or _WORD_SUFFIX.fullmatch(value):
        return False
    if kind == OTHER and (lowered in OTHER_DESCRIBING or _OTHER_PARTICIPLE.fullmatch(lowered)):
        return False
    if len(value) < 3:
        return False
    if (code or kind == PWD) and _CALL_OR_ATTRIBUTE.match(value):
        return False
    if kind == PWD and _PATH.match(value):
        return False
    if kind == STRONG:
        return _credential_like(value)
    return True


#: Where the next field of a connection or query string starts (``;Database=``, ``&ssl=``).
NEXT_FIELD = re.compile(r"[;&][A-Za-z_][\w.-]*=")


def bare_span(match: re.Match[str]) -> tuple[int, int]:
    """Where a rule's bare value (its ``bare`` group) is: without the sentence's
    punctuation after it and, after ``=``, up to the next field of a connection or
    query string ("user=bob&password=x&ssl=true": up to "&ssl=")."""
    start = match.start("bare")
    bare = match.group("bare")
    # after "=" only: "password=x&ssl=true", but "the password is Tr0ub&dor=3"
    field = NEXT_FIELD.search(bare) if match.string[:start].rstrip().endswith("=") else None
    return start, start + len(strip_trailing(bare[: field.start()] if field else bare))


def value_span(match: re.Match[str]) -> tuple[int, int, bool]:
    """Where a :data:`VALUE`'s secret is (a bare one without the sentence's
    punctuation after it), and whether it was quoted."""
    if match.groupdict().get("quoted") is not None:
        return *match.span("quoted"), True
    return *bare_span(match), False


def strip_trailing(value: str) -> str:
    """``value`` without the sentence punctuation that follows a bare value (a closing
    bracket only when the value does not open it: ``${DB_PASS}`` keeps its brace)."""
    while value:
        last = value[-1]
        if last in TRAILING or (
            last in _CLOSERS and value.count(_CLOSERS[last]) < value.count(last)
        ):
            value = value[:-1]
        else:
            break
    return value


#: The next word of a passphrase: letters only, after spaces, with the sentence's
#: punctuation that may close it.
_NEXT_WORD = re.compile(r"[ \t]+([A-Za-z]+)([.!?;,:]?)")


def phrase_end(text: str, end: int, *, first_secret: bool, kind: str = WEAK) -> int | None:
    """Where a passphrase ends that starts with the value ending at ``end``, or None.

    "the password is correct horse battery staple" and "wifi password: purple monkey
    dishwasher" give a phrase of plain words; one word of it redacted leaves the
    rest.  The words after the value are one when they are letters only, none
    describes (:data:`DESCRIBING`, a unit, an -ed/-ing/-ly word) and they run to the
    end of the line or to a punctuation mark: "the password is hunter2 for the vpn"
    and "the password is wrong every single time" stay prose.  After a value that is
    itself a describing word ("correct"), three such words are needed; after a
    secret, one ("sunshine today": a word too many redacted, not one too few).  A
    password named in another language (``kind`` :data:`OTHER`) reads that
    language's describing words too ("a senha é a mesma de antes").
    """
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    position, words, last = end, 0, end
    while position < line_end:
        step = _NEXT_WORD.match(text, position, line_end)
        if step is None:
            rest = text[position:line_end].strip()
            if rest and not rest.startswith("#"):  # a comment ends a value ("# rotate")
                return None  # the sentence goes on with something else: prose
            break
        word = step.group(1).lower()
        if word in DESCRIBING or word in UNITS or _WORD_SUFFIX.fullmatch(word):
            return None
        if kind == OTHER and (word in OTHER_DESCRIBING or _OTHER_PARTICIPLE.fullmatch(word)):
            return None
        words, last, position = words + 1, step.end(1), step.end()
        if step.group(2):
            break
    return last if words >= (1 if first_secret else 3) else None


#: A secret's value after its name: a quoted string (``open`` and ``quoted``), else the
#: word that follows (``bare``); what each rule then keeps of it is its own.
VALUE = (
    r"""(?:(?P<open>["'`“‘])(?P<quoted>[^"'`”’\n]{1,200})["'`”’]"""
    r"""|(?P<bare>[^\s"'`]{1,200}))"""
)
