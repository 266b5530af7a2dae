"""Keyword (BM25) search kept in step with the table, and the hybrid fusion."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.config import FEATURES
from nbmemory.retrieval.keywords import (
    K1,
    B,
    KeywordIndex,
    asks_when,
    mentions_time,
    speaker_of,
    tokenize,
)


def blind_model(texts: list[str]) -> np.ndarray:
    """A model that sees nothing: every vector alike, so only the other signals decide."""
    return np.ones((len(texts), 8), dtype=np.float32)


def test_tokenize_drops_stop_words_and_stems_with_snowball():
    assert tokenize("She painted; painting and paints!") == ["paint", "paint", "paint"]
    assert tokenize("activities and active") == ["activ", "activ"]
    assert tokenize("Caroline went to the LGBTQ support group") == [
        "carolin",
        "went",
        "lgbtq",
        "support",
        "group",
    ]
    assert tokenize("שלום עולם") == ["שלום", "עולם"]


def bm25_reference(docs: dict[str, str], query: str) -> dict[str, float]:
    """Textbook BM25 (Robertson/Sparck Jones idf with +1, k1=1.2, b=0.75)."""
    tokens = {i: tokenize(t) for i, t in docs.items()}
    n = len(docs)
    avg = sum(len(t) for t in tokens.values()) / n
    out: dict[str, float] = {}
    for term in set(tokenize(query)):
        df = sum(term in t for t in tokens.values())
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, t in tokens.items():
            tf = Counter(t)[term]
            if tf:
                norm = tf + K1 * (1 - B + B * len(t) / avg)
                out[i] = out.get(i, 0.0) + idf * tf * (K1 + 1) / norm
    return out


def test_scores_are_textbook_bm25_per_namespace():
    index = KeywordIndex()
    docs = {
        "a": "Melanie painted a sunrise over the lake",
        "b": "Caroline joined a support group",
        "c": "the lake was cold and Melanie swam",
        "d": "nothing related at all",
    }
    index.rebuild(
        [(i, "ns", "s", text, n, n) for n, (i, text) in enumerate(docs.items())]
        + [("x", "other", "s", "Melanie Melanie lake lake lake", 0, 99)],
    )
    got = index.scores("When did Melanie paint the lake?", "ns")
    expected = bm25_reference(docs, "When did Melanie paint the lake?")
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value)
    assert "x" not in got  # another namespace neither answers nor changes the statistics


def test_neighbours_follow_session_time_order():
    index = KeywordIndex()
    index.rebuild(
        [
            ("t2", "ns", "s1", "second", 2, 2),
            ("t1", "ns", "s1", "first", 1, 1),
            ("t3", "ns", "s1", "third", 3, 3),
            ("u1", "ns", "s2", "other session", 2, 4),
        ],
    )
    assert index.neighbours("t2") == ("t1", "t3")
    assert index.neighbours("t1") == (None, "t2")
    assert index.neighbours("u1") == (None, None)
    index.remove(["t2"])
    assert index.neighbours("t1") == (None, "t3")


@pytest.fixture
def spec_and_hybrid(store_path):
    mem = Memory(store_path, embedder="hash")
    yield mem
    mem.close()


def keyword_ids(mem: Memory, query: str, **kwargs) -> list[str]:
    return mem.search(query, mode="keyword", limit=50, **kwargs)["id"].tolist()


def test_keyword_index_stays_in_step_with_inserts_updates_and_deletes(spec_and_hybrid):
    mem = spec_and_hybrid
    first = mem.add_event("s", "user", "I adopted a greyhound named Comet")
    bulk = mem.add_events(
        [
            {"session_id": "s", "role": "user", "content": "the greyhound loves the beach"},
            {"session_id": "s", "role": "user", "content": "my cat sleeps all day"},
        ]
    )
    assert set(keyword_ids(mem, "greyhound")) == {first.id, bulk[0]}
    index = mem.indexes.keywords()
    rebuilds = index.rebuilds
    later = mem.add_event("s", "user", "Comet the greyhound won a race")
    assert set(keyword_ids(mem, "greyhound")) == {first.id, bulk[0], later.id}
    mem.delete(bulk[0])
    assert set(keyword_ids(mem, "greyhound")) == {first.id, later.id}
    assert index.rebuilds == rebuilds  # inserts and deletes were applied in place
    # an update through the Astreus API (any UPDATE of events) is picked up too
    memory = mem.add_memory("budget is fifty thousand")
    mem.update_memory(
        memory["id"] if isinstance(memory, dict) else memory.id, content="budget doubled"
    )
    assert keyword_ids(mem, "fifty") == []
    assert len(keyword_ids(mem, "doubled")) == 1
    # a change made behind the store's back (plain SQL) is noticed as well
    mem.store.execute("UPDATE events SET content = 'a poodle now' WHERE id = ?", [first.id])
    assert set(keyword_ids(mem, "greyhound")) == {later.id}
    assert keyword_ids(mem, "poodle") == [first.id]
    # and the incremental index equals one rebuilt from scratch
    fresh = KeywordIndex()
    rows = mem.store.fetchall(
        "SELECT id, namespace, session_id, content, created_at, seq FROM events"
    )
    fresh.rebuild(rows)
    live = mem.indexes.keywords()
    for query in ["greyhound comet", "budget doubled", "cat beach", "poodle"]:
        assert live.scores(query, "default") == pytest.approx(fresh.scores(query, "default"))


def test_a_rolled_back_insert_never_reaches_the_keyword_index(spec_and_hybrid):
    mem = spec_and_hybrid
    mem.add_event("s", "user", "visible text")
    mem.indexes.keywords()
    from nbmemory.event_rows import build_row

    row = build_row(mem.settings, session_id="s", role="user", content="ghost", namespace="default")
    with pytest.raises(RuntimeError), mem.writer.transaction() as tx:
        tx.events.insert([row])
        raise RuntimeError("roll back")
    assert keyword_ids(mem, "ghost") == []


def test_hybrid_finds_keyword_matches_the_vector_misses_and_says_why(store_path):
    with Memory(store_path, embedder=blind_model) as mem:
        mem.add_event("s", "user", "we talked about the weather")
        target = mem.add_event("s", "user", "the Zanzibar trip is booked for June")
        mem.add_event("s", "assistant", "great, enjoy the trip")
        mem.flush()
        hits = mem.search("When is Zanzibar?", limit=3)
        assert hits["id"].iloc[0] == target.id
        assert "keyword" in hits["signals"].iloc[0]
        assert hits["score"].is_monotonic_decreasing
        assert {"similarity", "score", "keyword_score", "signals"} <= set(hits.columns)


def test_neighbouring_turn_is_lifted(store_path):
    with Memory(store_path, embedder="hash") as mem:
        mem.add_event("s", "user", "what instrument do you play", created_at="2024-01-01T10:00")
        answer = mem.add_event("s", "assistant", "mostly the cello", created_at="2024-01-01T10:01")
        for i in range(30):
            mem.add_event(
                "s", "user", f"unrelated chatter {i}", created_at=f"2024-01-02T10:{i:02d}"
            )
        mem.flush()
        hits = mem.search("what instrument do you play", limit=2)
        assert answer.id in hits["id"].tolist()
        row = hits.set_index("id").loc[answer.id]
        assert "neighbour" in row["signals"]
        plain = mem.search("what instrument do you play", limit=2, mode="vector")
        assert answer.id not in plain["id"].tolist()


@pytest.mark.parametrize(
    "content, speaker",
    [
        ("Caroline: I went to a support group yesterday", "caroline"),
        ("Mary Ann Smith: hello there", "mary ann smith"),
        ("  Jon: ok", "jon"),
        ("caroline: lower case is not a name", None),
        ("Note: this is a label, not a speaker? yes it reads like one", "note"),
        ("I said: hello", None),
        ("The plan is: go", None),
        ("no colon here", None),
        ("", None),
    ],
)
def test_a_turn_written_as_name_colon_text_has_a_speaker(content, speaker):
    assert speaker_of(content) == speaker


def test_speakers_named_by_a_question_follow_the_index():
    index = KeywordIndex()
    index.rebuild(
        [
            ("c1", "ns", "s", "Caroline: I went to a support group", 0, 0),
            ("m1", "ns", "s", "Melanie: I painted a sunrise", 1, 1),
            ("o1", "other", "s", "Oscar: hi", 2, 2),
        ]
    )
    assert index.speakers_named("What did Caroline do?", "ns") == {"caroline"}
    assert index.speakers_named("Did Caroline and Melanie meet?", "ns") == {"caroline", "melanie"}
    assert index.speakers_named("What did Oscar say?", "ns") == set()  # another namespace
    assert index.speaker("m1") == "melanie" and index.speaker("nope") is None
    assert not index.mentions_time("m1") and not index.mentions_time("nope")
    index.remove(["c1"])
    assert index.speakers_named("What did Caroline do?", "ns") == set()
    index.compact()
    assert index.speaker("m1") == "melanie"


def test_a_question_naming_a_speaker_favours_their_turns(store_path):
    """Two turns with the same words (so the same cosine and BM25); the one the
    question's named speaker wrote wins."""

    with Memory(store_path, embedder=blind_model) as mem:
        bob = mem.add_event("s", "user", "Bob: Alice adopted a dog last week")
        alice = mem.add_event("s", "assistant", "Alice: Bob adopted a dog last week")
        for i in range(10):
            mem.add_event("s", "user", f"Bob: unrelated chatter {i}")
        mem.flush()
        hits = mem.search("When did Alice adopt a dog?", limit=2)
        assert hits["id"].iloc[0] == alice.id and "speaker" in hits["signals"].iloc[0]
        assert hits["score"].iloc[0] > hits["score"].iloc[1]
        mem.configure(signal_weights={"speaker": 0})  # off: a tie broken by id, not the speaker
        hits = mem.search("When did Alice adopt a dog?", limit=2)
        assert set(hits["id"]) == {alice.id, bob.id}
        assert hits["score"].iloc[0] == pytest.approx(hits["score"].iloc[1])
        assert "speaker" not in hits["signals"].iloc[0]


