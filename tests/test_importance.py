"""The offline importance estimate: durable personal facts reach salience, chit-chat does not.

Also the fused score of a single hybrid hit (it was 0.0: min-max over one value).
"""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nbmemory import InvalidInput, Memory, Settings
from nbmemory.event_rows import build_row, importance_for
from nbmemory.importance import estimate_importance

SALIENT = Settings().salience_threshold
ALLERGY = "I'm vegetarian with a severe peanut allergy, so please keep that in mind."
QUERY = "Recommend a restaurant for dinner in Kyoto tonight"

#: A 32-turn trip plan: the allergy is said once, early; Kyoto comes up again and again
#: later, and several later user turns are plans (salient too, but weaker than health).
TRIP_DAY1 = [
    ("user", "Hi! We're planning a trip to Japan next month."),
    ("assistant", "How exciting! How long will you stay, and which cities interest you?"),
    ("user", ALLERGY),
    ("assistant", "Noted. Japan has more and more options for that, I'll keep it in mind."),
    ("user", "Two weeks. Tokyo first, then Kyoto and Osaka."),
    ("assistant", "A classic route. Tokyo for five days, then the shinkansen to Kyoto."),
    ("user", "Sounds good!"),
    ("assistant", "Shall I look at hotels near Tokyo station?"),
    ("user", "Yes please, something quiet."),
    ("assistant", "The Marunouchi area is calm at night and close to the trains."),
    ("user", "Great, thanks."),
    ("assistant", "Anything else for today?"),
]
TRIP_DAY2 = [
    ("user", "Good morning! We arrived in Kyoto last night."),
    ("assistant", "Welcome to Kyoto! The weather in Kyoto is lovely this week."),
    ("user", "What should we see in Kyoto first?"),
    ("assistant", "Start with Fushimi Inari in Kyoto early, before the crowds."),
    ("user", "We will visit Kinkaku-ji in the afternoon."),
    ("assistant", "Kinkaku-ji is one of the most photographed places in Kyoto."),
    ("user", "We're going to rent bikes to ride along the Kamo river."),
    ("assistant", "Kyoto is flat and easy to cycle; the Kamo river path is beautiful."),
    ("user", "I booked a tea ceremony in Kyoto for Thursday."),
    ("assistant", "Lovely, Kyoto is the home of the tea ceremony."),
    ("user", "We decided to skip Nara this time."),
    ("assistant", "Fair enough, Kyoto alone has plenty to fill the days."),
    ("user", "We'll take the train to Arashiyama tomorrow morning."),
    ("assistant", "The bamboo grove in Kyoto is best before 8am."),
    ("user", "I'm going to buy a kimono in Kyoto as a souvenir."),
    ("assistant", "Gion in Kyoto has good kimono shops."),
    ("user", "How do the buses in Kyoto work?"),
    ("assistant", "Kyoto buses have one flat fare; pay when you get off."),
    ("user", "Thanks, that's helpful."),
    ("assistant", "Enjoy Kyoto!"),
]


def _trip(settings: Settings | None = None) -> Memory:
    mem = Memory(":memory:", embedder="hash", settings=settings or Settings())
    for session, turns in (("japan-day1", TRIP_DAY1), ("japan-day2", TRIP_DAY2)):
        for role, text in turns:
            mem.add_event(session, role, text)
    mem.flush()
    return mem


def test_the_allergy_reaches_the_context_by_salience() -> None:
    with _trip() as mem:
        ctx = mem.get_context("japan-day2", QUERY)
        found = [item for item in ctx.items if item.content == ALLERGY]
        assert found, "the allergy turn is missing from the context"
        assert "salience" in found[0].strategies
        assert found[0].importance >= SALIENT
        # it outranks the plans that are salient too (salience is a budget of 5)
        plans = mem.events(role="user")
        assert (plans["importance"] >= SALIENT).sum() > mem.settings.salience_limit
        # Kyoto turns still come by relevance
        assert sum("Kyoto" in item.content for item in ctx.by_strategy("relevance")) == 5


def test_without_the_estimate_the_allergy_is_missed() -> None:
    with _trip(Settings(estimate_importance=False)) as mem:
        ctx = mem.get_context("japan-day2", QUERY)
        assert ALLERGY not in [item.content for item in ctx.items]
        assert ctx.by_strategy("salience") == []
        assert set(mem.events(role="user")["importance"]) == {0.5}


