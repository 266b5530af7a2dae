"""Long memories: passages, found by their best passage (issue 36).

A memory longer than the model's window is embedded as overlapping passages, one
row of ``event_vectors`` each; short memories keep one row.  A fact stated only
in the tail of a long message must be found by vector search and by the default
mode."""

from __future__ import annotations

import html
import random
import re

import numpy as np
import pandas as pd
import pytest

from nbmemory import Memory
from nbmemory.notebook.highlight import highlight_html
from nbmemory.notebook.widgets import MemoryExplorer
from nbmemory.retrieval.offline_embedders import HashEmbedder

#: (what the tail says, a question about it): one per long message.
TAIL_FACTS = [
    (
        "The staging database password rotates every Friday at noon.",
        "when does the staging password rotate",
    ),
    (
        "Our on-call pager escalates to Priya after fifteen minutes.",
        "who gets the pager escalation",
    ),
    (
        "The invoice archive moved to the bucket named ledger-cold.",
        "where is the invoice archive stored",
    ),
    (
        "Marco's cat is called Biscotti and hates the vacuum cleaner.",
        "what is the name of Marco's cat",
    ),
    (
        "The release train leaves on the second Tuesday of each month.",
        "when does the release train leave",
    ),
    (
        "Kiosk firmware 4.2 bricks the thermal printer on boot.",
        "which firmware breaks the thermal printer",
    ),
    (
        "The Lisbon office closes early on the eve of Saint Anthony.",
        "when does the Lisbon office close early",
    ),
    (
        "Grandma's lasagne recipe uses nutmeg in the bechamel.",
        "what spice goes in the lasagne bechamel",
    ),
    (
        "The quarterly budget review was moved to the rooftop room.",
        "where is the budget review held",
    ),
    (
        "The vaccine fridge alarm threshold is eight degrees.",
        "what temperature triggers the fridge alarm",
    ),
    ("Our mascot, a red panda, is named Ember.", "what is the mascot called"),
    ("The choir rehearses Vivaldi's Gloria on Wednesday evenings.", "what does the choir rehearse"),
    ("Tax documents for the boat are kept in the blue folder.", "where are the boat tax documents"),
    ("The telescope's mirror needs recoating before autumn.", "what does the telescope need"),
    ("Lena is allergic to hazelnuts and sesame.", "what is Lena allergic to"),
    (
        "The greenhouse sprinklers run at six in the morning.",
        "when do the greenhouse sprinklers run",
    ),
    (
        "The bakery's sourdough starter is fed with rye flour.",
        "what is the sourdough starter fed with",
    ),
    ("Warehouse B's loading dock door sticks in cold weather.", "which door sticks in the cold"),
    ("The team offsite will be held in a lighthouse in Brittany.", "where is the team offsite"),
    ("The chess club's trophy was won by Ayodele last spring.", "who won the chess trophy"),
]

_LOG = "2026-11-{day:02d} 10:{minute:02d}:{second:02d} INFO worker-{w} processed batch {b} in {ms} ms (queue={q})"
_CODE = "    def handle_{n}(self, request):\n        result = self.pipeline.run(request, retries={r})\n        return result.status == {s}"
_PROSE = [
    "We looked at the metrics again and the latency stayed within the budget for most of the day.",
    "The walkthrough went well overall, though a few comments about naming are still open.",
    "I refactored the parser so that it streams its input instead of reading it whole.",
    "After the migration the dashboards show the same numbers as the old reports.",
]


def long_message(index: int, tail: str, chars: int = 3000) -> str:
    """~``chars`` characters of prose, a log and code, then ``tail`` in the last 300."""
    rng = random.Random(index)
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < chars - 300:
        kind = rng.randrange(3)
        if kind == 0:
            parts.append(rng.choice(_PROSE))
        elif kind == 1:
            parts.append(
                _LOG.format(
                    day=rng.randrange(1, 29),
                    minute=rng.randrange(60),
                    second=rng.randrange(60),
                    w=rng.randrange(8),
                    b=rng.randrange(10_000),
                    ms=rng.randrange(900),
                    q=rng.randrange(50),
                )
            )
        else:
            parts.append(
                _CODE.format(n=rng.randrange(100), r=rng.randrange(5), s=rng.randrange(600))
            )
    text = "\n".join(parts) + "\n" + tail
    assert len(text) - text.rindex(tail) <= 300
    return text


def _vector_rows(mem: Memory) -> list[tuple]:
    rows: list[tuple] = mem.store.run(
        "SELECT id, passage, span_start, span_stop FROM event_vectors ORDER BY id, passage"
    )
    return rows


def _ingest(mem: Memory) -> list[str]:
    mem.add_events(
        [
            {"session_id": "s", "role": "assistant", "content": long_message(i, fact)}
            for i, (fact, _) in enumerate(TAIL_FACTS)
        ]
    )
    mem.flush()
    return [r[0] for r in mem.store.run("SELECT id FROM events ORDER BY seq")]