@pytest.mark.parametrize(
    "content, timed",
    [
        ("I went to the support group yesterday", True),
        ("We moved here in May 2023", True),
        ("last week was hectic", True),
        ("see you on Saturday", True),
        ("a few years ago I painted a lake", True),
        ("the party is on 10/5", True),
        ("Last Fri we went hiking", True),  # a weekday written short
        ("I haven't painted since we last spoke", True),
        ("I've had these friends for 3 years now", True),
        ("we have been at it a few months now", True),
        ("I last spoke to her about painting", False),
        ("the cat sat down and now sleeps", False),
        ("I may come along", False),  # the verb, not the month
        ("I love painting lakes", False),
        ("", False),
    ],
)
def test_a_turn_that_places_something_in_time(content, timed):
    assert mentions_time(content) is timed


@pytest.mark.parametrize(
    "question, when",
    [
        ("When did Caroline go to the support group?", True),
        ("What year did Melanie move?", True),
        ("How long ago was the trip?", True),
        ("What did Caroline research?", False),
        ("Where does her sister live?", False),
    ],
)
def test_a_question_that_asks_when(question, when):
    assert asks_when(question) is when


def test_a_when_question_favours_turns_that_place_things_in_time(store_path):
    """Two turns alike but for one word, a weekday in one of them: on "when?" the
    turn with the weekday wins, and only then."""

    with Memory(store_path, embedder=blind_model, signal_weights={"speaker": 0}) as mem:
        undated = mem.add_event("s", "user", "we adopted a dog on Sundae")
        dated = mem.add_event("s", "user", "we adopted a dog on Sunday")
        for i in range(10):
            mem.add_event("s", "user", f"unrelated chatter {i}")
        mem.flush()
        hits = mem.search("When did we adopt a dog?", limit=2)
        assert hits["id"].iloc[0] == dated.id and "time" in hits["signals"].iloc[0]
        # not a "when" question, or the weight off: the two tie
        for query, weight in (("Did we adopt a dog?", 1.0), ("When did we adopt a dog?", 0.0)):
            mem.configure(signal_weights={"speaker": 0, "time": weight})
            hits = mem.search(query, limit=2)
            assert set(hits["id"]) == {dated.id, undated.id}
            assert hits["score"].iloc[0] == pytest.approx(hits["score"].iloc[1])
            assert not any("time" in signals for signals in hits["signals"])


