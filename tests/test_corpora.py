"""The development corpora (issue 37): generators, their shape, and the per-corpus table."""

from __future__ import annotations

import pandas as pd
import pytest

from nbmemory import InvalidInput, Memory
from nbmemory.cli import main
from nbmemory.research.corpora import (
    CORPORA,
    Corpus,
    build_corpus,
    leave_one_out,
    load_corpus,
    parse_corpora,
)
from nbmemory.research.corpora.long_locomo import MAX_CHARS, MIN_CHARS, reshape_long
from nbmemory.research.corpora.plain_locomo import strip_speakers
from nbmemory.research.corpora.tech_chat import ANSWER_MAX, ANSWER_MIN, CATEGORY_NAMES, tech_chat
from nbmemory.research.datasets import LocomoConversation, read_locomo
from nbmemory.research.generalisation import BASELINES, RRF_K, evaluate_corpora, rrf


@pytest.fixture(scope="module")
def chats():
    return tech_chat(seed=0)


def _same(a, b) -> bool:
    return a.turns.equals(b.turns) and a.questions.equals(b.questions)


def test_the_tech_chat_is_the_same_for_the_same_seed_and_differs_for_another(chats) -> None:
    again = tech_chat(seed=0)
    assert [c.conversation_id for c in chats] == ["ledger", "atlas", "beacon"]
    assert all(_same(a, b) for a, b in zip(chats, again, strict=True))
    other = tech_chat(seed=1)
    assert not any(_same(a, b) for a, b in zip(chats, other, strict=True))


def test_the_tech_chat_has_the_stated_size_and_lengths(chats) -> None:
    turns = pd.concat([c.turns for c in chats])
    questions = pd.concat([c.answerable() for c in chats])
    assert len(turns) == 180 and len(questions) == 72
    answers = turns.loc[turns["speaker"] == "assistant", "content"].str.len()
    asks = turns.loc[turns["speaker"] == "user", "content"].str.len()
    assert answers.between(ANSWER_MIN, ANSWER_MAX).all(), answers.describe()
    assert (asks < ANSWER_MIN).all()
    # sessions on dates, in order, several days
    for chat in chats:
        assert chat.turns["created_at"].is_monotonic_increasing
        assert chat.turns["created_at"].dt.date.nunique() == chat.turns["session"].nunique() == 10
    # code, logs or shell output in most answers
    assert answers.index.size and turns["content"].str.contains("```").mean() > 0.5


def test_every_answer_sits_in_its_evidence_at_its_position(chats) -> None:
    seen = set()
    for chat in chats:
        content = chat.turns.set_index("dia_id")["content"]
        for q in chat.questions.itertuples():
            assert len(q.evidence) == 1 and q.evidence[0] in content.index
            text = content[q.evidence[0]]
            assert q.answer in text and q.statement in text
            # the answer is not in the question's words
            assert q.answer.lower() not in q.question.lower()
            seen.add(q.position)
            where = (text.index(q.statement) + len(q.statement) / 2) / len(text)
            if q.position == "start":
                assert text.startswith(q.statement)
            elif q.position == "end":
                assert text.endswith(q.statement)
            elif q.position == "middle":
                assert 0.2 < where < 0.8, (where, q.question)
            assert CATEGORY_NAMES[q.category] == ("updated" if q.category == 4 else q.position)
    assert {"start", "middle", "end", "user message"} <= seen


def test_questions_on_updated_facts_point_at_the_correcting_message(chats) -> None:
    for chat in chats:
        order = {d: i for i, d in enumerate(chat.turns["dia_id"])}
        content = chat.turns.set_index("dia_id")["content"]
        by_kind = chat.questions.groupby("kind")
        updated = chat.questions[chat.questions["category"] == 4]
        assert len(updated) == 6
        for q in updated.itertuples():
            first = by_kind.get_group(q.kind)
            first = first[first["category"] != 4].iloc[0]
            assert first["answer"] != q.answer
            # the correction is said later, names the old and the new value
            assert order[q.evidence[0]] > order[first["evidence"][0]]
            assert q.answer in content[q.evidence[0]] and first["answer"] in q.statement