def _check_tail_facts(mem: Memory, ids: list[str], modes: tuple[str | None, ...]) -> None:
    missed = []
    for i, (_, question) in enumerate(TAIL_FACTS):
        for mode in modes:
            kwargs = {"mode": mode} if mode else {}
            found = mem.search(question, limit=3, **kwargs)["id"].tolist()
            if ids[i] not in found:
                missed.append((question, mode or "default"))
    assert not missed, missed


def test_short_memories_keep_one_vector_row_each(tmp_path):
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:
        mem.add_events(
            [{"session_id": "s", "role": "user", "content": f"short note {i}"} for i in range(50)]
        )
        mem.flush()
        rows = _vector_rows(mem)
        assert len(rows) == 50
        assert {r[1:] for r in rows} == {(None, None, None)}


def test_a_long_memory_is_stored_as_passages_covering_its_text(tmp_path):
    text = long_message(0, TAIL_FACTS[0][0])
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:
        event = mem.add_event("s", "assistant", text)
        mem.flush()
        rows = _vector_rows(mem)
        assert len(rows) > 3 and {r[0] for r in rows} == {event.id}
        assert [r[1] for r in rows] == list(range(len(rows)))
        assert rows[0][2] == 0 and rows[-1][3] == len(text)
        for before, after in zip(rows, rows[1:], strict=False):
            assert after[2] < before[3]  # overlapping: no character of the text unseen
        # deleted with its event
        mem.delete(event.id)
        assert _vector_rows(mem) == []


def test_a_new_text_replaces_every_passage(tmp_path):
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:
        event = mem.add_event("s", "assistant", long_message(1, TAIL_FACTS[1][0]))
        mem.flush()
        assert len(_vector_rows(mem)) > 1
        mem.update(event.id, content="now a short text")
        mem.flush()
        assert [r[1:] for r in _vector_rows(mem)] == [(None, None, None)]


def test_tail_facts_are_found_with_the_hash_embedder(tmp_path):
    # the hash embedder's bag of words drowns one sentence in a passage of log lines
    # (8 of 20 in vector mode): its passages serve the default mode, keywords the rest
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:
        ids = _ingest(mem)
        _check_tail_facts(mem, ids, (None,))
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:  # from the store again
        _check_tail_facts(mem, ids, (None,))


@pytest.mark.real_model
def test_tail_facts_are_found_with_the_real_model(tmp_path, real_embedder):
    with Memory(tmp_path / "m.duckdb", embedder=real_embedder) as mem:
        ids = _ingest(mem)
        _check_tail_facts(mem, ids, ("vector", None))


def test_results_say_which_passage_matched(tmp_path):
    fact, question = TAIL_FACTS[0]
    text = long_message(0, fact)
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:
        short = mem.add_event("s", "user", "the staging password is in the vault")
        long = mem.add_event("s", "assistant", text)
        mem.flush()
        for mode in ("vector", "hybrid", "keyword"):
            found = mem.search(question, limit=5, mode=mode).set_index("id")
            start, stop = found.loc[long.id, ["passage_start", "passage_stop"]]
            assert 0 < start < text.index(fact) < stop == len(text), mode
            assert found.loc[short.id, ["passage_start", "passage_stop"]].isna().all(), mode


def test_an_older_store_gets_its_long_memories_re_embedded_as_passages(tmp_path):
    from nbmemory.config import Settings

    path = tmp_path / "m.duckdb"
    texts = [long_message(i, fact) for i, (fact, _) in enumerate(TAIL_FACTS[:6])]
    # a window no text reaches: one whole-text vector each, as before passages
    # (an embedder that reads the whole text and declares no window of its own)
    whole = HashEmbedder(max_tokens=None)
    with Memory(path, embedder=whole, settings=Settings(passage_tokens=1_000_000)) as mem:
        mem.add_events([{"session_id": "s", "role": "assistant", "content": t} for t in texts])
        mem.add_event("s", "user", "a short one")
        # longer than the window in characters, not in words: looked at, left whole
        mem.add_event("s", "user", " ".join(f"word{i}" for i in range(100)))
        mem.flush()
        assert [r[1] for r in _vector_rows(mem)] == [None] * 8
        assert mem.status()["passages"] is None
    with Memory(path, embedder="hash", settings=Settings()) as mem:
        mem.flush()
        rows = _vector_rows(mem)
        by_event: dict[str, list] = {}
        for row in rows:
            by_event.setdefault(row[0], []).append(row[1])
        assert sorted(len(p) for p in by_event.values())[:2] == [1, 1]  # untouched
        assert all(p == list(range(len(p))) for p in by_event.values() if len(p) > 1)
        assert sum(len(p) > 1 for p in by_event.values()) == 6
        assert mem.status()["passages"] == "6 of 6 long memories re-embedded as passages"
        found = mem.search(TAIL_FACTS[0][1], limit=3, mode="vector")
        assert found["passage_start"].notna().all()
    with Memory(path, embedder="hash", settings=Settings()) as mem:  # nothing left to do
        mem.flush()  # (the medium text is looked at again, on the worker's thread)
        assert mem.status()["passages"] is None
        assert _vector_rows(mem) == rows