def test_a_message_that_states_then_asks_is_not_read_as_a_question(store_path):
    """``question_turn`` is how much of a memory asks: a question alone is 1, the same
    fact stated is 0, and a correction followed by a short request ("We moved ... Can
    you update nginx?", as users write them) is mostly telling.  Before, anything
    ending with "?" was 1, and the fit's negative weight pushed such corrections down."""
    with Memory(store_path, embedder=blind_model) as mem:
        asked = mem.add_event("s", "user", "Which port does the api listen on now?")
        stated = mem.add_event("s", "user", "The api listens on port 8443 now.")
        both = mem.add_event(
            "s", "user", "The api listens on port 8443 now. Can you update the nginx config?"
        )
        mem.flush()
        found = mem.core.retriever.candidates("api port", None)
        column = list(FEATURES).index("question_turn")
        share = dict(zip(found.ids, found.features[:, column], strict=True))
        assert share[asked.id] == 1.0 and share[stated.id] == 0.0
        assert 0.0 < share[both.id] < 0.5


def test_search_modes_and_threshold(spec_and_hybrid):
    mem = spec_and_hybrid
    mem.add_event("s", "user", "alpha beta gamma")
    mem.add_event("s", "user", "delta epsilon")
    mem.flush()
    for mode in ("vector", "keyword", "hybrid"):
        hits = mem.search("alpha beta gamma", mode=mode, threshold=0.9)
        assert hits["content"].tolist() == ["alpha beta gamma"]
        assert (hits["similarity"] >= 0.9).all()
        assert hits.attrs["mode"] == mode
    with pytest.raises(InvalidInput, match="unknown search mode"):
        mem.search("x", mode="semantic")