#: What people say about themselves: preferences, constraints, needs, names and
#: relationships, plans, decisions, identity.
DISCLOSURES = [
    "I'm vegetarian with a severe peanut allergy",
    "I am allergic to shellfish, so please keep that in mind",
    "My daughter has celiac disease, everything has to be gluten free",
    "I use a wheelchair, so we need step-free access",
    "I can't eat pork for religious reasons",
    "I don't drink alcohol",
    "I'm lactose intolerant",
    "Our budget is 3000 euros in total, flights included",
    "I can't spend more than $50 a night on hotels",
    "I'd like to keep costs under 100 euros per day",
    "The report is due by Friday and I must finish it before then",
    "I have to be back in Tokyo by 6pm on Thursday",
    "I prefer aisle seats on long flights",
    "I hate spicy food",
    "I really love hiking in the mountains",
    "My favourite cuisine is Thai",
    "I'd rather take the train than fly",
    "I'm not a big fan of crowded museums",
    "My name is Priya and I'm a nurse",
    "I work as a software engineer in Berlin",
    "I work night shifts at the hospital",
    "I'm studying law at Coimbra",
    "I live in Porto with my husband",
    "I'm from Canada originally",
    "I'm 34 years old and retired early",
    "My sister Ana is getting married in June",
    "We have two kids, aged 4 and 7",
    "My partner Sam doesn't eat fish",
    "My dog Biscuit stays with my parents while we travel",
    "I have a cat named Miso",
    "I decided to quit my job next month",
    "We will fly to Osaka on the 12th",
    "I'm going to start learning Japanese in September",
    "I booked a ryokan in Hakone for two nights",
    "We're planning to move to Lisbon next year",
    "Please remember that I take insulin before every meal",
    "Remind me to call my mom on Sunday",
    "I never fly on red-eye flights",
    "I always get seasick on boats, so no ferries",
    "I'm deaf in my left ear, so phone calls are hard",
    "I'm afraid of heights, so skip the observation decks",
    "I get up at 5 every day",
]

#: Chit-chat, greetings, acknowledgements, reactions and questions.
CHITCHAT = [
    "Hi!",
    "Hello there, how are you?",
    "Thanks, that sounds good!",
    "Ok",
    "Great, thank you so much!",
    "Haha that's funny",
    "I see.",
    "I agree.",
    "I think so too.",
    "I don't know.",
    "I'm not sure.",
    "I don't really mind",
    "I love that!",
    "I like your idea",
    "That's my favourite part of the movie!",
    "I'm so happy for you!",
    "I'm sorry to hear that.",
    "I can't wait!",
    "I can't believe it.",
    "I'll think about it.",
    "I'll let you know.",
    "I'll take a look later",
    "I need to go, bye!",
    "I'm excited for the trip!",
    "I had a great time yesterday",
    "Sounds like a plan.",
    "What time is it in Kyoto?",
    "Can you recommend a restaurant for dinner?",
    "Do they have vegetarian options?",
    "Is the museum open on Mondays?",
    "Where should we go next?",
    "Could you book a table for two?",
    "Hey Sam, what do you think about Nara?",
    "That looks amazing!",
    "Good night, talk tomorrow.",
    "Perfect, that works for me.",
    "The weather looks nice today.",
    "Kyoto has so many temples.",
    "See you later!",
    "Any other ideas?",
]


#: What a coding agent must keep: decisions, standing rules, preferences about how it
#: works, corrections of a fact, explicit "remember"; most name no speaker at all.
AGENT_FACTS = [
    "OK, decision: use ruff not black, for both linting and formatting.",
    "Decision: we go with Redis Streams for the job queue, Kafka is overkill.",
    "Heads up: the API moved to port 8443. 8080 is closed on the firewall.",
    "DECISION: USE RUFF!!!",
    "We decided to keep Postgres 16 for now.",
    "Infra decided: we leave Nomad on bare metal and deploy to one Hetzner VM.",
    "Let's use pnpm for the frontend.",
    "We'll go with FastAPI for the new service.",
    "From now on, answer in English.",
    "Going forward the release branch is cut on Thursdays.",
    "Always run the tests before you commit.",
    "Never push directly to main.",
    "Tests must never hit the network.",
    "Please don't add a comment to every line.",
    "I prefer short answers with code.",
    "The staging database is now on db-2.internal.",
    "The default branch changed to trunk last week.",
    "Actually, the deadline is the 14th, not the 12th.",
    "Billing no longer uses the legacy invoices table.",
    "Use httpx instead of requests in new code.",
    "Remember that the staging DB is wiped every night.",
    "FYI, bump the job attempts from 6 to 8; the flaky mail provider needs more tries.",
    "We are switching the datastore from SQLite to MariaDB 11; the licence review ruled "
    "the old one out.",
    "The pipeline is moving off GitLab CI: from Monday everything runs on CircleCI. "
    "Please keep that in mind.",
    "Correction: the cron job runs at 04:00 UTC, not 03:00.",
]