def test_locomo_long_merges_turns_into_long_messages(tiny_locomo_path) -> None:
    conversation = read_locomo(tiny_locomo_path)
    long = reshape_long(conversation, seed=0)
    assert _same(long, reshape_long(conversation, seed=0))
    assert long.conversation_id == "tiny-1-long"
    lengths = long.turns["content"].str.len()
    assert lengths.between(MIN_CHARS, MAX_CHARS).all()  # short sessions get a pasted block
    assert long.turns["content"].str.contains("```").all()
    merged = long.turns.set_index("dia_id")["turns"]
    assert sorted(d for ids in merged for d in ids) == sorted(conversation.turns["dia_id"])
    for before, after in zip(
        conversation.questions.itertuples(), long.questions.itertuples(), strict=True
    ):
        assert after.category == before.category
        assert {m for d in before.evidence for m in merged.index if d in merged[m]} == set(
            after.evidence
        )
    # every turn's words are kept, in order, in its message
    content = long.turns.set_index("dia_id")["content"]
    for turn in conversation.turns.itertuples():
        (home,) = [m for m in merged.index if turn.dia_id in merged[m]]
        assert turn.content in content[home]


def test_locomo_long_on_the_five_conversations(locomo_dir) -> None:
    corpus = build_corpus("locomo-long", locomo_path=locomo_dir)
    plain = build_corpus("locomo", locomo_path=locomo_dir)
    assert len(corpus.conversations) == 5
    lengths = pd.concat([c.turns["content"].str.len() for c in corpus.conversations])
    assert lengths.between(MIN_CHARS, MAX_CHARS).all(), lengths.describe()
    assert 100 <= corpus.messages <= 250
    share = pd.concat([c.turns["content"].str.contains("```") for c in corpus.conversations])
    assert 0.2 < share.mean() < 0.6
    # every answerable question keeps its evidence
    assert corpus.questions == plain.questions
    for conv in corpus.conversations:
        ids = set(conv.turns["dia_id"])
        assert all(set(e) <= ids and e for e in conv.answerable()["evidence"])


def test_locomo_plain_keeps_each_turns_text_without_its_speakers_name(tiny_locomo_path) -> None:
    conversation = read_locomo(tiny_locomo_path)
    plain = strip_speakers(conversation)
    assert plain.conversation_id == f"{conversation.conversation_id}-plain"
    named = conversation.turns.set_index("dia_id")
    stripped = plain.turns.set_index("dia_id")
    assert (named["content"].str.match(r"^[A-Z][a-z]+: ")).all()
    assert not stripped["content"].str.match(r"^[A-Z][a-z]+: ").any()
    assert (stripped["content"] == named["text"]).all()
    # everything else is the conversation's: speakers (stored as roles), dates, questions
    cols = ["session", "speaker", "text", "created_at"]
    assert stripped[cols].equals(named[cols])
    assert plain.questions.equals(conversation.questions)
    assert "content" in conversation.turns and conversation.turns.equals(
        read_locomo(tiny_locomo_path).turns
    )


def test_leave_one_out_holds_each_out_once() -> None:
    splits = list(leave_one_out(["a", "b", "c"]))
    assert splits == [(["b", "c"], "a"), (["a", "c"], "b"), (["a", "b"], "c")]
    with pytest.raises(InvalidInput, match="at least two"):
        list(leave_one_out(["a"]))


def test_corpus_names_are_checked() -> None:
    assert parse_corpora(None) == list(CORPORA)
    assert parse_corpora("tech-chat, locomo") == ["tech-chat", "locomo"]
    with pytest.raises(InvalidInput, match="unknown corpus nope; corpora: locomo"):
        parse_corpora("tech-chat,nope")


class _Ranked:
    """A memory whose searches return fixed rankings per mode."""

    def __init__(self, rankings: dict[str, list[str]]) -> None:
        self.rankings = rankings

    def search(self, question, *, limit, mode, namespace):
        return pd.DataFrame({"id": self.rankings[mode][:limit]})


def test_rrf_fuses_ranks_not_scores() -> None:
    memory = _Ranked({"vector": ["a", "b", "c"], "keyword": ["c", "d", "a"]})
    loaded = type("L", (), {"namespace": "x"})()
    # a: 1/61 + 1/63, c: 1/63 + 1/61 (equal: cosine order first), b: 1/62, d: 1/62
    assert rrf(memory, loaded, "q", 4) == ["a", "c", "b", "d"]
    assert rrf(memory, loaded, "q", 1) == ["a"]
    assert RRF_K == 60


