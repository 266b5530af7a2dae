"""Secrets are redacted before they are stored or embedded; secret files are refused."""

from __future__ import annotations

import json
import re

import pytest
import redaction_forms
from fakes import SpyEmbedder
from hypothesis import assume, example, given
from hypothesis import strategies as st

from nbmemory import InvalidInput, Memory, Settings
from nbmemory.redaction import (
    REDACTED,
    Redaction,
    Redactor,
    check_ingestable,
    code,
    prose,
    redact,
)
from nbmemory.redaction.rules import SECRET_KEY

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
    text = f"note: password={value} end"
    # a value written as code is not a password (``password=getpass()``, ``=x.y``)
    assume(not code.is_code(text, len("note: password="), len(text) - 4, SECRET_KEY))
    result = redact(text)
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


# -- secrets in every form agents write them (issue 34) ----------------------------------
_PEM_BODY = "MIIEowIBAAKCAQEA7bq9xZ1Q2xlYW5Db2RlUGxlYXNl"
_PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\nQ2xlYW5Db2RlMTIzNDU2\n-----END RSA PRIVATE KEY-----\n"

#: (text, the secret that must not survive): prose, command lines, env assignments.
PROSE_SECRETS = [
    ("the DB password is Tr0ub4dor&3", "Tr0ub4dor&3"),
    ("password is hunter2", "hunter2"),
    ("pw: hunter2", "hunter2"),
    ("PW=hunter2", "hunter2"),
    ("The wifi passcode is 88412299", "88412299"),
    ("my new wifi passcode is now 55119933", "55119933"),
    ("the password for the prod db is Zx9#kk", "Zx9#kk"),
    ("My Gmail password was Spring2024.", "Spring2024"),
    ("the wifi password is sunshine", "sunshine"),
    ("my password's letmein9", "letmein9"),
    ("the password is 'open sesame'", "open sesame"),
    ("the passphrase is `correct horse battery`", "correct horse battery"),
    ("password has been changed to Qwerty!23", "Qwerty!23"),
    ("set my password to Winter2024!", "Winter2024!"),
    ("please change the wifi password to Lantern77", "Lantern77"),
    ("use hunter22 as the password", "hunter22"),
    ("the api key is 9f8e7d6c5b4a3928", "9f8e7d6c5b4a3928"),
    ("the secret is Xk9-pQ2-zZ8", "Xk9-pQ2-zZ8"),
    ("the pin is 4821", "4821"),
    ("PIN: 7730", "7730"),
    ("door code is 4411#", "4411#"),
    ("curl -u admin:s3cretpw https://api.example.com", "s3cretpw"),
    ("curl --user 'deploy:p4ss word' https://x", "p4ss word"),
    ("http -a bob:h77pie https://x", "h77pie"),
    ("mysql -uroot -pS3cret db", "S3cret"),
    ("mysqldump -u root -p'dump pass' shop > x.sql", "dump pass"),
    ("PGPASSWORD=pgS3cret psql -h db -U app", "pgS3cret"),
    ("MYSQL_PWD=myS3cret mysql -u root", "myS3cret"),
    ("sshpass -p 'sshS3cret' ssh deploy@host", "sshS3cret"),
    ("wget --password=wgetS3cret https://x/file", "wgetS3cret"),
    ("mysql --password S3cretLong db", "S3cretLong"),
    ("tool --api-key 0a1b2c3d4e5f6a7b run", "0a1b2c3d4e5f6a7b"),
    ("export FOO_PASSWORD=fooS3cret", "fooS3cret"),
    ("export SMTP_PASS=smtpS3cret", "smtpS3cret"),
    ("docker login -u bob -p dockS3cret registry.example.com", "dockS3cret"),
    ("redis-cli -a redisS3cret ping", "redisS3cret"),
    ("ldapsearch -x -w ldapS3cret -b dc=example", "ldapS3cret"),
    ("zip -P zipS3cret out.zip notes.txt", "zipS3cret"),
    ("openssl rsa -passin pass:osslS3cret -in k.pem", "osslS3cret"),
    ("htpasswd -b .htpasswd bob htS3cret", "htS3cret"),
    ("smbclient //srv/share -U bob%smbS3cret", "smbS3cret"),
    ("7z a -p7zS3cret backup.7z dir", "7zS3cret"),
    ("AccountKey=abcDEF123/xyz==;EndpointSuffix=core.windows.net", "abcDEF123/xyz=="),
    # "pass" after what it opens, and "was changed to" (the value is not "changed")
    ("my db pass: Tr0ub4dor&3 please remember", "Tr0ub4dor&3"),
    ("root pass is toor", "toor"),
    ("the wifi pass is sunflower42", "sunflower42"),
    ("user-pass: hunter22", "hunter22"),
    ("the admin password was changed to Qw3rty!", "Qw3rty"),
    ("the vpn pass was changed to Lantern77", "Lantern77"),
    ("the token was set to abcDEF123456", "abcDEF123456"),
    # a user name and its password side by side
    ("user: bob pass: hunter22", "hunter22"),
    ("username admin password admin123", "admin123"),
    ("login is bob / hunter22", "hunter22"),
    ("creds: admin / P@ssw0rd1", "P@ssw0rd1"),
    ("Login with user demo / pass demo123", "demo123"),
    ("usr: kim pw: Kk#1990", "Kk#1990"),
    ("username: alice password: 'sun and moon'", "sun and moon"),
    # one-time codes, judged as door codes (digits)
    ("the OTP is 552913", "552913"),
    ("2FA code: 118822", "118822"),
    ("your verification code is 118-822", "118-822"),
    # an arrow, or nothing at all, between the name and a credential-like value
    ("password -> hunter2xyz", "hunter2xyz"),
    ("wifi password → sunshine", "sunshine"),
    ("pw hunter2xyz", "hunter2xyz"),
    ("my passwd Qwerty!23 for the vpn", "Qwerty!23"),
    ("password abc123 works", "abc123"),
    ("Password - hunter2xyz", "hunter2xyz"),
    ("Wifi password – sunflower42", "sunflower42"),
    # a user and a password as one token after logging in
    ("login with admin:S3cret!pass", "S3cret!pass"),
    ("ssh as deploy:Xk9#mm2q to the box", "Xk9#mm2q"),
    ("logged in as bob:hunter22", "hunter22"),
    # a form pasted as shown: the value on the line after its label
    ("Username:\nbob\nPassword:\nS3cret!pw\n", "S3cret!pw"),
    ("PIN:\n4921", "4921"),
    # a card's security code, beside its (always redacted) number
    ("Card 4111 1111 1111 1111, exp 12/27, cvv 123", "123"),
    ("the CVC is 998", "998"),
    ("card cvv: 4412", "4412"),
    # what the password is for, then a colon
    ("Password for prod: hunter2xyz", "hunter2xyz"),
    ("password for the staging db: Winter2024!", "Winter2024!"),
    ("wifi password for the guest network: sunflower", "sunflower"),
    ("Password (prod): Xy7!pq99", "Xy7!pq99"),
    ("the new wifi password (changed today): Sunny2024!", "Sunny2024!"),
]