#: Chit-chat, thanks, congratulations, laughter, emoji and questions, shouted or not:
#: exclamation marks and capitals are not importance.
AGENT_CHITCHAT = [
    "WHAT congrats!!! we have to celebrate",
    "We need a job queue for invoice PDFs. Kafka or Redis Streams?",
    "We need an endpoint that exports jobs as CSV. Can you sketch it?",
    "lol",
    "lol we always do that",
    "haha yes!!!",
    "\U0001f389\U0001f389\U0001f389",
    "\U0001f44d",
    "Congratulations on the launch!!!",
    "THANK YOU SO MUCH!!!",
    "OMG that's AMAZING!!!",
    "Good morning!",
    "Thanks, that fixed it!",
    "Thanks, I'll keep that in mind.",
    "Never mind.",
    "Actually, never mind.",
    "Please don't worry about it.",
    "Always happy to help!",
    "Let's go!",
    "Let's move on.",
    "Should we move the API to port 8443?",
    "Is the staging database now on db-2?",
    "Why did we decide on Redis Streams?",
    "Which one should we go with, ruff or black?",
    "Could you write tests for the ingest retry logic?",
    "Why is this so slow???",
    "Going with friends to the concert tonight, so excited!",
    "We're going with the flow lol",
]


def test_agent_chit_chat_is_stored_at_the_role_default(mem: Memory) -> None:
    assert [mem.add_event("s", "user", text).importance for text in AGENT_CHITCHAT] == [0.5] * len(
        AGENT_CHITCHAT
    )


def test_a_sentence_without_a_settled_cue_holds_no_settled_signal() -> None:
    """The cue list lets ``estimate_importance`` skip the settled kinds (and a text
    with neither a cue nor a speaker word): it must hold a word of every match."""
    from nbmemory.importance import _SETTLED, IMPERSONAL, SENTENCES, SIGNALS

    sentences = [
        part.strip().lower()
        for text in AGENT_FACTS + AGENT_CHITCHAT + DISCLOSURES + CHITCHAT + [ALLERGY]
        for part in SENTENCES.split(text.replace("\u2019", "'"))
        if part.strip()
    ]
    matched = 0
    for kind, _, pattern in SIGNALS:
        if kind in IMPERSONAL:
            for sentence in sentences:
                if pattern.search(sentence):
                    matched += 1
                    assert _SETTLED.search(sentence), (kind, sentence)
    assert matched >= len(AGENT_FACTS)


def test_a_decision_outranks_the_question_that_led_to_it(mem: Memory) -> None:
    """The probe's five turns: the decisions and the correction were stored at 0.5 and
    the congratulation and the question at 0.85, the reverse of what the docs say."""
    question = mem.add_event("s", "user", AGENT_CHITCHAT[1]).importance
    cheer = mem.add_event("s", "user", AGENT_CHITCHAT[0]).importance
    for text in AGENT_FACTS[:3]:
        assert mem.add_event("s", "user", text).importance >= SALIENT > max(question, cheer)


@pytest.mark.parametrize("text", DISCLOSURES + AGENT_FACTS)
def test_self_disclosures_decisions_rules_and_corrections_are_salient(text: str) -> None:
    assert estimate_importance(text, "user") >= SALIENT


@pytest.mark.parametrize("text", CHITCHAT + AGENT_CHITCHAT)
def test_chit_chat_and_questions_are_not(text: str) -> None:
    assert estimate_importance(text, "user") < SALIENT


def test_the_tables_are_big_enough() -> None:
    assert len(DISCLOSURES) >= 30 and len(CHITCHAT) >= 30


