"""The engine on real conversations (LoCoMo) with the real model."""

from __future__ import annotations

from nbmemory.research.datasets import load_locomo, parse_locomo_datetime, read_locomo


def test_parse_locomo_datetime():
    assert parse_locomo_datetime("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00"
    assert parse_locomo_datetime("12:48 am on 1 February, 2023").hour == 0


def test_conv26_relevance_recall_at_10(locomo, locomo_dir):
    """Every turn an event, session dates as created_at; recall@10 of evidence >= 0.40."""
    path = locomo_dir / "conv-26.json"
    conversation = read_locomo(path)
    mem, loaded = locomo["conv-26"]
    stored = mem.events(namespace=loaded.namespace)
    assert len(stored) == len(conversation.turns)
    first = stored.iloc[0]
    assert first["session_id"] == "session_1"
    assert first["created_at"].isoformat() == "2023-05-08T13:56:00"
    assert mem.status()["pending"] == 0
    queries = loaded.queries()
    assert set(queries["category"]) <= {1, 2, 3, 4} and len(queries) >= 140
    recalls = []
    for row in queries.itertuples():
        hits = mem.search(row.question, limit=10, namespace=loaded.namespace)
        relevant = set(row.relevant_ids)
        recalls.append(len(relevant & set(hits["id"])) / len(relevant))
    recall = sum(recalls) / len(recalls)
    assert recall >= 0.40, f"relevance recall@10 = {recall:.3f}"
    # loading again stores nothing new
    load_locomo(path, mem)
    assert len(mem.events(namespace=loaded.namespace)) == len(conversation.turns)