#: Look-alikes of the prose and command-line forms: left exactly as they are.
PROSE_LOOK_ALIKES = [
    "the password is incorrect",
    "password is required",
    "the password is too short",
    # decided: the value after "is" would be "the", a describing word (docs/python-api.md)
    "my password is the same as before",
    "the password is 12 characters long",
    "the password was changed by IT",
    "the password is stored in 1Password",
    "the password is ${DB_PASS}",
    "password is <your password>",
    "reset the password to default",
    "use it as the password",
    "pw reset link",
    "passport number",
    "max_tokens: 512",
    "token count is 42",
    "the token is valid for 1 hour",
    "a session token is issued",
    "the secret is to keep it simple",
    "the secret is patience",
    "the secret key is rotated monthly",
    "the api key is in the vault",
    "pin the version to 1.4",
    "your PIN is 4 digits",
    "pin = Pin(2, Pin.OUT)",
    "pwd = os.getcwd()",
    "PWD=/home/bob",
    "the exit code is 1",
    "exit code: 404",
    "docker run -p 8080:80 nginx",
    "docker run -u 1000:1000 img",
    "sort -u names.txt",
    "ps -p 1234",
    "ssh -p 22 deploy@host",
    "mkdir -p /tmp/x",
    "git commit -m 'fix the password check'",
    "git push -u origin main",
    "python -m pytest",
    "tar -xzf release.tgz",
    "gcc -pthread main.c",
    "psql --password mydb",
    "docker login --password-stdin",
    "sk-learn is not a library",
    "hf_hub_download(repo_id)",
    "boarding pass: gate 12",
    "PASS: test_login",
    "All tests pass: 12 of 12",
    "bus pass: expired",
    "the pass is valid",
    "the user pass rate is 98%",
    "db pass: incorrect",
    "the password was reset to default",
    "Login: email / password",
    "the login: john / see above",
    "user name password reset",
    "user admin password is incorrect",
    "user bob pass the test",
    "user = User(); pwd = os.getcwd()",
    "login is required / optional",
    "the user / password fields",
    '[{"role": "user", "content": "the login flow"}, {"role": "user", "content": "passed"}]',
    "the OTP is sent by SMS",
    "the verification code is 6 digits",
    "otp: null",
    "the error code is 500",
    "status code is 200",
    "password -> reset flow",
    "password -> hashed with bcrypt",
    "password -> User.password_hash",
    "password manager",
    "pw reset email sent",
    "password policy v2.1",
    "passwd -l bob",
    "passwd(5) man page",
    "password 2FA",
    "password (optional)",
    "password min_length=12",
    "check the passwd /etc/passwd file",
    # a password's name, then prose about it: no passphrase
    "the password is wrong every single time",
    "the password is correct now thanks",
    "the password is stored in the vault",
    "my password is too long to type on the phone",
    "the password is the one we agreed on",
    "the password is not correct horse",
    "password - reset flow",
    "login with google:oauth",
    "ssh as root:22",
    "Password:\nrequired",
    "Password:\n********",
    "password:\n  - at least 12 chars",
    # a seed phrase's name, then prose
    "the seed phrase is stored offline",
    "the mnemonic is on the card",
    "the recovery phrase is what you wrote down when creating the wallet",
    "the cvv is on the back",
    "cvv is 3 digits",
    "cvv check failed",
    "the password is numbers.",  # not "nu" (Dutch "now") and then a value "mbers"
    "password for db: os.environ['PW']",
    "password for the admin panel: see the vault",
    "password (optional): leave empty",
    "reset the password for prod: done",
    "password (required)",
    "password for: everyone",
]

