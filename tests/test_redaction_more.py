"""What stays when a file, a manifest or a table is redacted: only its secrets go (the
forms themselves, and their look-alikes, are in ``tests/redaction_forms.py``)."""

from __future__ import annotations

import pytest

from nbmemory.redaction import redact


@pytest.mark.parametrize(
    "text, expected",
    [
        ("pw: A=0", "pw: [REDACTED]"),
    ],
)
def test_only_the_secret_of_a_form_is_replaced(text: str, expected: str) -> None:
    assert redact(text).text == expected
