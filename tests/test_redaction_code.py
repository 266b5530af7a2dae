"""Code that names a secret is stored as written; a secret written in code is not.

Agents paste code far more often than they paste secrets, and code names its
secrets everywhere (``password = getpass()``, ``token: str``, ``f(token=token)``).
Before ``nbmemory.redaction.code``, 4,889 of 59,570 paragraphs of Python's standard
library and this project's dependencies that mention a password or a token were
changed by redaction, most into broken code (``api_key = [REDACTED]"API_KEY"]``).
"""

from __future__ import annotations

import pytest

from nbmemory.redaction import redact

#: Code that names a secret without holding one: stored byte for byte.
CODE_LOOK_ALIKES = [
    # calls, indexes and attributes
    "password = getpass()",
    "password = getpass.getpass('Password: ')",
    'api_key = os.environ["API_KEY"]',
    "client = OpenAI(api_key=os.getenv('OPENAI_API_KEY'))",
    "password = request.form['password']",
    'token = request.headers.get("Authorization")',
    "access_token = response.json()['access_token']",
    "conn = connect(password=settings.DB_PASSWORD)",
    "app = Flask(__name__, secret_key=settings.SECRET_KEY)",
    "const token = req.headers.authorization;",
    'let password = env::var("DB_PASSWORD")?;',
    "secret = secrets.token_hex(32)",
    "password = hash_password(raw_password)",
    "password = bytes(memoryview(password))",
    'authorization = self._get_param("authorization")',
    "auth_token=self.auth_token",
    # a command's output, optional chaining, a relative path (third probe, 2026-12-07)
    "export PGPASSWORD=$(cat /run/secrets/db_password)",
    "TOKEN=$(vault read -field=token secret/x)",
    "password = $(pass show db)",
    'password="$(openssl rand -hex 16)"',
    "const token = req.headers.authorization?.split(' ')[1];",
    "user.set_password(form.cleaned_data['password'])",
    "kubectl create secret generic db --from-file=password=./pw.txt",
    # types, literals and keywords
    "password: str = Field(..., min_length=8)",
    "    api_key: str",
    "    api_key: Optional[str] = None",
    "def login(username: str, password: str) -> bool:",
    "def f(self, username: str, password: str) -> None: ...",
    "  password: string;",
    "token: bool | str | None = None",
    "    token: TokenOpt = None,",
    "def feed(self, token: Token, test_newline=True):",
    "password = None  # set later",
    "token: null",
    "{'api_key': None, 'timeout': 30}",
    "require_password: true",
    "if not api_key: raise ValueError('missing api key')",
    "const token = await getToken();",
    "self.passwd = {}",
    # variables that name a secret
    "login(user=user, password=password)",
    'payload = {"username": username, "password": password}',
    "self.api_key = api_key",
    "self.token = token",
    "password = hashed_password",
    "if password == confirm_password:",
    "    api.whoami(token=token)['name']",
    "f(a, token=token\n)",
    "x = {username: str, password: str}",
    # placeholders, names and paths
    "password: ${DB_PASSWORD}",
    "DB_PASSWORD=${DB_PASSWORD}",
    "password=$DB_PASS",
    "password: <your-password-here>",
    "Password: ********",
    'password: "{{ vault_db_password }}"',
    "DB_PASSWORD: ${{ secrets.DB_PASSWORD }}",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    'token = f"{prefix}-{suffix}"',
    'LAST_TOKEN = "LAST_TOKEN"',
    'X_ACCESS_TOKEN = "X-Access-Token"',
    'ACCESS_KEY = "AWS_ACCESS_KEY_ID"',
    "password: /run/secrets/db_password",
    "credentials: ~/.aws/credentials",
    "fetch(url, { credentials: 'include' })",
    "fetch(url, { method: 'POST', credentials: 'same-origin' })",
    'curl -u "$USER:$PASS" https://api.example.com',
    # prompts, comparisons with words, docstrings
    'password = getpass("%s@%s\'s password: " % (user, host))',
    'print("Token: " + repr(tt))',
    'if token == "async":',
    "elif token == '.':",
    ":param password: The plaintext password.",
    "    token: The mismatched token",
    "password (bool, optional): Enable password input. Defaults to False.",
    "token: see above",
    "b64encode(b':'.join((username, password))).strip()",
    "req = HTTPBasicAuth(username, password)(req)",
    "if authorization:\n    scheme, creds = authorization.split()",
    "borrowing a token\n    :raises WouldBlock: if there is none",
    # a float's digits are not a card number
    "7.650769827887418e-01 + 5.195412242095543e-01j",
]

#: Secrets written in code: (text, secret).
CODE_SECRETS = [
    ('password = "hunter2xyz"', "hunter2xyz"),
    ('password = b"hunter2xyz"', "hunter2xyz"),  # a bytes literal (was: the "b" only)
    ("api_key=u'abcdef123456'", "abcdef123456"),
    ("token = r'ghx_abc123def456'", "ghx_abc123def456"),
    ('if password == "Hunter2xyz":', "Hunter2xyz"),
    ("spring.datasource.password=hunter2", "hunter2"),
    ("DB_PASSWORD=password", "=password"),
    ("PASSWORD=secret", "=secret"),
    ("password: hunter2", "hunter2"),
    ("token: ab12cd34ef", "ab12cd34ef"),
    ("{password: hunter2, user: bob}", "hunter2"),
    ("password = Sunshine", "Sunshine"),
    ("password: Sunshine", "Sunshine"),
    ("SESSION_TOKEN=abc.def.ghi.jkl", "abc.def.ghi.jkl"),
    ("SECRET_KEY=django-insecure-x8k2p", "django-insecure-x8k2p"),
    ("curl -u bob:hunter2xyz https://x", "hunter2xyz"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("pwd = 'Tr0ub4dor&3'", "Tr0ub4dor&3"),
    ("user: bob pass: hunter2xyz", "hunter2xyz"),
    ("creds: admin / hunter2xyz", "hunter2xyz"),
    ("card 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"),
    # "&name=" ends a value after "=" only (a query string), not inside a password
    ("password: Tr0ub&dor=3", "&dor=3"),
    ("the password is A&A=", "A&A="),
    ("user=bob&password=x12&ssl=true", "x12"),
]


@pytest.mark.parametrize("text", CODE_LOOK_ALIKES)
def test_code_that_names_a_secret_is_stored_as_written(text: str) -> None:
    result = redact(text)
    assert result.text == text and result.count == 0, result.text


@pytest.mark.parametrize("text, secret", CODE_SECRETS)
def test_a_secret_written_in_code_is_still_redacted(text: str, secret: str) -> None:
    result = redact(text)
    assert secret not in result.text and result.count >= 1, result.text
