"""Secrets in the forms a probe of 248 typed secrets found missed (2026-12-07; its
second run the same day: PuTTY keys, Kubernetes Secrets, Oracle connect strings …),
and the look-alikes beside each form that stay as written; ``tests/test_redaction.py``
checks them with the prose and command-line forms."""

from __future__ import annotations

#: (text, secret): each was stored as given before.
SECRETS = [
    # markup
    (
        "<server><id>nexus</id><username>deploy</username><password>M4venPwd!</password></server>",
        "M4venPwd!",
    ),
    ('<appSettings><add key="DbPassword" value="XmlAttrPwd1"/></appSettings>', "XmlAttrPwd1"),
    ('<property name="token" value="abc123def"/>', "abc123def"),
    # set by name in code
    ('os.environ["OPENAI_API_KEY"] = "c0ffee1234deadbeef5678"', "c0ffee1234deadbeef5678"),
    ("app.config['SECRET_KEY'] = 'FlaskS3cretKey!'", "FlaskS3cretKey!"),
    ('os.environ.setdefault("DB_PASSWORD", "EnvDefPwd1")', "EnvDefPwd1"),
    ("define('DB_PASSWORD', 'WpDbPwd!9');", "WpDbPwd!9"),
    ("localStorage.setItem('token', 'jwt_abc123');", "jwt_abc123"),
    # camelCase keys
    ("const dbPassword = 'JsDbPwd!1';", "JsDbPwd!1"),
    ("{ adminPassword: 'AdmCamel#2', port: 5432 }", "AdmCamel#2"),
    ('{"userName": "svc", "userPassword": "JsonCamel9"}', "JsonCamel9"),
    ("java -Djavax.net.ssl.keyStorePassword=JksPwd!3 -jar app.jar", "JksPwd!3"),
    ('apiKey: "abc123def456"', "abc123def456"),
    # SQL
    ("CREATE ROLE reporter LOGIN PASSWORD 'R3port!ng';", "R3port!ng"),
    ("sudo -u postgres psql -c \"ALTER USER app WITH PASSWORD 'AltPgPwd!9';\"", "AltPgPwd!9"),
    ("mysql -e \"CREATE USER 'app'@'%' IDENTIFIED BY 'MyS3cretApp!';\"", "MyS3cretApp!"),
    ("mysqladmin -u root password 'NewR00t!'", "NewR00t!"),
    # command lines
    ("echo 'Sudo!Pass99' | sudo -S apt-get update", "Sudo!Pass99"),
    ("echo Sudo2Pass | sudo -S systemctl restart nginx", "Sudo2Pass"),
    ('{"command": "echo \'T00lSudo!\' | sudo -S apt install -y jq"}', "T00lSudo!"),
    ('echo "bob:Chp4ss!" | chpasswd', "Chp4ss!"),
    ("ssh-keygen -t ed25519 -N 'KeyGenPass!' -f ~/.ssh/id_deploy", "KeyGenPass!"),
    ("gpg --batch --passphrase 'GpgPhrase#1' -d secrets.gpg", "GpgPhrase#1"),
    ("keytool -genkey -keystore ks.jks -storepass KeyStorePwd1 -keypass KeyPwd22", "KeyPwd22"),
    ("keytool -genkey -keystore ks.jks -storepass KeyStorePwd1", "KeyStorePwd1"),
    ("gh secret set NPM_TOKEN --body 7a1b2c3d4e5f60718293a4b5c6d7e8f9", "7a1b2c3d4e5f6071"),
    ("net use Z: \\\\fileserver\\share /user:CORP\\jdoe W1nd0wsPwd!", "W1nd0wsPwd!"),
    ("x11vnc -passwd VncPwd!8 -display :0", "VncPwd!8"),
    ("pscp -pw PuTTYPwd9 file.txt user@host:/tmp", "PuTTYPwd9"),
    ("openssl enc -aes-256-cbc -k 'S3cretK3y' -in f", "S3cretK3y"),
    # prose
    ("my api key: 4e5f6a7b8c9d0e1f2a3b4c5d", "4e5f6a7b8c9d0e1f2a3b4c5d"),
    ("API Key: 7d3f9a1c5e8b2d4f6a0c", "7d3f9a1c5e8b2d4f6a0c"),
    ("Secret Access Key: Pm1On2Lk3Ji4Hg5Fe6Dc7Ba8Zy9Xw0Vu1Ts2Rq3", "Pm1On2Lk3Ji4Hg5Fe6"),
    ("Logged in successfully as admin with password 'Adm1nLog!n'", "Adm1nLog!n"),
    ("the staging password is the same as prod: Gr33nT3a#88", "Gr33nT3a#88"),
    ("the password for staging is the same as prod: Winter2024!", "Winter2024!"),
    ("just use the same password as staging: Tigger#2023", "Tigger#2023"),
    ("sudo password is the usual one: rootroot99", "rootroot99"),
    ("The new password for jdoe@corp.com is Welcome1!", "Welcome1!"),
    # cookies, signed URLs, a bot's URL
    ("Cookie: sessionid=k2j3h4g5f6d7s8a9q1w2; csrftoken=Zx9Cv8Bn7Mm6", "k2j3h4g5f6d7s8a9q1w2"),
    ("Cookie: sessionid=k2j3h4g5f6d7s8a9q1w2; csrftoken=Zx9Cv8Bn7Mm6", "Zx9Cv8Bn7Mm6"),
    ("Set-Cookie: connect.sid=s%3AQk9Lp2Zx7Vb4Nm1.Wq3Er; Path=/; HttpOnly", "s%3AQk9Lp2Zx7Vb4Nm1"),
    ("curl 'https://x.com/api' -H 'Cookie: session=abcdef123456789'", "abcdef123456789"),
    ('curl -b "sid=abcdef1234567890" https://x.com', "abcdef1234567890"),
    (
        "https://acme.blob.core.windows.net/b/db.bak?sv=2022-11-02&sp=rwl&sig=Qx7%2Bk9LmN3pR5tV8wY1z",
        "Qx7%2Bk9LmN3pR5tV8wY1z",
    ),
    (
        "https://s3.amazonaws.com/b/k?X-Amz-Algorithm=AWS4&X-Amz-Signature=0a1b2c3d4e5f60718293a4b5",
        "0a1b2c3d4e5f60718293a4b5",
    ),
    (
        "curl https://api.telegram.org/bot7123456789:AAHk9Zx2Lm7Np4Qr1St8Uv3Wx6Yz0Ab5Cd2/getMe",
        "AAHk9Zx2Lm7Np4Qr1St8Uv3Wx6Yz0Ab5Cd2",
    ),
    # a user and a password given to a call
    ('requests.get(url, auth=("admin", "ReqAuthPwd1"))', "ReqAuthPwd1"),
    ('HTTPBasicAuth("admin", "BasicAuthPwd2")', "BasicAuthPwd2"),
    ('server.login("me@example.com", "SmtpAppPwd1")', "SmtpAppPwd1"),
    ('keyring.set_password("svc", "bob", "KeyringPwd1")', "KeyringPwd1"),
    ("define( 'AUTH_KEY', 'f8#Kq2!mZ9@xL4$pW7^vN1&bR6*tY3' );", "f8#Kq2!mZ9"),
    # files that hold credentials
    ("db.internal:5432:appdb:appuser:PgpassPwd#1", "PgpassPwd#1"),
    ("*:*:*:postgres:PgpassStar2", "PgpassStar2"),
    ("//npm.corp.example.com/:_authToken=5f1a9c3e-7b2d-4e8f-a6c1-9d3b7e5f2a8c", "5f1a9c3e-7b2d"),
    ("registry=https://npm.corp.example.com/\n_auth=ZGVwbG95Ok5wbUF1dGhQd2Q=", "ZGVwbG95Ok5w"),
    ("2FA backup codes: 8372-1947, 5520-3381, 9014-6627, 3378-2290", "5520-3381"),
    ("GitHub recovery codes:\na8f3k-29d7x\nb7x1m-4q8zz\nc2z9p-6w3rr", "b7x1m-4q8zz"),
    (
        "access key AKIAIOSFODNN7EXAMPLE secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    (
        "jdoe,AKIA1B2C3D4E5F6G7H8J,Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3a,https://x.example",
        "Ab1Cd2Ef3Gh4Ij5Kl6Mn7",
    ),
    (
        "client.run('MTA5ODc2NTQzMjEwOTg3NjU0Mw.GhIjKl.aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789ab')",
        "aBcDeFgHiJkLmNoPqRsTuVwXyZ",
    ),
    # Portuguese and Spanish, more forms
    ("a senha nova é Verao2024!", "Verao2024!"),
    ("contraseña del servidor: Serv!dor99", "Serv!dor99"),
    ("A senha do servidor de produção é a mesma de staging: Pr0d!Senha", "Pr0d!Senha"),
    ("o pin do cartão é 4471", "4471"),
    ("o token de acesso é abc123XYZ789def", "abc123XYZ789def"),
    # seed phrases
    (
        "my metamask recovery phrase is: witch collapse practice feed shame open despair "
        "creek road again ice least",
        "witch collapse practice",
    ),
    (
        'mnemonic = "gravity machine north sort system female filter attitude volume fold '
        'club stay"',
        "gravity machine north",
    ),
    (
        "here are my 12 words: vivid mango orbit canyon pledge swift rural eager noble "
        "tunnel frost amber",
        "vivid mango orbit",
    ),
    # the probe's second run (2026-12-07): files, manifests, connect strings and code
    (
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\n"
        "Public-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIBm1\nPrivate-Lines: 1\n"
        "AAAAIEhq8p2ZvQ0mS1fT9nJ3wXkYc6bR4uLdE7oV5gA2hPzCAAAAIQC9s\nPrivate-MAC: 4f2a",
        "AAAAIEhq8p2ZvQ0mS1fT9nJ3wXkYc6bR4uLdE7oV5gA2hPzCAAAAIQC9s",
    ),
    (
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\ndata:\n"
        "  tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n"
        "  tls.key: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUV2UUlCQURBTkJna3Foa2lHOXcw\n",
        "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUV2UUlCQURBTkJna3Foa2lHOXcw",
    ),
    (
        "kind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: "
        "eyJhdXRocyI6eyJyZWcuZXhhbXBsZS5jb20iOnsiYXV0aCI6ImRHVnpkRHBFYTNKRFptZFFkMlE9In19fQ==\n",
        "eyJhdXRocyI6eyJyZWcuZXhhbXBsZS5jb20iOnsiYXV0aCI6",
    ),
    (
        "User name,Password,Access key ID,Secret access key,Console login link\n"
        "jdoe,CsvPwd!1x,AKIA1B2C3D4E5F6G7H8J,Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3,https://x",
        "CsvPwd!1x",
    ),
    (
        "User name,Password,Access key ID,Secret access key,Console login link\n"
        "jdoe,CsvPwd!1x,AKIA1B2C3D4E5F6G7H8J,Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3,https://x",
        "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3",
    ),
    ("jdbc:oracle:thin:scott/T1ger0ra@//db:1521/ORCL", "T1ger0ra"),
    ("sqlplus system/OraSys!23@//db:1521/XEPDB1", "OraSys!23"),
    ("sqlldr userid=scott/Ld4Pwd!x control=load.ctl", "Ld4Pwd!x"),
    ("WIFI:S:HomeNet;T:WPA;P:QrW1f1Pass;;", "QrW1f1Pass"),
    ('variable "db_password" {\n  type    = string\n  default = "TfVarPwd9"\n}', "TfVarPwd9"),
    ('variable "x" {\n  sensitive = true\n  default = "TfSens1tive"\n}', "TfSens1tive"),
    ('cursor.execute("CREATE USER bob WITH PASSWORD %s", ("SqlParamPwd1",))', "SqlParamPwd1"),
    ('cur.execute("ALTER USER %s WITH PASSWORD %s", (user, "SqlParam2nd"))', "SqlParam2nd"),
    ("os.environ['STRIPE_KEY'] = 'rk_9x8c7v6b5n4m3'", "rk_9x8c7v6b5n4m3"),
    (
        '[{"id": "call_1", "type": "function", "function": {"name": "python", "arguments": '
        '"{\\"code\\": \\"import os\\\\nos.environ[\'STRIPE_KEY\'] = \'rk_9x8c7v6b5n4m3\'\\\\n\\"}"}}]',
        "rk_9x8c7v6b5n4m3",
    ),
    ("runas /user:Administrator cmd & echo RunAsPwd!1 | runas", "RunAsPwd!1"),
    # token formats
    (
        "access key AKIA4R7T1Y3U6I9O2P5A secret Lk3Jh5Gf7Ds9Aq1Wz2Ex4Cr6Vt8By0Nu2Mi4Ko6",
        "Lk3Jh5Gf7Ds9Aq1Wz2Ex4Cr6Vt8By0Nu2Mi4Ko6",
    ),
    (
        "SENTRY_DSN=https://4f9a2c7e1b8d3f6a0e5c9b2d7f1a8e3c@o123456.ingest.sentry.io/789",
        "4f9a2c7e1b8d3f6a0e5c9b2d7f1a8e3c",
    ),
    ("Mailgun key: key-3ax6xnjp29jd6fds4gc373sgvjxteol0", "3ax6xnjp29jd6fds4gc373sgvjxteol0"),
    (
        "ATLASSIAN_API_TOKEN ATATT3xFfGF0T4mQ9bZ7kL2nP5rS8vW1yC4eG7iK0mO3qU6x=1A2B3C4D",
        "ATATT3xFfGF0T4mQ9bZ7kL2nP5rS8vW1yC4eG7iK0mO3qU6x",
    ),
    (
        "https://api.telegram.org/bot123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11/sendMessage",
        "ABC-DEF1234ghIkl-zyx57W2v1u123ew11",
    ),
    # Wi-Fi, PINs and access codes
    ("Guest WiFi - SSID: CafeGuest / Key: latte4everyone", "latte4everyone"),
    ("WPA key: Mountain-Breeze-2291", "Mountain-Breeze-2291"),
    ("PIN 4921 for the card ending 8812", "4921"),
    ("gate code 4412# after 8pm", "4412"),
    ("phone passcode 482910", "482910"),
    ("OTP 552913, don't share it", "552913"),
    ("safe combination is 12-34-56", "12-34-56"),
    ("your code: 881204 (expires in 10 minutes)", "881204"),
    # prose
    ("store the token somewhere safe: 0f1e2d3c4b5a69788796a5b4c3d2e1f0", "0f1e2d3c4b5a6978"),
    ("pass for the router: R0uter#Pw", "R0uter#Pw"),
    ("I changed it to Summer2024#, the password I mean", "Summer2024#"),
    (
        "Sure! I'll use the API key you gave me (a7f3c9e1b5d24f8e) to call the endpoint.",
        "a7f3c9e1b5d24f8e",
    ),
    ("the password? it's Kangaroo#71", "Kangaroo#71"),
    ("mi clave es Clave2024!", "Clave2024!"),
    ("la clave del wifi es Gatito#2020", "Gatito#2020"),
]