def test_recall_shows_the_matched_passage(ip):
    fact, question = TAIL_FACTS[0]
    text = long_message(0, fact)
    mem = ip.magics_manager.registry["MemoryMagics"].memory
    mem.add_event("s", "assistant", text)
    mem.add_event("s", "user", "the staging password is in the vault")
    frame = ip.run_line_magic("recall", f"{question} -k 2")
    passages = dict(zip(frame["content"], frame["passage"], strict=True))
    assert fact in passages[text] and len(passages[text]) < len(text)
    assert text.endswith(passages[text])
    assert pd.isna(passages["the staging password is in the vault"])


def test_get_context_says_which_passage_matched(tmp_path):
    fact, question = TAIL_FACTS[0]
    text = long_message(0, fact)
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:
        long = mem.add_event("s", "assistant", text)
        mem.flush()
        context = mem.get_context("other", question, relevance_threshold=0.0)
        (item,) = [i for i in context.items if i.id == long.id]
        assert item.passage is not None and item.passage[1] == len(text)
        assert item.passage[0] < text.index(fact)
        row = context.to_frame().set_index("id").loc[long.id]
        assert (row["passage_start"], row["passage_stop"]) == item.passage


def test_recall_html_marks_the_matched_passage_and_elides_the_rest(ip):
    fact, question = TAIL_FACTS[0]
    text = long_message(0, fact)
    mem = ip.magics_manager.registry["MemoryMagics"].memory
    mem.add_event("s", "assistant", text)
    mem.add_event("s", "user", "the staging password is in the vault")
    frame = ip.run_line_magic("recall", f"{question} -k 2")
    start, stop = dict(zip(frame["content"], frame.attrs["passage_spans"], strict=True))[text]
    page = frame._repr_html_()
    marked = re.findall(r"<mark>(.*?)</mark>", page, flags=re.S)
    # the long memory's passage, escaped, is what is marked; the short memory has no mark
    assert [html.unescape(m) for m in marked] == [text[start:stop]]
    assert fact in html.unescape(marked[0])
    assert "…" + html.escape(text[start - 60 : start]) + "<mark>" in page  # elided before
    assert html.escape(text[:40]) not in page  # the head of the long memory is left out
    assert "the staging password is in the vault" in page


def test_passage_html_escapes_the_memory_text():
    text = "x" * 500 + "<script>alert('p')</script> & <b>bold</b>" + "y" * 500
    start = text.index("<script>")
    page = highlight_html(text, start, start + len("<script>alert('p')</script>"))
    assert "<script>" not in page and "<b>" not in page
    assert "<mark>&lt;script&gt;alert(&#x27;p&#x27;)&lt;/script&gt;</mark>" in page
    assert page.startswith("…") and page.endswith("…")
    assert "&amp;" in page
    # no span: a long text is shortened, still escaped
    plain = highlight_html("<script>" * 40)
    assert "<script>" not in plain and plain.endswith("…")


def test_explorer_marks_where_its_text_filter_found_a_long_memory(tmp_path):
    fact = TAIL_FACTS[1][0]
    text = long_message(1, fact) + "\n<script>alert(1)</script>"
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:
        mem.add_event("s", "assistant", text)
        mem.add_event("s", "user", "a short note about nothing")
        mem.flush()
        explorer = MemoryExplorer(mem)
        explorer.text.value = "priya"
        assert len(explorer.frame) == 1
        page = explorer.table.value
        assert re.findall(r"<mark>(.*?)</mark>", page) == ["Priya"]
        assert "<script>" not in page and "&lt;script&gt;" in page
        assert html.escape(text[:40]) not in page  # elided around the match


def _orphan_vectors(mem: Memory) -> int:
    rows = mem.store.run(
        "SELECT count(*) FROM event_vectors WHERE id NOT IN (SELECT id FROM events)"
    )
    return int(rows[0][0])