def test_health_outranks_plans_and_the_score_stays_in_range() -> None:
    allergy = estimate_importance(ALLERGY, "user")
    plan = estimate_importance("We will visit Kinkaku-ji in the afternoon.", "user")
    assert SALIENT <= plan < allergy <= 1.0
    for text in DISCLOSURES + CHITCHAT + ["", " ", "?" * 50, "I" * 10_000]:
        assert 0.0 <= estimate_importance(text, "user") <= 1.0


def test_a_question_around_a_disclosure_still_counts() -> None:
    assert estimate_importance("Can you find a place? I'm vegan.", "user") >= SALIENT
    assert estimate_importance("I'm allergic to nuts, is this dish safe?", "user") >= SALIENT
    assert estimate_importance("Mia: I'm a nurse in Leeds", "user") >= SALIENT  # speaker tag


@pytest.mark.parametrize("role", ["assistant", "tool", "system"])
def test_other_roles_keep_their_default(role: str) -> None:
    assert estimate_importance(ALLERGY, role) == 0.0
    with Memory(":memory:", embedder="hash") as mem:
        stored = mem.add_event("s", role, ALLERGY).importance
        assert stored == Settings().importance_by_role[role]


def test_the_locomo_table_in_the_docs_is_what_the_benchmark_prints(locomo_dir) -> None:
    """README and docs/retrieval.md show the table benchmarks/importance_locomo.py
    prints today: a change to the estimate that moves a number fails here."""
    root = Path(__file__).resolve().parents[1]
    printed = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "importance_locomo.py"), locomo_dir],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    rows = [line for line in printed.splitlines() if line.startswith("| ")]
    assert len(rows) == 7  # header, five conversations, all
    for page in ("README.md", "docs/retrieval.md"):
        text = (root / page).read_text()
        missing = [row for row in rows if row not in text]
        assert not missing, f"{page} lacks the benchmark's rows: {missing}"


# -- wiring: importance_for / build_row --------------------------------------------------


def test_stored_importance_is_the_larger_of_role_default_and_estimate(mem: Memory) -> None:
    assert mem.add_event("s", "user", ALLERGY).importance == estimate_importance(ALLERGY, "user")
    assert mem.add_event("s", "user", "Thanks!").importance == 0.5
    (row_id,) = mem.add_events([{"session_id": "s", "role": "user", "content": ALLERGY}])
    assert mem.get_event(row_id).importance >= SALIENT
    assert mem.add_memory("My sister Ana lives in Lisbon").importance >= SALIENT


def test_explicit_importance_always_wins(mem: Memory) -> None:
    assert mem.add_event("s", "user", ALLERGY, importance=0.2).importance == 0.2
    assert mem.add_memory(ALLERGY, importance=0.0).importance == 0.0
    (row_id,) = mem.add_events(
        [{"session_id": "s", "role": "user", "content": ALLERGY, "importance": 0.3}]
    )
    assert mem.get_event(row_id).importance == 0.3


def test_the_role_default_is_the_floor() -> None:
    roles = {"user": 0.97, "assistant": 0.5, "tool": 0.3, "system": 0.1, "customer": 0.4}
    settings = Settings(importance_by_role=roles)
    # above the estimate (0.95; ALLERGY's "please keep that in mind" makes it 1.0)
    assert importance_for("user", None, settings, DISCLOSURES[0]) == 0.97
    assert importance_for("user", None, settings, "ok") == 0.97
    # a custom role is read like a person's turn, and floored by its default
    assert importance_for("customer", None, settings, "Thanks") == 0.4
    assert importance_for("customer", None, settings, ALLERGY) >= SALIENT


def test_the_setting_off_restores_the_role_defaults() -> None:
    settings = Settings(estimate_importance=False)
    with Memory(":memory:", embedder="hash", settings=settings) as mem:
        for role, default in settings.importance_by_role.items():
            assert mem.add_event("s", role, ALLERGY).importance == default
        assert mem.add_memory(ALLERGY).importance == 0.5
    with Memory(":memory:", embedder="hash") as mem:
        mem.configure(estimate_importance=False)
        assert mem.add_event("s", "user", ALLERGY).importance == 0.5
        mem.configure(estimate_importance=True)
        assert mem.add_event("s", "user", ALLERGY).importance >= SALIENT


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_the_setting_is_a_bool(bad) -> None:
    with pytest.raises(InvalidInput, match="estimate_importance must be True or False"):
        Settings(estimate_importance=bad)


