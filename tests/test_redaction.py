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


# -- the forms secrets come in, and what only looks like one -----------------------------
#: (text, the secret that must not survive)
SECRET_FORMS = [
    ('{"password": "hunter2"}', "hunter2"),
    ("{'password': 'hunter2'}", "hunter2"),
    ('"api_key": "abcd1234efgh"', "abcd1234efgh"),
    ('{"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}', "wJalrXUtnFEMI"),
    ("password: hunter2", "hunter2"),
    ("Password = s3cr3t!", "s3cr3t!"),
    ("DB_PASSWORD=pg-Secr3t-99", "pg-Secr3t-99"),
    ("export OPENAI_API_KEY=abcd1234abcd1234", "abcd1234abcd1234"),
    ("STRIPE_SECRET_KEY='zz_9kd8f7g6h5j4k3l2'", "zz_9kd8f7g6h5j4k3l2"),
    ("client_secret: 8f7d6c5b4a39281706f5", "8f7d6c5b4a39281706f5"),
    ("db:\n  password: 'correct horse battery staple'\n", "correct horse battery staple"),
    ("smtp:\n  passwd: mailpass123\n", "mailpass123"),
    ("config = {'db_password': 'tr0ub4dor&3', 'host': 'db'}", "tr0ub4dor&3"),
    ('creds = dict(password="letmein2024")', "letmein2024"),
    ('{"auth": {"access_token": "ya29.a0AfH6SMBx3"}}', "ya29.a0AfH6SMBx3"),
    ('{"refresh_token":"1//0gLx8qRt7Wf"}', "1//0gLx8qRt7Wf"),
    ("GITHUB_TOKEN=ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "ghp_1234567890abcdefghij"),
    ("token: ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij", "ghp_ABCDEFGHIJ"),
    ("my key is sk-proj-abcdefghijklmnopqrstuvwxyz123456", "sk-proj-abcdefghijklmnop"),
    ("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("slack: xoxb-123456789012-abcdefABCDEF", "xoxb-123456789012"),
    ("Authorization: Bearer abcdef1234567890abcdef", "abcdef1234567890abcdef"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ('headers = {"Authorization": "Token 9f8e7d6c5b4a3928"}', "9f8e7d6c5b4a3928"),
    ("X-Api-Key: 7c2b9e0f4d1a8c3e", "7c2b9e0f4d1a8c3e"),
    ("curl -H 'x-api-key: qwertyuiop123456' https://api", "qwertyuiop123456"),
    ("postgres://admin:Sup3rS3cret@db.internal:5432/app", "Sup3rS3cret"),
    ("https://bob:p%40ss@example.com/repo.git", "p%40ss"),
    ("redis://:hunter2redis@cache:6379", "hunter2redis"),
    ("mongodb+srv://svc:Zx9-Qw8@cluster0.mongodb.net", "Zx9-Qw8"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "eyJhbGciOiJIUzI1NiJ9",
    ),
    (
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nAAAAA",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    ),
    ("card 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"),
    ("paid with 5500-0000-0000-0004", "5500-0000-0000-0004"),
    ("amex 378282246310005", "378282246310005"),
    ("visa 4012888888881881", "4012888888881881"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD-9tSrke72PouQMnMX"),
    ("secret: 0a1b2c3d4e5f", "0a1b2c3d4e5f"),
    ("SESSION_TOKEN=abc.def.ghi.jkl", "abc.def.ghi.jkl"),
    ("passphrase => 'open sesame please'", "open sesame please"),
    ('"private_key": "MIIBVgIBADANBgkqhk"', "MIIBVgIBADANBgkqhk"),
    ("credentials: YWRtaW46YWRtaW4=", "YWRtaW46YWRtaW4="),
]

#: Texts that look like secrets but are not: left exactly as they are.
LOOK_ALIKES = [
    "the password policy requires 12 characters",
    "I forgot my password yesterday",
    "api key rotation is scheduled for Monday",
    "a token bucket limits the request rate",
    "max_tokens: 4096",
    "token_count: 42",
    "password_hint: the name of my first dog",
    "passport: valid until 2030",
    "secretary: Jane Doe",
    "secret_santa = Bob",
    "The secret to bread is patience",
    "keyboard layout is qwerty",
    "https://example.com:8443/path?user=1",
    "ssh://git@github.com/org/repo.git",
    "mailto:john@example.com",
    "email me at john.doe@example.com",
    "call me on 555-123-4567",
    "order 4111 1111 1111 1112 was shipped",
    "ISBN 978-3-16-148410-0",
    "timestamp 20240508135600123",
    "version 1.2.3 of the library",
    "we use sk-learn for the model",
    "the Bearer of bad news",
    "-----BEGIN PUBLIC KEY-----",
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ user@host",
    "AKIA is the prefix of AWS access keys",
    "eyJ starts every JWT",
    "git commit 3f9c2a1e8b7d6c5b4a39",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "SELECT password FROM users",
    "reset your password at /account/reset",
    "the api_key field is required",
    "Authorization header missing",
    "phone +44 20 7946 0958",
    "pi is 3.14159265358979",
    "room 4242, floor 3",
    "sha256 e3b0c44298fc1c149afbf4c8996fb924",
    "zip 94107, order #100023",
    "tokens: 512, temperature: 0.2",
    "the password was changed by IT",
    "invoice 6011-0000-0000-0005-77",
    "user:admin at host db01",
]


@pytest.mark.parametrize("text, secret", SECRET_FORMS)
def test_common_secret_forms_are_caught(text: str, secret: str) -> None:
    result = redact(text)
    assert secret not in result.text and result.count >= 1, result.text
    assert redact(result.text).count == 0  # idempotent


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_are_left_alone(text: str) -> None:
    result = redact(text)
    assert result.text == text and result.count == 0


def test_the_tables_are_large_enough() -> None:
    assert len(SECRET_FORMS) >= 40 and len(LOOK_ALIKES) >= 40


_EVERY_SECRET = [text for text, _ in SECRET_FORMS] + [text for text, _ in SECRETS.values()]


@pytest.mark.parametrize("text", _EVERY_SECRET)
def test_each_pattern_that_matches_a_secret_also_matches_its_needle(text: str) -> None:
    """The cheap pre-checks that let most texts skip a pattern never skip a secret."""
    from nbmemory.redaction import _COMPILED_NEEDLES

    matched = False
    for name, pattern in Redactor().patterns:
        for match in pattern.finditer(text):
            matched = True
            assert _COMPILED_NEEDLES[name].search(match.group(0)), (name, match.group(0))
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


def test_a_batch_with_custom_patterns_sends_every_text_to_the_redactor() -> None:
    redactor = Redactor(["internal-[0-9]+"])
    assert redactor.suspects(["a", "b", "internal-7"]) == [0, 1, 2]
    assert Redactor().suspects(["plain", "sk-" + "b" * 24, "", "password: x"]) == [1, 3]


def test_add_events_redacts_the_few_texts_of_a_batch_that_hold_a_secret(store_path: str) -> None:
    texts = [f"ordinary text {i}" for i in range(200)]
    texts[17] = "password: hunter2"
    texts[150] = "slack: xoxb-123456789012-abcdefABCDEF"
    mem = Memory(store_path, embedder=SpyEmbedder())
    try:
        mem.add_events([{"session_id": "s", "role": "user", "content": t} for t in texts])
        stored = mem.store.fetchall("SELECT content FROM events")
        contents = {row[0] for row in stored}
        assert "password: hunter2" not in contents and len(contents) == 200
        assert not any("xoxb-123456789012" in c for c in contents)
        assert sum(REDACTED in c for c in contents) == 2
    finally:
        mem.close()