#: (text, what it must become): a passphrase of plain words is redacted whole, not
#: its first word ("[REDACTED] horse battery staple" kept three words of four).
PASSPHRASES = [
    ("the password is correct horse battery staple", "the password is [REDACTED]"),
    (
        "the wifi password is purple monkey dishwasher, don't share it",
        "the wifi password is [REDACTED], don't share it",
    ),
    ("The password is Correct Horse Battery Staple.", "The password is [REDACTED]."),
    ("passphrase: correct horse battery staple", "passphrase: [REDACTED]"),
    ("password: purple monkey dishwasher # rotate", "password: [REDACTED] # rotate"),
    ("a senha é cavalo correto bateria grampo", "a senha é [REDACTED]"),
    ("senha: cavalo correto bateria grampo", "senha: [REDACTED]"),
    # after a key and a colon the value is judged as in prose: "the same as before"
    ("senha: a mesma de antes", "senha: a mesma de antes"),
    ("password: the same as staging", "password: the same as staging"),
    # "'s" is a verb right after the name only: the secret, not "account", goes
    ("password for bob's account: Kk#1990", "password for bob's account: [REDACTED]"),
    ("the password's hunter2", "the password's [REDACTED]"),
    ("the password is sunshine today", "the password is [REDACTED]"),
    # a value and then prose: only the value
    ("the password is hunter2 for the vpn", "the password is [REDACTED] for the vpn"),
    ("the password is sunshine and it works", "the password is [REDACTED] and it works"),
    ("pass phrase is correct horse battery staple", "pass phrase is [REDACTED]"),
    # a value starting like an adverb of another language ("nog", "ora") is whole
    ("the password is nogood1", "the password is [REDACTED]"),
    ("the password is oranges7", "the password is [REDACTED]"),
    # a wallet's seed phrase: 12 to 25 words, whatever they are ("about", "above" ...)
    (
        "my seed phrase is abandon ability able about above absent absorb abstract "
        "absurd abuse access accident",
        "my seed phrase is [REDACTED]",
    ),
    (
        "Secret Recovery Phrase: zoo, zero, youth, young, yellow, year, wrong, write, "
        "world, wood, wool, wolf",
        "Secret Recovery Phrase: [REDACTED]",
    ),
    (
        "seed words:\nlegal winner thank year\nwave sausage worth useful\n"
        "legal winner thank yellow\n\nkeep them safe",
        "seed words:\n[REDACTED]\n\nkeep them safe",
    ),
]


