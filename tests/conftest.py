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