def test_stored_rows_are_not_estimated() -> None:
    settings = Settings()
    row = build_row(
        settings,
        stored=True,
        session_id="s",
        role="user",
        content=ALLERGY,
        namespace="default",
        importance=None,
        created_at="2024-01-01T00:00:00Z",
    )
    assert row["importance"] == 0.5  # the role default, as the file had none
    fresh = build_row(settings, session_id="s", role="user", content=ALLERGY, namespace="default")
    assert fresh["importance"] >= SALIENT


def test_a_json_import_keeps_the_files_importance(tmp_path: Path) -> None:
    file = tmp_path / "export.json"
    with Memory(":memory:", embedder="hash", estimate_importance=False) as old:
        old.add_event("s", "user", ALLERGY)
        old.add_event("s", "user", "I love TypeScript", importance=0.6)
        old.flush()
        old.export_json(file)
    with Memory(":memory:", embedder="hash") as new:
        new.import_json(file)
        imported = new.events().set_index("content")["importance"]
        assert imported[ALLERGY] == 0.5 and imported["I love TypeScript"] == 0.6


def test_a_sqlite_import_keeps_the_files_importance(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE events (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL,"
        " content TEXT, created_at TEXT NOT NULL, importance REAL DEFAULT 0.5)"
    )
    con.executemany(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("a", "s", "user", ALLERGY, "2024-05-08T13:56:00Z", 0.5),
            ("b", "s", "user", "My name is Priya and I'm a nurse", "2024-05-08T13:57:00Z", None),
        ],
    )
    con.commit()
    con.close()
    with Memory(":memory:", embedder="hash") as mem:
        mem.import_sqlite(path)
        imported = mem.events().set_index("id")["importance"]
        assert imported["a"] == 0.5 and imported["b"] == 0.5  # NULL: the role default


# -- hybrid search: a single hit keeps its score -------------------------------------------


def test_a_single_hybrid_hit_has_its_real_fused_score() -> None:
    """One memory: its score is the weighted sum of its features, each as documented
    (cosine clipped when there is no spread, BM25 over the best, both ranks 1, its
    session's best fused score, no neighbour; the question names "Kyoto")."""
    from nbmemory.config import DEFAULT_WEIGHTS as w

    with Memory(":memory:", embedder="hash") as mem:
        mem.add_memory("The Kyoto ryokan serves breakfast at seven")
        mem.flush()
        hit = mem.search("breakfast in Kyoto", mode="hybrid").iloc[0]
        cos = min(1.0, max(0.0, hit["similarity"]))
        assert cos > 0
        fused = 0.5 * cos + 0.5 * 1.0
        terms = 5  # kyoto ryokan serv breakfast seven
        expected = (
            w["cosine"] * cos
            + w["cosine_rank"]
            + w["keywords"]
            + w["keyword_rank"]
            + w["agreement"] * cos
            + w["session"] * fused
            + w["mention"]
            + w["length"] * math.log1p(terms) / math.log1p(terms)  # over the longest: itself
        )
        assert hit["score"] == pytest.approx(expected)
        # a signal is named only when its weight counts (mention is 0 by default)
        assert ("mention" in hit["signals"]) == (w["mention"] != 0)
        # no shared word, similar spelling (character trigrams): cosine alone
        hit = mem.search("kioto brekfast", mode="hybrid").iloc[0]
        assert hit["keyword_score"] == 0
        cos = hit["similarity"]
        assert hit["score"] == pytest.approx(
            w["cosine"] * cos + w["cosine_rank"] + w["session"] * 0.5 * cos
            + w["length"] * math.log1p(terms) / math.log1p(terms)  # over the longest: itself
        )  # fmt: skip


def test_equal_similarities_are_scored_by_their_value() -> None:
    with Memory(":memory:", embedder="hash") as mem:
        mem.add_events(
            [
                {"session_id": "a", "role": "user", "content": "tram 28 in Lisbon"},
                {"session_id": "b", "role": "user", "content": "tram 28 in Lisbon"},
            ]
        )
        mem.flush()
        hits = mem.search("tram Lisbon", mode="hybrid")
        assert len(hits) == 2 and (hits["score"] > 0.5).all()
        assert hits["score"].iloc[0] == pytest.approx(hits["score"].iloc[1])