#: (text, what it must become): a password named in Portuguese, Spanish, French,
#: German, Dutch or Italian, in prose and as a key.
OTHER_LANGUAGE_SECRETS = [
    ("a senha do wifi é batata123", "a senha do wifi é [REDACTED]"),
    ("a senha é batata", "a senha é [REDACTED]"),
    ("A senha agora é girassol.", "A senha agora é [REDACTED]."),
    ("minha senha é 'sol e mar'", "minha senha é '[REDACTED]'"),
    ("senha: batata123", "senha: [REDACTED]"),
    ('{"usuario": "ana", "senha": "batata123"}', '{"usuario": "ana", "senha": "[REDACTED]"}'),
    ("la contraseña es perro99", "la contraseña es [REDACTED]"),
    ("la contraseña del wifi es gatito", "la contraseña del wifi es [REDACTED]"),
    ("contraseña=Hola1234", "contraseña=[REDACTED]"),
    ("le mot de passe est soleil", "le mot de passe est [REDACTED]"),
    ("das Passwort ist Sonne123", "das Passwort ist [REDACTED]"),
    ("Kennwort: geheim42", "Kennwort: [REDACTED]"),
    ("mot de passe: soleil42", "mot de passe: [REDACTED]"),
    ("palavra-passe: batata1", "palavra-passe: [REDACTED]"),
    ("het wachtwoord is tulp42", "het wachtwoord is [REDACTED]"),
    ("la password è girasole", "la password è [REDACTED]"),
]

#: What people say about a password in those languages: left as written.
OTHER_LANGUAGE_LOOK_ALIKES = [
    "a senha é a mesma de antes",
    "minha senha é muito fraca",
    "a senha é obrigatória",
    "a senha foi alterada ontem",
    "senha e usuário errados",
    "esqueci a senha",
    "la contraseña es incorrecta",
    "la contraseña es demasiado corta",
    "le mot de passe est trop court",
    "le mot de passe est changé",
    "mot de passe oublié",
    "das Passwort ist falsch",
    "Passwort vergessen",
    "het wachtwoord is geldig",
    "la password è sbagliata",
    "je passe est",
]


@pytest.mark.parametrize("text, secret", PROSE_SECRETS + redaction_forms.SECRETS)
def test_prose_and_command_line_secrets_are_caught(text: str, secret: str) -> None:
    result = redact(text)
    assert secret not in result.text and result.count >= 1, result.text
    assert redact(result.text).count == 0


@pytest.mark.parametrize(
    "text", PROSE_LOOK_ALIKES + OTHER_LANGUAGE_LOOK_ALIKES + redaction_forms.LOOK_ALIKES
)
def test_prose_and_command_line_look_alikes_are_left_alone(text: str) -> None:
    result = redact(text)
    assert result.text == text and result.count == 0, result.text


@pytest.mark.parametrize("text, expected", PASSPHRASES)
def test_a_passphrase_of_plain_words_is_redacted_whole(text: str, expected: str) -> None:
    assert redact(text).text == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Server=db;User Id=sa;Password=S3cret;Database=app",
            "Server=db;User Id=sa;Password=[REDACTED];Database=app",
        ),
        (
            "jdbc:mysql://host/db?user=bob&password=S3cret&ssl=true",
            "jdbc:mysql://host/db?user=bob&password=[REDACTED]&ssl=true",
        ),
    ],
)
def test_a_connection_string_keeps_the_fields_after_the_password(text: str, expected: str) -> None:
    """The value ends where the next field starts (``;Database=``, ``&ssl=``)."""
    assert redact(text).text == expected


