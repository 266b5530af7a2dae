"""``nbmemory demo``: remember a short conversation, then show what an agent would recall."""

from __future__ import annotations

import argparse

from ..retrieval.embedders import resolve_embedder
from .state import check_model
from .stores import check_shared, opened, store_path

DEMO_CONVERSATION = [
    ("user", "Hi! My name is John and I love TypeScript.", None),
    ("assistant", "Nice to meet you, John! TypeScript is a great choice.", None),
    ("user", "Our project budget is $50k and the deadline is March 3rd.", 0.9),
    ("assistant", "Noted: budget $50k, deadline March 3rd.", None),
    ("tool", "calendar.create(title='Project deadline', date='2025-03-03') -> ok", None),
    ("user", "I prefer short answers with code examples.", 0.85),
    ("system", "You are a helpful coding assistant.", None),
]


def cmd_demo(args: argparse.Namespace) -> int:
    """Remember a short conversation, then show what the agent would recall.

    The demo's events have fixed ids, so running it again on the same file adds
    nothing: it says so and shows the same context.  The model is loaded before the
    store is opened: without one the demo fails and leaves no store behind.
    """
    path = store_path(args, ":memory:")
    check_shared(args, path)  # bad usage is said before the model loads
    embedder = resolve_embedder(args.embedder)
    check_model(embedder)
    with opened(args, path, embedder=embedder) as mem:
        rows = [
            {"id": f"demo-{i}", "session_id": "demo", "role": role, "content": text,
             "importance": importance}
            for i, (role, text, importance) in enumerate(DEMO_CONVERSATION, start=1)
        ]  # fmt: skip
        present = set(mem.events(session_id="demo")["id"])
        new = [row for row in rows if row["id"] not in present]
        if new:
            mem.add_events(new)
        mem.flush()
        print(f"store: {path}   model: {mem.model_name}")
        if new:
            print(f"remembered {len(new)} events in session 'demo'\n")
        else:
            print("the demo conversation is already in this store: nothing added\n")
        question = args.question
        print(f"search({question!r}):")
        hits = mem.search(question, limit=3)
        for row in hits.itertuples():
            print(f"  {row.similarity:.3f}  {row.role:<9} {row.content}")
        context = mem.get_context("demo", question)
        print(f"\nget_context('demo', {question!r}):")
        frame = context.to_frame()
        for row in frame.itertuples():
            sim = "" if row.similarity != row.similarity else f" sim={row.similarity:.3f}"
            print(f"  #{row.rank} [{row.strategies}]{sim} imp={row.importance:.2f}  {row.content}")
        if not context.by_strategy("relevance") and len(hits):
            print(
                f"  (relevance found nothing above {mem.settings.relevance_threshold}: the best"
                f" memory scored {hits['similarity'].iloc[0]:.3f}; tune the threshold with"
                " nbmemory's research toolkit)"
            )
        prompt = context.to_prompt()
        print("\nprompt for the agent:\n" + prompt)
        print(f"\n({prompt.report()})")
    return 0