#: Written beside those forms, and not secrets.
LOOK_ALIKES = [
    "12:30:45:10:20",
    "auth=(user, password)",
    'login("bob", password)',
    '{"auth": true, "x": 1}',
    "the backup codes are in the vault",
    "a senha nova é obrigatória",
    "o token é inválido",
    "o pin é obrigatório",
    "la contraseña del wifi: la misma de siempre",
    'self._xsrf_token = b"|".join(parts)',
    'token = "{}:{}".format(a, b)',
    "see www.example.com/path",
    "cookie: chocolate chip",
    "the cookie: it expires after 30 days",
    "Cookie: lang=en",
    "Cookie: name=value pairs the browser sends",
    "Set-Cookie: theme=dark; Path=/",
    'git checkout -b "feature=abcdef1234567890"',
    "the sig=on flag",
    "https://example.com/?sig=short",
    "<password>${DB_PASSWORD}</password>",
    'print("password", "is wrong")',
    "expected_keys = ['access_key', 'secret_key', 'token', 'expiry_time']",
    'argv lists (["sshpass", "-p", "…"])',
    "Load a dynamic library identified by 'name'.",
    "CREATE USER x WITH PASSWORD %s",
    "echo hello | grep h",
    'echo "$PASS" | sudo -S ls',
    "echo $TOKEN | docker login -u x --password-stdin ghcr.io",
    "ssh-keygen -t ed25519 -N '' -f k",
    "keytool -list -storepass:env KS_PASS",
    'gh pr create -b "fix"',
    "tar -N 2020-01-01 -cf x.tar .",
    "sort -k 2 file",
    "api key: see the docs",
    "the password 'required' field",
    "the 12 words are on the card",
    "the password is in the vault: vault/path/db",
    "the password is the same as before: see the wiki",
    "password as before",
    "maxTokens: 512",
    "getToken()",
    "const accessToken = await getAccessToken();",
    "return Output(items=page, nextToken=token_for_next_page)",
    "BreakpointToken = Token.Breakpoint.Enabled",
    "HttpCredentials = playwright._impl._api_structures.HttpCredentials",
    "ProcessAccessToken = 9",
    "t.lastToken=r,t.lastStyle=n",
    "def f(self, node: AstNode, first_token: util.Token, last_token: util.Token):",
    "def __init__(self, recognizer: Parser, startToken: Token = None):",
    'raise Error(f"Failed to refresh access token: {error or response.status_code}")',
    # a secret's variable reused in code, a YAML tag where the value would be
    "token = token or os.environ.get('TOKEN')",
    "password = password or ''",
    "password: !vault |",
    "password: !secret wifi_password",
    # beside the files, manifests and connect strings
    "apiVersion: v1\nkind: ConfigMap\ndata:\n  LOG_LEVEL: debug\n  DB_HOST: db.internal\n",
    "data:\n  LOG_LEVEL: debug\n  replicas: 3\n",
    "kind: SecretProviderClass\ndata:\n  objects: vault-objects\n",
    "docker pull library/nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31",
    "npm install @scope/pkg@1.2.0",
    "see acme/repo@v1.2.3 and user/group@host",
    "sqlplus / as sysdba",
    "sqlplus /nolog",
    "sqlplus @scripts/setup.sql",
    'cur.execute("ALTER USER %s WITH PASSWORD %s", ("bob", new_password))',
    'variable "region" {\n  type    = string\n  default = "us-east-1"\n}',
    "User name,Email,Role\njdoe,jdoe@example.com,admin",
    "WIFI: the office network is down again",
    "Private-Lines: see the PuTTY documentation",
    'os.environ["SORT_KEY"] = "created_at"',
    'os.environ["S3_KEY"] = "uploads/2024/report.csv"',
    'os.environ["PRIMARY_KEY"] = "user_id_2"',
    # beside the token formats
    "https://sentry.io/organizations/acme/issues/123/",
    "a key-value store",
    # beside the access codes, Wi-Fi keys and prose
    "status code 404",
    "exit code 1",
    "error code 500",
    "HTTP code 200 from the health check",
    "Windows Installer error code 1603",
    "the code is on GitHub",
    "the code 2048 is the buffer size",
    "PIN diode",
    "connect the LED to pin 13",
    "pin 2024-01-01 as the cut-off date",
    "the combination of 12-34-56 and more",
    "WPA key management is set to SAE",
    "SSID: CafeGuest",
    "the password? it's in the vault",
    "Need a password? It's free.",
    "Forgot your password? It's easy to reset.",
    "boarding pass for the flight: gate 12",
    "I set it to 30 seconds, the timeout I mean",
    "la clave del problema es que no hay tests",
    "mi clave es secreta",
    "the API key header (X-Api-Key) is required",
    "the token limit (4096) was hit",
    "the token for request (3f2b8c1e-9a4d-4e7b-b6f1-2c8d9e0a1b3c) failed",
    "secret scanning flagged commit (9fceb02d0ae598e95dc970b74767f19372d61af8)",
    "save the file somewhere safe: /tmp/out.txt",
    "copy the API key: see the dashboard",
    "log in with https://example.com/login",
]