@pytest.mark.parametrize("text, expected", OTHER_LANGUAGE_SECRETS)
def test_a_password_named_in_another_language_is_caught(text: str, expected: str) -> None:
    assert redact(text).text == expected


def test_only_the_value_is_replaced_in_prose_and_commands() -> None:
    assert redact("the DB password is Tr0ub4dor&3").text == "the DB password is [REDACTED]"
    assert redact("My password was Spring2024.").text == "My password was [REDACTED]."
    assert redact("mysql -uroot -pS3cret db").text == "mysql -uroot -p[REDACTED] db"
    assert redact("curl -u admin:s3cretpw https://x").text == "curl -u admin:[REDACTED] https://x"
    assert redact("sshpass -p 'pw 1' ssh h").text == "sshpass -p '[REDACTED]' ssh h"


_SYMBOLS = "!@#$%^&*+=~?"


@given(
    st.from_regex(
        rf"[A-Za-z]{{1,8}}[0-9{re.escape(_SYMBOLS)}][A-Za-z0-9{re.escape(_SYMBOLS)}]{{1,12}}",
        fullmatch=True,
    ),
    st.sampled_from(["the password is", "my wifi password was", "pw:", "the passcode is now"]),
)
@example("X*X", "the password is")  # x and * mixed: a password, not a "***"/"xxx" placeholder
@example("a**b", "pw:")
def test_a_password_with_a_digit_or_symbol_after_is_is_removed(value: str, lead: str) -> None:
    result = redact(f"{lead} {value}")
    assert result.text == f"{lead} [REDACTED]" and result.count == 1


@given(
    st.sampled_from(sorted(prose.DESCRIBING)),
    st.sampled_from(["password", "passcode", "secret", "token", "api key"]),
)
def test_a_describing_word_after_is_is_kept(word: str, name: str) -> None:
    text = f"the {name} is {word}."
    assert redact(text) == Redaction(text, 0)


@given(st.from_regex(r"[a-z]{3,15}", fullmatch=True))
def test_the_strong_names_need_a_credential_like_value(word: str) -> None:
    """English says "the secret is patience": a lowercase word after secret/token is kept."""
    for name in ("secret", "token", "api key"):
        text = f"the {name} is {word}"
        assert redact(text) == Redaction(text, 0)


@given(st.integers(1, 65535), st.integers(1, 65535))
def test_a_port_mapping_is_not_a_password(host: int, container: int) -> None:
    for text in (f"docker run -p {host}:{container} img", f"ssh -p {host} h", f"ps -p {host}"):
        assert redact(text).count == 0


# -- JSON: tool-call arguments, JSON content, JSON inside JSON ----------------------------
def _tool_calls(arguments: dict) -> str:
    return json.dumps(
        [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "login", "arguments": json.dumps(arguments)},
            }
        ]
    )


STRUCTURED_SECRETS = [
    (_tool_calls({"password": "hunter2", "user": "bob"}), "hunter2"),
    (_tool_calls({"config": {"api_key": "abc123secret"}, "n": 1}), "abc123secret"),
    (json.dumps(json.dumps({"password": "dbl3nc0ded"})), "dbl3nc0ded"),
    (json.dumps(json.dumps(json.dumps({"token": "tr1ple"}))), "tr1ple"),
    (json.dumps({"pin": 4821, "room": 12}), "4821"),
    (json.dumps({"password": 88412299}), "88412299"),
    # ~/.docker/config.json: "auth" is base64 of user:password ({"auth": true} stays)
    (
        '{"auths":{"registry.example.com":{"auth":"ZGVwbG95OkRja3JDZmdQd2Q="}}}',
        "ZGVwbG95OkRja3JDZmdQd2Q=",
    ),
    (json.dumps({"credentials": {"username": "svc", "secret": "n3sted"}}), "n3sted"),
    (json.dumps({"env": [{"name": "DB_PASSWORD", "value": "k8sS3cret"}]}), "k8sS3cret"),
    (
        json.dumps({"note": json.dumps({"env": [{"name": "DB_PASSWORD", "value": "k8sInner"}]})}),
        "k8sInner",
    ),
    (
        json.dumps({"Parameters": [{"ParameterKey": "ApiToken", "ParameterValue": "cfnT0ken"}]}),
        "cfnT0ken",
    ),
    (json.dumps(["sshpass", "-p", "argvS3cret", "ssh", "h"]), "argvS3cret"),
    (json.dumps({"cmd": ["mysql", "-uroot", "-pArgvS3cret", "db"]}), "ArgvS3cret"),
    (json.dumps({"note": "the DB password is Tr0ub4dor&3"}), "Tr0ub4dor&3"),
    (json.dumps({"key": _PEM}), _PEM_BODY),
    (json.dumps({"state": {"ssh": {"key": _PEM}}}, indent=2), _PEM_BODY),
    (json.dumps({"k": "x"}, separators=(",", ":"))[:-1] + ',"password":"c0mpact"}', "c0mpact"),
    (json.dumps({"Password": "ünïcødé-pw1"}, ensure_ascii=True), "ünïcødé-pw1"),
    (
        json.dumps({"Password": "ünïcødé-pw2"}, ensure_ascii=True),
        "\\u00fcn\\u00efc\\u00f8d\\u00e9-pw2",
    ),
]


