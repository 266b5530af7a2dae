"""The facts, questions and prose the generated technical chat is made of (``tech-chat``).

A :class:`FactKind` is one thing a project decides (a port, a database, who
reviews migrations): the values it may take, sentences that state it, questions
that ask for it *in other words* (so that a keyword match alone does not find
it), and, for kinds that change, sentences that correct it and questions about
the value now and the value first chosen.  :mod:`.tech_chat` picks kinds,
values and sentences with a seeded generator.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FactKind:
    """One kind of fact: values, statements, questions, and how it is corrected."""

    key: str
    values: tuple[str, ...]
    statements: tuple[str, ...]  # {v} the value, {service} the project's service
    questions: tuple[str, ...]
    corrections: tuple[str, ...] = ()  # {v} the new value, {old} the one it replaces
    now_questions: tuple[str, ...] = ()
    first_questions: tuple[str, ...] = ()


KINDS: tuple[FactKind, ...] = (
    FactKind(
        "port",
        ("8080", "8443", "9090", "5000", "7001", "3000", "8000", "9443"),
        (
            "{service} listens on port {v} now that the sidecar owns the old one.",
            "I bound {service} to {v}; nothing else on the host uses that number.",
        ),
        (
            "Which port number did we give {service}?",
            "On what port can I reach {service} on the host?",
        ),
        (
            "Change of plan for {service}: it moves from {old} to port {v}, the load "
            "balancer only forwards that one.",
            "Ops reassigned the listener: {service} is now served on {v} instead of {old}.",
        ),
        ("What port is {service} on after the change?", "Where does {service} listen these days?"),
        ("Which port did {service} use before it was moved?",),
    ),
    FactKind(
        "database",
        ("PostgreSQL 16", "MySQL 8", "SQLite", "CockroachDB", "MariaDB 11"),
        (
            "For storage we settled on {v}: it is what the hosting team already backs up.",
            "Records will live in {v}, decided after comparing the migration tooling.",
        ),
        (
            "Which database engine keeps the records of {service}?",
            "What did we pick to persist data in?",
        ),
        (
            "We are switching the datastore from {old} to {v}; the licence review ruled the old one out.",
        ),
        ("Which database are we on after the switch?",),
        ("Which datastore did we choose at the very beginning?",),
    ),
    FactKind(
        "ci",
        ("GitHub Actions", "GitLab CI", "Buildkite", "Jenkins", "CircleCI"),
        (
            "Builds and tests run on {v}, one workflow per pull request.",
            "I wired the pipeline into {v} so every push gets the full test matrix.",
        ),
        (
            "What service runs our automated builds?",
            "Where do the checks for each pull request execute?",
        ),
        ("The pipeline is moving off {old}: from Monday everything runs on {v}.",),
        ("Which CI system do we use since the migration?",),
        ("Which CI system did we start with?",),
    ),
    FactKind(
        "timeout",
        ("15 seconds", "30 seconds", "45 seconds", "90 seconds", "2 minutes"),
        (
            "Calls to the upstream API give up after {v}; beyond that the client reports a 504.",
            "I set the upstream deadline to {v} so a stuck partner cannot hold a worker.",
        ),
        (
            "How long do we wait for the partner's API before giving up?",
            "After how much time is a hanging partner request abandoned?",
        ),
        ("Raise the upstream limit: the partner asked us to wait {v} instead of {old}.",),
        ("How long do we wait on partner calls since they asked for a change?",),
        ("What was the original wait before a partner call is abandoned?",),
    ),
    FactKind(
        "retries",
        ("3", "4", "5", "6", "8"),
        (
            "Failed jobs get {v} attempts with exponential backoff before they land in the "
            "dead-letter queue.",
        ),
        ("How many times is a failing job tried before it is parked?",),
        ("Bump the job attempts from {old} to {v}; the flaky mail provider needs more tries.",),
        ("How many tries does a failing job get after the bump?",),
        ("How many tries did a failing job get at first?",),
    ),
    FactKind(
        "deploy",
        (
            "Kubernetes on GKE",
            "Fly.io",
            "a single Hetzner VM",
            "AWS ECS Fargate",
            "Nomad on bare metal",
        ),
        ("Production runs on {v}; staging mirrors it with smaller instances.",),
        ("Where is the production environment hosted?", "What platform serves our live traffic?"),
        ("Infra decided: we leave {old} and deploy to {v} from the next sprint.",),
        ("Where will live traffic be served after the infra decision?",),
        ("Where was production hosted originally?",),
    ),
    FactKind(
        "cache_ttl",
        ("5 minutes", "10 minutes", "15 minutes", "1 hour", "24 hours"),
        ("Cached responses expire after {v}, short enough for price changes to show up.",),
        ("How long does an entry stay in the response cache?",),
        ("Shorter cache lifetime please: entries now expire after {v}, not {old}.",),
        ("How long do cached entries live now?",),
        ("What was the first lifetime of cached entries?",),
    ),
    FactKind(
        "log_format",
        ("JSON lines", "logfmt", "plain text with ISO timestamps"),
        ("You asked for {v} output, so the logger writes {v} everywhere, workers included.",),
        ("In what format do our services write their logs?",),
    ),
    FactKind(
        "branch",
        ("feature/<ticket>-<slug>", "<initials>/<topic>", "ticket-<number>"),
        ("Branches follow the {v} pattern you prefer; the hook rejects anything else.",),
        ("How should I name a new branch?",),
    ),
    FactKind(
        "reviewer",
        ("Priya", "Tomás", "Mei", "Jonas", "Amara", "Lukas"),
        ("{v} has to approve anything that touches the migrations folder.",),
        ("Who signs off on schema changes?",),
        ("{old} is on leave, so {v} approves migrations from now on.",),
        ("Who approves migrations at the moment?",),
        ("Who was first in charge of approving migrations?",),
    ),
    FactKind(
        "root_cause",
        ("billing", "scheduler", "ingest", "gateway", "reports", "sync"),
        (
            "The memory growth came from an unbounded LRU in the {v} module; capping it "
            "fixed the leak.",
        ),
        ("What was behind the leak we chased?", "Which part of the code kept the process growing?"),
    ),
    FactKind(
        "upload_limit",
        ("10 MB", "25 MB", "50 MB", "100 MB"),
        ("Uploads above {v} are rejected at the proxy with a 413.",),
        ("What is the largest file a user can send us?",),
        ("Product wants bigger files: the upload cap goes from {old} to {v}.",),
        ("How big may an uploaded file be since product's request?",),
        ("What was the size cap on uploaded files before product asked?",),
    ),
    FactKind(
        "rate_limit",
        ("100 requests per minute", "20 requests per second", "600 requests per hour"),
        ("Each API key is throttled to {v}; the counter lives in Redis.",),
        ("How much traffic may a single client key generate?",),
        ("Throttling changes: keys get {v} instead of {old}.",),
        ("What is a client key allowed after the throttling change?",),
        ("How much could one client key send originally?",),
    ),
    FactKind(
        "release_day",
        (
            "Tuesday mornings",
            "Thursday afternoons",
            "every other Wednesday",
            "Monday after standup",
        ),
        ("Releases go out on {v}, never on Fridays.",),
        ("When do we ship to production?", "On which day do new versions usually go live?"),
        ("Moving the release slot from {old} to {v} so QA has a full day.",),
        ("When do new versions go live now that QA needed more time?",),
        ("When did we ship before the slot moved?",),
    ),
    FactKind(
        "runtime",
        ("Python 3.11", "Python 3.12", "Node 20", "Go 1.22", "Java 21"),
        ("The service targets {v}; the Dockerfile pins the same base image.",),
        ("Which language runtime version do we build against?",),
    ),
    FactKind(
        "test_style",
        (
            "pytest with fixtures, no unittest classes",
            "table-driven tests",
            "property-based tests with Hypothesis",
        ),
        ("As you prefer, new tests are {v}.",),
        ("What style of tests do I like you to write?",),
    ),
    FactKind(
        "secrets",
        ("HashiCorp Vault", "AWS Secrets Manager", "SOPS-encrypted files", "1Password Connect"),
        ("Credentials come from {v}; nothing secret goes into environment files.",),
        ("Where do we keep API keys and passwords?",),
        ("Security review outcome: secrets move from {old} to {v}.",),
        ("Where are credentials kept after the security review?",),
        ("Where did credentials come from before the security review?",),
    ),
    FactKind(
        "queue",
        ("RabbitMQ", "Kafka", "Redis streams", "SQS", "NATS JetStream"),
        ("Background work is handed over through {v}, one topic per job type.",),
        ("What message broker carries the background jobs?",),
        ("We replace {old} with {v} for the job queue; ops supports it better.",),
        ("What broker carries background work after the replacement?",),
        ("What broker did background work go through at first?",),
    ),
    FactKind(
        "coverage",
        ("80%", "85%", "90%"),
        ("The build fails below {v} line coverage, your rule for this repository.",),
        ("What test coverage must a change keep?",),
    ),
)

#: Paragraphs of an assistant's answer that state no fact: {module}, {module2},
#: {ident}, {ident2}, {noun}, {n}, {ms}, {ms2} are filled in.
FILLER = (
    "I traced the {noun} path through `{ident}` in the {module} package. The call fans out "
    "to {n} helpers, and two of them re-read the same {noun} from the database, which "
    "explains most of the latency you saw in the traces.",
    "Before changing anything I ran the existing suite to have a baseline; {n} tests touch "
    "{module} and all of them passed on main, so the failures below are new.",
    "One thing to keep in mind: `{ident}` is also called from the {module2} worker, so a "
    "change to its signature needs a matching change there. I kept the old keyword "
    "arguments as aliases for one release.",
    "Options I considered: batch the {noun} writes, move `{ident}` behind the cache, or "
    "leave it and add workers. I went with batching: it is the only one that reduces the "
    "load instead of hiding it.",
    "I also renamed `{ident}` to `{ident2}` so the name says what it does; the old name "
    "stays as a deprecated alias until the next minor version.",
    "The migration is reversible: the down step drops the new column and restores the index "
    "on {noun}_id. I tried both directions against a copy of staging.",
    "Next steps, if you agree: split the {module} changes into their own pull request, add "
    "a regression test for the empty {noun} case, and update the runbook.",
    "Timings after the change, over {n}0 runs on my machine: p50 {ms} ms, p95 {ms2} ms, "
    "down from roughly twice that before.",
    "I did not touch the {module2} client. It has its own retry loop, and changing both at "
    "once would make it hard to tell which fix helped.",
    "For the record, the error only shows up when two {noun}s arrive within the same "
    "millisecond: the ordering key is not unique then, and the second insert loses.",
    "I added a section to docs/{module}.md describing the new flag and its default, with a "
    "short example, and linked it from the changelog.",
    "The type checker complained about `{ident}` returning None in one branch; I made the "
    "empty case explicit rather than silencing the warning.",
    "Rollout: ship it behind a flag, enable it for internal accounts for a day, then for "
    "everyone if the error rate stays flat on the {module} dashboard.",
    "I looked at upgrading the {module} dependency while I was there; its changelog lists a "
    "breaking change in how {noun}s are serialised, so I left it pinned and opened a ticket.",
    "The flaky test was order-dependent: it relied on a {noun} created by another test. It "
    "now builds its own fixture and passed {n}0 times in a row.",
    "Profiling shows {n} percent of the time in JSON encoding of {noun}s; switching the "
    "encoder would help, but it is a bigger change than this fix needs.",
)

#: Sentences that introduce a pasted block, by the block's kind (.blocks.KINDS).
BLOCK_INTROS = {
    "python": ("Here is the relevant part of the change:", "For reference, the current version:"),
    "log": ("Logs from the failing worker, trimmed:", "What the service printed around it:"),
    "shell": ("This is what I ran to check it:", "The output of the run:"),
}

#: An answer's first paragraph when it does not open with a fact.
OPENINGS = (
    "Sure, here is what I found.",
    "Good question. Short version first, details below.",
    "I dug into this today; summary and details follow.",
    "Done, with a couple of caveats.",
)

#: An answer's last paragraph when it does not end with a fact.
CLOSINGS = (
    "Let me know if you want me to open the pull request.",
    "Happy to walk through any of it in more detail.",
    "I will keep an eye on the dashboard tomorrow morning.",
    "Tell me if any of this conflicts with what the team decided.",
)

#: What the user asks ({module}, {module2}, {ident}, {noun} filled in).
USER_ASKS = (
    "Can you look into why {module} is slow when it processes large {noun}s? People "
    "started complaining this morning.",
    "The nightly job failed again. Can you figure out what happened in {module}?",
    "I want to refactor `{ident}`, it does too much. What would you suggest?",
    "Could you write tests for the {module} retry logic?",
    "Quick one: review the open pull request on {module} before lunch?",
    "Let's plan the next release. What is left to do on {module}?",
    "Something is off with the {noun} counts on the {module} dashboard, they doubled overnight.",
    "Can you explain how `{ident}` and the {module2} worker interact?",
    "We need an endpoint that exports {noun}s as CSV. Can you sketch it?",
    "Is there a cheap way to make the {module} startup faster?",
)

#: How a user message carrying a correction starts and ends.
USER_CORRECTION = (
    "Heads-up: {c} Please keep that in mind.",
    "FYI, {c}",
    "One update before we go on. {c}",
)