def test_hybrid_honours_filters(spec_and_hybrid):
    mem = spec_and_hybrid
    mem.add_event("a", "user", "orchid care notes")
    mem.add_event("b", "assistant", "orchid watering schedule")
    mem.flush()
    for mode in ("keyword", "hybrid"):
        assert mem.search("orchid", mode=mode, session_id="b")["session_id"].tolist() == ["b"]
        assert mem.search("orchid", mode=mode, role="user")["role"].tolist() == ["user"]


def test_profiles_change_get_context_relevance(store_path):
    with Memory(store_path, embedder="hash", profile="spec") as spec:
        spec.add_event("s", "user", "the quarterly budget is fifty thousand")
        spec.add_event("s", "user", "lunch was pasta")
        spec.flush()
        ctx = spec.get_context("other", "what is the budget?")
        assert ctx.by_strategy("relevance") == []  # cosine never passes 0.65 here
        spec.configure(profile="hybrid")
        ctx = spec.get_context("other", "what is the budget?")
        found = ctx.by_strategy("relevance")
        assert [i.content for i in found][0] == "the quarterly budget is fifty thousand"
        assert "keyword" in found[0].signals
        frame = ctx.to_frame()
        assert {"relevance_score", "signals"} <= set(frame.columns)


#: recall@10 per LoCoMo category before the learned fusion (speaker, time and
#: neighbours fixed by hand): no category may get worse.
BEFORE_FUSION = {1: 0.461, 2: 0.854, 3: 0.405, 4: 0.846}


def test_hybrid_meets_the_retrieval_goals_on_five_locomo_conversations(locomo):
    """recall@10 >= 0.80, recall@5 >= 0.70 and MRR >= 0.58 on the five conversations,
    offline, with the default model and weights; no question category worse than
    before the learned fusion, multi-hop 5 points better, open-domain 3.5.

    The weights are fitted across every development corpus (issue 37), which moved
    these five from 0.809 to 0.801 recall@10 (measured 2026-12-04), and with LoCoMo
    stored without speakers' names among them to 0.807 (2026-12-05): multi-hop 0.526,
    open-domain 0.475 (44 questions; its floor, 0.437, is the lowest measured value
    less a point, still 3 points over the fixed fusion's 0.405)."""
    rows = []
    for mem, conversation in locomo.all():
        for row in conversation.queries().itertuples():
            relevant = set(row.relevant_ids)
            hits = mem.search(row.question, limit=10, namespace=conversation.namespace)["id"]
            first = next((i for i, x in enumerate(hits) if x in relevant), None)
            rows.append(
                {
                    "category": row.category,
                    "recall@5": len(relevant & set(hits[:5])) / len(relevant),
                    "recall@10": len(relevant & set(hits)) / len(relevant),
                    "rr": 0.0 if first is None else 1 / (first + 1),
                }
            )
    frame = pd.DataFrame(rows)
    assert len(frame) >= 750
    measured = frame[["recall@5", "recall@10", "rr"]].mean()
    assert measured["recall@10"] >= 0.80, measured
    assert measured["recall@5"] >= 0.70, measured
    assert measured["rr"] >= 0.58, measured
    by_category = frame.groupby("category")["recall@10"].mean()
    for category, before in BEFORE_FUSION.items():
        assert by_category[category] >= before, (category, by_category[category])
    assert by_category[1] >= BEFORE_FUSION[1] + 0.05, by_category  # multi-hop
    assert by_category[3] >= 0.437, by_category  # open-domain: 0.447 measured


def test_equal_keyword_scores_keep_the_earliest_memories_whatever_the_platform():
    """A tie at the cut is broken by index order, not by numpy's selection algorithm
    (which differs between CPUs and releases): the same store ranks the same everywhere."""
    index = KeywordIndex()
    index.rebuild(
        [
            (f"e{n:03d}", "ns", "s", "we talked about the lake" if n % 3 else "lake", n, n)
            for n in range(300)
        ]
    )
    result = index.score_array("lake", "ns")
    everything = result.top(None)
    for limit in (1, 7, 50, 150):
        top = result.top(limit)
        assert top == everything[:limit]
    assert everything[0][0] == "e000"  # equal best scores: the earliest first