def test_every_way_of_forgetting_takes_the_passages_and_purge_leaves_no_orphan(tmp_path):
    texts = [long_message(i, fact) for i, (fact, _) in enumerate(TAIL_FACTS[:7])]
    with Memory(tmp_path / "m.duckdb", embedder="hash", background_consolidation=False) as mem:
        mem.start_session("ana", session_id="ana-s")
        mem.start_session("bo", session_id="bo-s", namespace="team")
        gone = [
            mem.add_event("s", "assistant", texts[0]).id,  # delete
            mem.add_event("ana-s", "assistant", texts[1]).id,  # forget_user
            mem.add_event("closed", "assistant", texts[2]).id,  # delete_session with events
            mem.add_memory(texts[3]).id,  # clear_memories
            mem.add_memory(texts[4], namespace="team").id,  # a namespace's memories
            mem.add_event("bo-s", "assistant", texts[5], namespace="team").id,  # every namespace
        ]
        kept = mem.add_event("s", "assistant", texts[6]).id
        mem.flush()
        rows = _vector_rows(mem)
        per_event = {i: sum(r[0] == i for r in rows) for i in [*gone, kept]}
        assert min(per_event.values()) > 3, per_event
        assert mem.delete(gone[0]) == 1
        assert mem.forget_user("ana")["events"] == 1
        assert mem.delete_session("closed", events=True)["events"] == 1
        assert mem.clear_memories() == 1
        assert mem.clear_memories(namespace="team") == 1
        assert mem.forget_user("bo", all_namespaces=True)["events"] == 1
        assert {r[0] for r in _vector_rows(mem)} == {kept}
        assert _orphan_vectors(mem) == 0
        mem.purge()
        assert _orphan_vectors(mem) == 0
        after = _vector_rows(mem)
        assert len(after) == per_event[kept] and {r[0] for r in after} == {kept}
        found = mem.search(TAIL_FACTS[6][1], mode="vector", limit=1)
        assert found["id"].tolist() == [kept]  # the passages that stay still serve search


def _search_similarity(mem: Memory, question: str) -> dict[str, float]:
    found = mem.search(question, mode="vector", limit=50)
    return dict(zip(found["id"], found["similarity"], strict=True))


@pytest.mark.parametrize("budget", [None, 0.0001], ids=["index", "duckdb"])
def test_research_scores_a_long_memory_by_its_best_passage_as_search_does(tmp_path, budget):
    """The research toolkit (similarities, labelled sweeps, the tuner's histogram) reads
    the numbers search applies its thresholds to: a long memory by its best passage, not
    its first (the tail fact of a long message scored 0.092 there and 0.282 in search)."""
    from nbmemory.research.thresholds import threshold_sweep

    fact, question = TAIL_FACTS[0]
    with Memory(tmp_path / "m.duckdb", embedder="hash", vector_budget_mb=budget) as mem:
        short = mem.add_event("s", "user", "the staging server reboots on Sundays").id
        long = mem.add_event("s", "assistant", long_message(0, fact)).id
        mem.flush()
        sims = mem.research.similarities([question], relevant=[[long]]).set_index("id")
        searched = _search_similarity(mem, question)
        assert set(sims.index) == {short, long}
        for event_id in (short, long):
            assert sims.loc[event_id, "similarity"] == pytest.approx(searched[event_id], abs=1e-6)
        frame, matrix = mem.embeddings.vectors()
        first = matrix[(frame["id"] == long) & (frame["passage_start"] == 0)]
        query = mem.embeddings.embed_queries([question])[0]
        assert float((first @ query)[0]) < sims.loc[long, "similarity"] - 0.05
        # a threshold just under the search similarity still retrieves the evidence
        sweep = threshold_sweep(sims.reset_index(), [searched[long] - 0.01]).iloc[0]
        assert sweep["recall"] == 1.0


def test_embedding_vectors_are_the_stored_rows_with_their_passages(tmp_path):
    text = long_message(2, TAIL_FACTS[2][0])
    with Memory(tmp_path / "m.duckdb", embedder="hash") as mem:
        short = mem.add_event("s", "user", "a short note").id
        long = mem.add_event("s", "assistant", text).id
        mem.flush()
        frame, matrix = mem.embeddings.vectors()
        stored = _vector_rows(mem)
        assert len(frame) == matrix.shape[0] == len(stored) > 2
        assert list(frame.columns[-2:]) == ["passage_start", "passage_stop"]
        passages = frame[frame["id"] == long]
        spans = [tuple(r[2:]) for r in stored if r[0] == long]
        assert list(zip(passages["passage_start"], passages["passage_stop"], strict=True)) == spans
        assert (
            frame.loc[frame["id"] == short, ["passage_start", "passage_stop"]].isna().all(axis=None)
        )
        # the best row of each memory is the similarity research and search report
        query = mem.embeddings.embed_queries([TAIL_FACTS[2][1]])[0]
        best = pd.Series(matrix @ query, index=frame["id"]).groupby(level=0).max()
        sims = mem.research.similarities(TAIL_FACTS[2][1]).set_index("id")["similarity"]
        assert np.allclose(best[sims.index], sims, atol=1e-6)