@pytest.mark.parametrize("text, secret", STRUCTURED_SECRETS)
def test_json_is_redacted_inside_and_stays_json_of_the_same_shape(text: str, secret: str) -> None:
    result = redact(text)
    assert secret not in result.text and result.count >= 1, result.text
    before, after = json.loads(text), json.loads(result.text)
    assert _shape(before) == _shape(after)
    assert redact(result.text).count == 0


def _shape(node: object) -> object:
    """A JSON value's structure: keys, lengths and the shape of strings that are JSON."""
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    if isinstance(node, str):
        try:
            inner = json.loads(node)
        except ValueError:
            return "scalar"
        return ("json", _shape(inner)) if isinstance(inner, dict | list | str) else "scalar"
    return "scalar"  # a secret number is replaced by the string "[REDACTED]"


def test_json_keeps_its_style_and_only_the_secret_changes() -> None:
    compact = '{"user":"bob","password":"hunter2","n":[1,2]}'
    assert redact(compact).text == '{"user":"bob","password":"[REDACTED]","n":[1,2]}'
    pretty = json.dumps({"user": "bob", "api_key": "abc123secret"}, indent=2)
    assert redact(pretty).text == pretty.replace("abc123secret", REDACTED)
    calls = _tool_calls({"password": "hunter2", "user": "bob"})
    assert redact(calls).text == calls.replace("hunter2", REDACTED)


@pytest.mark.parametrize(
    "text",
    [
        '{"max_tokens": 512, "token_count": 3,   "weird":  [1,2 ,3]}',
        json.dumps({"name": "username", "value": "bob"}),
        json.dumps({"password": "", "api_key": None, "secret": True}),
        json.dumps({"password_hint": "first dog", "passport": "valid"}),
        '{"a": "\\u0041\\u00e9", "token_limit": 7}',
        json.dumps(["docker", "run", "-p", "8080:80", "nginx"]),
    ],
)
def test_json_with_nothing_to_redact_is_returned_byte_for_byte(text: str) -> None:
    assert redact(text) == Redaction(text, 0)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@given(
    _json_values,
    st.sampled_from(["password", "api_key", "client_secret", "auth_token"]),
    st.integers(0, 3),
)
def test_a_secret_planted_anywhere_in_json_is_removed_at_any_encoding_depth(
    document: object, key: str, depth: int
) -> None:
    planted = {"data": document, "inner": {key: "Pl4nted-S3cret"}}
    text = json.dumps(planted)
    for _ in range(depth):
        text = json.dumps(text)
    result = redact(text)
    assert "Pl4nted-S3cret" not in result.text and result.count >= 1
    decoded = json.loads(result.text)
    for _ in range(depth):
        decoded = json.loads(decoded)
    assert decoded["inner"] == {key: REDACTED}
    assert redact(result.text).count == 0


