"""Secrets are redacted before they are stored or embedded; secret files are refused."""

from __future__ import annotations

import json

import pytest
from fakes import SpyEmbedder
from hypothesis import given
from hypothesis import strategies as st

from nbmemory import InvalidInput, Memory, Settings
from nbmemory.redaction import REDACTED, Redactor, check_ingestable, redact

SECRETS = {
    "password": ("login with password: hunter2 please", "hunter2"),
    "password_quoted": ('config PASSWORD="s3cr3t!x"', "s3cr3t!x"),
    "api_key": ("set api_key=abcd1234efgh5678 in the env", "abcd1234efgh5678"),
    "api-key": ("the Api-Key: 'zzTOPsecret99' header", "zzTOPsecret99"),
    "aws_access": ("aws id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    "aws_secret": (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "github": (
        "token ghp_1234567890abcdefghijklmnopqrstuvwxyz used",
        "ghp_1234567890abcdefghijklmnopqrstuvwxyz",
    ),
    "github_pat": (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
    ),
    "openai": (
        "OPENAI key sk-proj-abcDEF1234567890ghijKLMNOP yes",
        "sk-proj-abcDEF1234567890ghijKLMNOP",
    ),
    "bearer": (
        "Authorization: Bearer abcdef0123456789abcdef.xyz",
        "abcdef0123456789abcdef.xyz",
    ),
    "jwt": (
        "cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    ),
    "private_key": (
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\nend",
        "MIIEow",
    ),
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_default_patterns_remove_the_secret(name: str) -> None:
    text, secret = SECRETS[name]
    result = redact(text)
    assert secret not in result.text
    assert REDACTED in result.text
    assert result.count >= 1


def test_the_label_is_kept_so_the_memory_says_a_password_was_given() -> None:
    assert redact("password: hunter2").text == "password: [REDACTED]"
    assert redact("my api_key='abc123xyz' ok").text == "my api_key='[REDACTED]' ok"


def test_ordinary_text_is_untouched() -> None:
    text = "I forgot my password again, and the bearer of bad news was late. sk-8 is a ski."
    result = redact(text)
    assert result.text == text
    assert result.count == 0


@given(st.text(max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.count == 0


@given(st.from_regex(r"[a-zA-Z0-9!#$%&()*+,\-./;<>?@^_|~]{1,30}", fullmatch=True))
def test_any_password_value_is_removed(value: str) -> None:
    result = redact(f"note: password={value} end")
    assert result.text == "note: password=[REDACTED] end"
    assert result.count == 1


def test_custom_patterns_from_settings(store_path: str) -> None:
    settings = Settings(redact_patterns=[r"EMP-\d{6}"])
    assert settings.redact_patterns == (r"EMP-\d{6}",)
    with Memory(store_path, embedder="hash", settings=settings) as mem:
        event = mem.add_event("s", "user", "employee EMP-123456 called")
        assert event.content == "employee [REDACTED] called"


def test_bad_custom_pattern_is_refused_with_its_name() -> None:
    with pytest.raises(InvalidInput, match=r"redact_patterns\[0\].*not a valid regex"):
        Settings(redact_patterns=["(unclosed"])
    with pytest.raises(InvalidInput, match="matches empty text"):
        Redactor([".*"])


def test_secret_never_reaches_store_model_or_audit(store_path: str) -> None:
    spy = SpyEmbedder()
    with Memory(store_path, embedder=spy) as mem:
        event = mem.add_event("s1", "user", "my password: hunter2 and key AKIAIOSFODNN7EXAMPLE")
        ids = mem.add_events(
            [
                {"session_id": "s1", "role": "user", "content": "api_key=abc123secret"},
                {"session_id": "s1", "role": "user", "content": "nothing secret"},
            ]
        )
        mem.flush()
        stored = mem.events()["content"].tolist()
        assert all("hunter2" not in c and "abc123secret" not in c for c in stored)
        assert "AKIAIOSFODNN7EXAMPLE" not in event.content
        assert spy.seen and all("hunter2" not in t and "abc123secret" not in t for t in spy.seen)
        log = mem.audit_log(action="add")
        details = [json.loads(d) for d in log["details"]]
        by_target = {tuple(t): d for t, d in zip(log["target_ids"], details, strict=True)}
        assert by_target[(event.id,)]["redacted"] == 2
        assert by_target[tuple(ids)]["redacted"] == 1
        raw = mem.store.fetchall("SELECT details FROM audit_log")
        assert not any("hunter2" in r[0] or "abc123secret" in r[0] for r in raw)


def test_redaction_can_be_turned_off(store_path: str) -> None:
    with Memory(store_path, embedder="hash", redaction=False) as mem:
        assert mem.add_event("s", "user", "password: hunter2").content == "password: hunter2"
        mem.configure(redaction=True)
        assert mem.add_event("s", "user", "password: hunter2").content == "password: [REDACTED]"


@pytest.mark.parametrize(
    "name", [".env", ".env.local", "prod.env", "server.key", "cert.PEM", "dir/id.pem"]
)
def test_blocklisted_files_are_refused(name: str) -> None:
    with pytest.raises(InvalidInput, match="refusing to ingest .*blocklist"):
        check_ingestable(name)


@pytest.mark.parametrize("name", ["AGENTS.md", "notes.txt", "keys.md", "environment.md"])
def test_ordinary_files_pass(name: str) -> None:
    assert check_ingestable(name).name == name
