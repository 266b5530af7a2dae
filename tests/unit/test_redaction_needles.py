"""The redactor's needles: each rule has a cheap pre-check (a needle) that lets a text
without one skip the rule's pattern, and a batch be searched in one scan; the pre-checks
never skip a secret and change no answer.  The secrets and look-alikes are those of
``tests/test_redaction.py``, which checks the redaction itself through the API."""

from __future__ import annotations

import pytest
import redaction_forms
from hypothesis import given
from hypothesis import strategies as st
from test_redaction import LOOK_ALIKES, PROSE_SECRETS, SECRET_FORMS, SECRETS, TOKENS

from nbmemory.redaction import Redactor, redact


def test_every_new_rule_has_a_needle_and_suspects_stay_one_scan() -> None:
    """Each rule has a needle, so a text without one costs one scan (the batch's)."""
    from nbmemory.redaction import _COMPILED_NEEDLES, rules

    assert all(rule.name in _COMPILED_NEEDLES for rule in rules.RULES)
    assert Redactor(pii=True)._all_needled and Redactor()._all_needled
    texts = [
        "plain chat about lunch",
        "the meeting moved to 10:30",
        "see https://example.com/a?b=1",
    ]
    assert Redactor().suspects(texts) == []


_EVERY_SECRET = (
    [text for text, _ in SECRET_FORMS]
    + [text for text, _ in SECRETS.values()]
    + [text for text, _ in PROSE_SECRETS]
    + [f"use {token} here" for _, token, _ in TOKENS]
    + [text for text, _ in redaction_forms.SECRETS]
)


@pytest.mark.parametrize("text", _EVERY_SECRET)
def test_each_pattern_that_matches_a_secret_also_matches_its_needle(text: str) -> None:
    """The cheap pre-checks that let most texts skip a pattern never skip a secret."""
    from nbmemory.redaction import _COMPILED_NEEDLES

    matched = False
    for name, pattern in Redactor().patterns:
        for match in pattern.finditer(text):
            matched = True
            assert _COMPILED_NEEDLES[name].search(match.group(0).lower()), (name, match.group(0))
    assert matched, text


def _texts(size: int) -> st.SearchStrategy[str]:
    """Any text, or a secret with any text around it."""
    return st.one_of(
        st.text(max_size=size),
        st.builds(
            lambda before, secret, after: before + secret + after,
            st.text(max_size=size // 4),
            st.sampled_from(_EVERY_SECRET),
            st.text(max_size=size // 4),
        ),
    )


@given(_texts(120))
def test_needles_change_nothing(text: str) -> None:
    """Redaction with the pre-checks equals redaction by every pattern in turn."""
    from unittest import mock

    from nbmemory import redaction

    with_needles = Redactor().redact(text)
    with mock.patch.dict(redaction._COMPILED_NEEDLES, clear=True):
        without = Redactor().redact(text)
    assert with_needles == without


@given(st.lists(st.one_of(_texts(60), st.sampled_from(LOOK_ALIKES)), max_size=12))
def test_a_batch_search_names_every_text_redaction_would_change(texts: list[str]) -> None:
    """``suspects`` searches a batch as one string: it must still name every text a
    pattern changes, and a text it names holds a needle (NUL joins cannot fake one)."""
    from nbmemory.redaction import _some_needle

    redactor = Redactor()
    suspects = redactor.suspects(texts)
    assert suspects == sorted(set(suspects))
    assert suspects == [i for i, text in enumerate(texts) if _some_needle(text)]
    for i, text in enumerate(texts):
        if i not in suspects:
            assert redactor.redact(text) == redact(text) and redact(text).count == 0