@pytest.mark.parametrize("backslashes", [0, 1, 3, 7])
def test_escaped_quotes_in_text_that_is_not_json_at_any_depth(backslashes: int) -> None:
    q = "\\" * backslashes + '"'
    text = f"log line: {q}password{q}: {q}hunter2{q}, {q}user{q}: {q}bob{q} (truncated"
    result = redact(text)
    assert "hunter2" not in result.text and result.count == 1
    assert result.text == text.replace("hunter2", REDACTED)
    # an escaped quote inside the value does not end it early
    inner = "\\" * (2 * backslashes + 1) + '"'
    tricky = f"x {q}password{q}: {q}pa{inner}ss99{q} y"
    assert "ss99" not in redact(tricky).text


# -- private keys, whole ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        _PEM,
        f"here is my key:\n{_PEM}that is all",
        _PEM.replace("\n", "\\n"),
        _PEM.replace("\n", "\\\\n"),
        _PEM.replace("\n", "\r\n"),
        '{"key": "' + _PEM.replace("\n", "\\n") + '" ,} broken json',
        _PEM.split("-----END")[0],
        _PEM.split("-----END")[0].replace("\n", "\\n"),
        _PEM.replace("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY"),
        _PEM.replace("RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY"),
        _PEM.replace("RSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK").replace(
            "-----\n", "-----\nVersion: GnuPG v2\n\n", 1
        ),
        _PEM.replace(
            "RSA PRIVATE KEY-----\n",
            "RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00FF\n\n",
            1,
        ),
    ],
)
def test_a_private_key_block_is_redacted_whole(text: str) -> None:
    result = redact(text)
    assert _PEM_BODY not in result.text and "Q2xlYW5Db2RlMTIzNDU2" not in result.text
    assert "-----END" not in result.text and "BEGIN" not in result.text
    assert redact(result.text).count == 0


def test_the_text_after_a_private_key_stays() -> None:
    result = redact(f"key:\n{_PEM}that is all, thanks")
    assert result.text == "key:\n[REDACTED]\nthat is all, thanks"
    assert result.kinds == ("private_key",) and result.count == 1


# -- token formats: each with a positive and a look-alike ----------------------------------
#: (kind, a token of that format, a look-alike that must stay)
TOKENS = [
    (
        "huggingface_token",
        "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH",
        "hf_hub_download and hf_token_path",
    ),
    (
        "huggingface_token",
        "api_org_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH",
        "api_org_name = 'acme'",
    ),
    ("gitlab_token", "glpat-" + "A1b2C3d4E5f6G7h8I9j0", "glpat- is the GitLab prefix"),
    ("npm_token", "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm_config_cache=/tmp"),
    ("pypi_token", "pypi-AgEIcHlwaS5vcmc" + "Q2xlYW5Db2RlUGxlYXNl" * 3, "pypi-simple index"),
    ("anthropic_key", "sk-ant-api03-" + "a1B2" * 23 + "aAA", "sk-ant is a prefix"),
    ("openai_key", "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2", "sk-learn"),
    ("twilio_key", "SK" + "0123456789abcdef" * 2, "SKU 0123456789"),
    (
        "sendgrid_key",
        "SG." + "a1B2c3D4e5F6g7H8i9J0k1" + "." + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V",
        "SG.com",
    ),
    ("digitalocean_token", "dop_v1_" + "0a1b2c3d" * 8, "dop_v1_ prefix"),
    ("shopify_token", "shpat_" + "0a1b2c3d" * 4, "shpat_ prefix"),
    ("azure_client_secret", "abc8Q~" + "Xy1_Zz2.Ww3~Vv4-Uu5Tt6Ss7Rr8Qq9Pp", "8Q~ is odd"),
    ("databricks_token", "dapi" + "0a1b2c3d" * 4, "dapi is a prefix"),
    ("google_oauth", "ya29.a0AfH6SMBx3" + "Q2xlYW5Db2Rl", "ya29. prefix"),
    ("google_oauth", "GOCSPX-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4", "GOCSPX- prefix"),
    (
        "slack_token",
        "https://hooks.slack.com/services/T000/B000/" + "XXXXXXXXXXXXXXXXXXXXXXXX",
        "hooks.slack.com",
    ),
    ("stripe_key", "whsec_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4", "whsec_ prefix"),
    (
        "telegram_bot_token",
        "123456789:AA" + "b1C2d3E4f5G6h7I8j9K0l1M2n3O4p5Q6r",
        "at 12:30 AA meeting",
    ),
    ("aws_access_key_id", "ASIA" + "Q2XLYW5DB2RLUGXL", "ASIA is a continent"),
    ("saas_token", "lin_api_" + "a1B2c3D4e5" * 4, "lin_api_ prefix"),
    ("vault_token", "hvs." + "a1B2c3D4e5" * 10, "hvs. prefix"),
    ("grafana_token", "glsa_" + "a1B2c3D4" * 4 + "_0a1b2c3d", "glsa_ prefix"),
]


