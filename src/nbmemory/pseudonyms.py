"""Pseudonyms: forgotten ids replaced in the audit trail by a keyed hash.

Forgetting a user or a session (:meth:`~nbmemory.sessions.lifecycle.Sessions.forget_user`,
``mem.sessions.delete(..., forget=True)``) keeps the audit rows (what happened, when,
by which actor stays on record) and replaces every occurrence of the forgotten
ids in them by a *pseudonym*: ``pseudonym:`` and 32 hex digits of HMAC-SHA256
under a random key kept in the store (``nbmemory_meta``).  The same id always
gives the same pseudonym in a store, so the rows of one forgotten user still
link to each other; nobody can turn a pseudonym back into the id, and only
someone holding the key can test a guess.  ``purge(rotate_pseudonym_key=True)``
drops the key (a new one is made when next needed): from then on, not even a
guess can be tested against the pseudonyms already written.

Shared by the sessions (forgetting) and the event log (``purge``), so it sits
below both.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .store import Tx

#: How a pseudonym starts (an id that already is one is never hashed again).
PSEUDONYM_PREFIX = "pseudonym:"
#: The ``nbmemory_meta`` key holding the store's pseudonym key.
PSEUDONYM_KEY = "pseudonym_key"
#: Hex digits of the HMAC kept in a pseudonym (128 bits).
PSEUDONYM_DIGITS = 32
_PSEUDONYM = re.compile(re.escape(PSEUDONYM_PREFIX) + f"[0-9a-f]{{{PSEUDONYM_DIGITS}}}")


class Pseudonyms:
    """The store's keyed hash of ids, its key made (in ``tx``) on first use."""

    def __init__(self, tx: Tx) -> None:
        key = tx.store.meta.setdefault(PSEUDONYM_KEY, secrets.token_hex(32))
        self._key = key.encode()

    def __call__(self, value: str) -> str:
        """The pseudonym of ``value`` (a pseudonym is left as it is)."""
        if _PSEUDONYM.fullmatch(value):
            return value
        digest = hmac.new(self._key, value.encode(), hashlib.sha256).hexdigest()
        return PSEUDONYM_PREFIX + digest[:PSEUDONYM_DIGITS]


def pseudonymise_trail(
    tx: Tx, ids: Iterable[str], namespaces: Sequence[str] | None, pseudonyms: Pseudonyms
) -> int:
    """Replace every occurrence of ``ids`` in the audit rows of ``namespaces`` (and in
    the rows of no namespace; every row when None) by their pseudonyms; returns how
    many rows changed.

    An occurrence is the id as a target id, as the actor, or anywhere in a string
    of the details (a file name that contains it too) where it is not part of a
    longer word: forgetting ``u1`` leaves ``u12`` alone.
    """
    wanted = sorted({i for i in ids if i and not _PSEUDONYM.fullmatch(i)})
    if not wanted:
        return 0
    replace = _replacer({i: pseudonyms(i) for i in wanted})
    needles = sorted(set(wanted) | {json.dumps(i, ensure_ascii=False)[1:-1] for i in wanted})
    changed = []
    for row_id, actor, targets, details in tx.store.audit.quoting(needles, namespaces):
        new_actor = replace(actor)
        new_targets = [replace(t) if isinstance(t, str) else t for t in targets]
        new_details = None if details is None else _replace_in_json(details, replace)
        if (new_actor, new_targets, new_details) != (actor, targets, details):
            changed.append((row_id, new_actor, new_targets, new_details))
    return tx.store.audit.rewrite_rows(changed)


def _replacer(mapping: dict[str, str]) -> Callable[[str], str]:
    """A function putting ``mapping``'s values in place of its keys wherever one stands
    alone (no letter or digit right before or after it), never inside a pseudonym."""
    alternatives = "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True))
    pattern = re.compile(f"({_PSEUDONYM.pattern})|(?<![^\\W_])(?:{alternatives})(?![^\\W_])")

    def replace(text: str) -> str:
        return pattern.sub(lambda m: m.group(1) or mapping[m.group(0)], text)

    return replace


def _replace_in_json(details: str, replace: Callable[[str], str]) -> str:
    """``replace`` applied to every string value of a JSON text (keys are ours and stay);
    written back as the trail writes details.  Text that is not JSON is replaced whole."""
    try:
        value = json.loads(details)
    except ValueError:
        return replace(details)

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return replace(item)
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        return item

    new = walk(value)
    if new == value:
        return details
    return json.dumps(new, ensure_ascii=False, default=str, sort_keys=True)