def test_evaluate_corpora_on_the_tech_chat_with_the_hash_embedder(capsys) -> None:
    memory = Memory(":memory:", embedder="hash", background_consolidation=False)
    corpus = Corpus("tech-chat", "one project", tech_chat(0, projects=1), dict(CATEGORY_NAMES))

    def oracle(mem, conv, question, k):
        return list(conv.queries().set_index("question").loc[question, "relevant_ids"])

    result = evaluate_corpora(memory, [corpus], strategies={**BASELINES, "oracle": oracle})
    table = result.table
    assert list(table.index.get_level_values("ranking")) == [*BASELINES, "oracle"]
    assert list(table.columns) == [
        "recall@5",
        "recall@10",
        "MRR",
        "hit@10",
        "guard",
        "questions",
        "messages",
    ]
    assert table.drop(columns="guard").loc[("tech-chat", "oracle")].tolist() == [1, 1, 1, 1, 24, 60]
    # how often the default's guard fell back to RRF: a share, for the default only
    assert 0 <= table.loc[("tech-chat", "default"), "guard"] <= 1
    assert table["guard"].drop(("tech-chat", "default")).isna().all()
    assert table[["recall@5", "recall@10", "MRR"]].stack().between(0, 1).all()
    assert (table["recall@10"] >= table["recall@5"]).all()
    by_category = result.by_category(corpus="tech-chat")
    assert list(by_category.columns) == [
        "start (6)",
        "middle (6)",
        "end (6)",
        "updated (6)",
        "all (24)",
    ]
    assert by_category.loc["oracle"].tolist() == [1, 1, 1, 1, 1]
    assert "retrieval on development corpora" in result._repr_html_()
    # each question's row says where its answer sits (corrections: some in user messages)
    positions = result.per_query.groupby("category_name")["position"].agg(set)
    assert positions["start"] == {"start"} and positions["end"] == {"end"}
    assert "user message" in positions["updated"]
    assert len(result.per_query) == 5 * 24
    # loading again stores nothing new, and the store's settings are untouched
    before = memory.store.events.ids(namespace="tech-chat/ledger")
    assert len(before) == 60
    load_corpus(corpus, memory)
    assert memory.store.events.ids(namespace="tech-chat/ledger") == before
    assert memory.settings.profile == "hybrid"
    memory.close()


def test_cli_eval_corpora(capsys, monkeypatch) -> None:
    monkeypatch.delenv("NBMEMORY_LOCOMO_PATH", raising=False)
    monkeypatch.setitem(
        CORPORA,
        "tech-chat",
        (lambda path, seed: tech_chat(seed, projects=1), *CORPORA["tech-chat"][1:]),
    )
    assert main(["eval", "corpora", "--by-category", "--embedder", "hash", "--k", "3,5"]) == 0
    out = capsys.readouterr().out
    assert "tech-chat: 1 conversation(s), 60 messages, 24 questions" in out
    assert "left out locomo, locomo-long, locomo-plain: set NBMEMORY_LOCOMO_PATH" in out
    for ranking in BASELINES:
        assert ranking in out
    assert "recall@3" in out and "hit@5" in out and "updated (6)" in out
    assert main(["eval", "corpora", "--corpus", "nope", "--embedder", "hash"]) == 1
    assert "unknown corpus nope" in capsys.readouterr().err
    # a LoCoMo corpus asked for without the data is one clear error
    assert main(["eval", "corpora", "--corpus", "locomo", "--embedder", "hash"]) == 1
    assert "NBMEMORY_LOCOMO_PATH" in capsys.readouterr().err


def test_the_table_with_the_real_model(real_embedder) -> None:
    """The per-corpus table computes with all-MiniLM-L6-v2 on a slice of one generated
    project (its first four sessions: long messages take the model ~0.2-0.6 s each)."""
    (chat,) = tech_chat(0, projects=1)
    turns = chat.turns[chat.turns["session"] <= 4].reset_index(drop=True)
    kept = set(turns["dia_id"])
    questions = chat.questions[chat.questions["evidence"].map(lambda e: set(e) <= kept)]
    chat = LocomoConversation(chat.conversation_id, chat.speakers, turns, questions)
    memory = Memory(":memory:", embedder=real_embedder, background_consolidation=False)
    corpus = Corpus("tech-chat", "a slice", [chat], dict(CATEGORY_NAMES))
    result = evaluate_corpora(memory, [corpus], k=(5, 10))
    table = result.table.loc["tech-chat"]
    assert list(table.index) == list(BASELINES)
    assert (table["questions"] == len(questions)).all() and len(questions) >= 8
    assert (table["messages"] == 24).all()
    assert table[["recall@5", "recall@10", "MRR", "hit@10"]].stack().between(0, 1).all()
    # cosine finds some evidence among 24 long messages, but not all of it
    assert 0 < table.loc["cosine", "recall@10"] < 1
    memory.close()
