"""Shared fixtures.

Unit tests use the deterministic offline embedder (``embedder="hash"``).  Tests
marked ``real_model`` / ``locomo`` need ``$NBMEMORY_MODEL_PATH`` /
``$NBMEMORY_LOCOMO_PATH`` (``.ci/run`` sets both); elsewhere they skip with the
reason, and under CI (``$CI`` set) a missing one is a failure, never a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nbmemory import Memory
from nbmemory.config import ENV_MODEL_PATH
from nbmemory.datasets import ENV_LOCOMO_PATH


def _need(env: str, what: str) -> str:
    value = os.environ.get(env)
    if value and Path(value).exists():
        return value
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI: set {env}")
    pytest.skip(f"{what} not available: set {env} to run this test")


@pytest.fixture(scope="session")
def model_path() -> str:
    return _need(ENV_MODEL_PATH, "the all-MiniLM-L6-v2 model")


@pytest.fixture(scope="session")
def locomo_dir() -> Path:
    return Path(_need(ENV_LOCOMO_PATH, "the LoCoMo data"))


@pytest.fixture(scope="session")
def real_embedder(model_path: str):
    """One loaded fastembed model shared by every test that needs it."""
    from nbmemory.embeddings import FastEmbedEmbedder

    embedder = FastEmbedEmbedder(model_path=model_path)
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    return str(tmp_path / "agent.duckdb")


@pytest.fixture
def mem(store_path: str):
    """A file-backed store with the offline embedder."""
    memory = Memory(store_path, embedder="hash")
    yield memory
    memory.close()


# -- research toolkit (issue 4): LoCoMo stores shared across test files ---------------------
TINY_LOCOMO = {
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Alice", "dia_id": "D1:1", "text": "I adopted a puppy named Rex"},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Rex is a lovely name for a puppy"},
            {"speaker": "Alice", "dia_id": "D1:3", "text": "My sister lives in Lisbon"},
        ],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "I started painting watercolours"},
            {"speaker": "Alice", "dia_id": "D2:2", "text": "Lisbon was sunny when I visited"},
            {"speaker": "Bob", "dia_id": "D2:3", "text": "See you next week"},
        ],
    },
    "qa": [
        {
            "question": "What is the name of Alice's puppy?",
            "answer": "Rex",
            "evidence": ["D1:1"],
            "category": 1,
        },
        {
            "question": "Where does Alice's sister live?",
            "answer": "Lisbon",
            "evidence": ["D1:3", "D2:2"],
            "category": 2,
        },
        {
            "question": "What did Bob start painting?",
            "answer": "watercolours",
            "evidence": ["D2:1"],
            "category": 4,
        },
        {
            "question": "What is Bob's cat called?",
            "adversarial_answer": "none",
            "evidence": [],
            "category": 5,
        },
    ],
}


@pytest.fixture(scope="session")
def tiny_locomo_path(tmp_path_factory) -> Path:
    """A six-turn LoCoMo-format conversation with three answerable questions."""
    import json

    path = tmp_path_factory.mktemp("locomo") / "conv-tiny.json"
    path.write_text(json.dumps(TINY_LOCOMO))
    return path


@pytest.fixture(scope="session")
def locomo_conv26(real_embedder, locomo_dir):
    """LoCoMo conv-26 loaded once (real model, in-memory store): ``(memory, loaded)``.

    The store has seed 000's ``spec`` profile (cosine relevance > 0.65): the
    research tests measure the spec's thresholds.  Shared by every test file that
    needs it: tests may read and configure it but must put back what they change.
    """
    from nbmemory.datasets import load_locomo

    memory = Memory(":memory:", embedder=real_embedder, profile="spec")
    loaded = load_locomo(locomo_dir / "conv-26.json", memory)
    yield memory, loaded
    memory.close()