@pytest.mark.parametrize("kind, token, look_alike", TOKENS)
def test_token_formats_are_caught_and_their_look_alikes_kept(
    kind: str, token: str, look_alike: str
) -> None:
    result = redact(f"use {token} here")
    assert token not in result.text and kind in result.kinds, result
    # in escaped JSON text too (a \n before the token)
    escaped = redact(f'{{"log": "line\\n{token}\\nend"')
    assert token not in escaped.text
    assert redact(look_alike) == Redaction(look_alike, 0)


def test_kinds_name_every_secret_removed_in_rule_order() -> None:
    text = "pw: hunter2, token ghp_1234567890abcdefghijklmnopqrstuvwxyz and AKIAIOSFODNN7EXAMPLE"
    result = redact(text)
    assert result.count == 3
    assert result.kinds == ("aws_access_key_id", "github_token", "secret_prose")


# -- personal data (off by default) --------------------------------------------------------
#: (kind, text with the value, the value, a look-alike that must stay with PII on)
PII = [
    (
        "email",
        "mail bob.smith@example.org today",
        "bob.smith@example.org",
        "clone git@github.com:o/r.git",
    ),
    ("phone", "call +44 20 7946 0958 now", "7946 0958", "version 1.2.3 on 2024-05-08"),
    ("phone", "call (415) 555-0132", "555-0132", "room 4242, floor 3"),
    (
        "iban",
        "pay DE89 3704 0044 0532 0130 00 THANKS",
        "3704 0044 0532",
        "pay DE88 3704 0044 0532 0130 00",
    ),
    ("iban", "GB82WEST12345698765432", "GB82WEST12345698765432", "GB83WEST12345698765432"),
    ("us_ssn", "ssn 123-45-6789", "123-45-6789", "part 000-12-3456"),
    ("br_cpf", "CPF 529.982.247-25", "529.982.247-25", "CPF 529.982.247-26"),
    ("br_cpf", "cpf: 52998224725", "52998224725", "cpf: 52998224726"),
    ("es_dni", "DNI 12345678Z", "12345678Z", "DNI 12345678A"),
    ("es_dni", "NIE X1234567L", "X1234567L", "NIE X1234567A"),
]


@pytest.mark.parametrize("kind, text, value, look_alike", PII)
def test_personal_data_is_redacted_only_when_asked(
    kind: str, text: str, value: str, look_alike: str
) -> None:
    assert value in redact(text).text  # off by default
    result = redact(text, pii=True)
    assert value not in result.text and kind in result.kinds, result
    assert redact(look_alike, pii=True) == Redaction(look_alike, 0)


def test_card_numbers_stay_on_by_default() -> None:
    assert redact("card 4111 1111 1111 1111").kinds == ("payment_card",)


def test_redact_pii_setting(store_path: str) -> None:
    with pytest.raises(InvalidInput, match="redact_pii must be True or False"):
        Settings(redact_pii="yes")  # type: ignore[arg-type]
    with Memory(store_path, embedder="hash") as mem:
        assert mem.add_event("s", "user", "mail bob@example.org").content == "mail bob@example.org"
        mem.configure(redact_pii=True)
        assert mem.add_event("s", "user", "mail bob@example.org").content == "mail [REDACTED]"
    with Memory(store_path, embedder="hash", settings=Settings(redact_pii=True)) as mem:
        assert mem.redactor is not None
        assert mem.add_event("s", "user", "call 555-123-4567").content == "call [REDACTED]"


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


def test_chpasswd_keeps_the_user_name() -> None:
    assert redact('echo "bob:Chp4ss!" | chpasswd').text == 'echo "bob:[REDACTED]" | chpasswd'
