"""Batches by padded tokens, the trained length, and the hash embedder's window."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nbmemory.errors import InvalidInput
from nbmemory.retrieval import CallableEmbedder, HashEmbedder
from nbmemory.retrieval.model_pool import token_batches, trained_length


def test_every_row_is_in_exactly_one_batch_and_no_batch_exceeds_the_budget() -> None:
    rng = np.random.default_rng(7)
    lengths = [int(x) for x in rng.integers(3, 257, size=300)]
    batches = token_batches(lengths, 1024)
    assert sorted(i for batch in batches for i in batch) == list(range(300))
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= 1024


def test_similar_lengths_go_together() -> None:
    lengths = [200, 5, 200, 5, 200, 5]
    batches = token_batches(lengths, 600)
    assert [sorted(b) for b in batches] == [[1, 3, 5], [0, 2, 4]]


def test_a_row_longer_than_the_budget_is_a_batch_of_its_own() -> None:
    assert token_batches([500, 10, 10], 100) == [[1, 2], [0]]
    assert token_batches([], 100) == []


def test_the_trained_length_comes_from_the_folder_then_the_table(tmp_path) -> None:
    assert trained_length(tmp_path, "sentence-transformers/all-MiniLM-L6-v2") == 256
    assert trained_length(None, "all-MiniLM-L6-v2") == 256
    assert trained_length(tmp_path, "some/other-model") is None
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    assert trained_length(tmp_path, "sentence-transformers/all-MiniLM-L6-v2") == 128


def test_the_hash_embedder_reads_only_its_first_max_tokens_tokens() -> None:
    embedder = HashEmbedder(max_tokens=10)
    words = [f"w{i}" for i in range(30)]
    text = " ".join(words)
    spans = embedder.token_spans(text)
    assert [text[a:b] for a, b in spans] == words
    cut = text[: spans[9][1]]
    full, head, longer = embedder.embed([text, cut, text[: spans[10][1]]])
    np.testing.assert_allclose(full, head)
    assert not np.allclose(full, HashEmbedder(max_tokens=None).embed([text])[0])
    np.testing.assert_allclose(full, longer)  # the 11th token is not read either
    assert embedder.count_tokens([text, "a, b."]) == [30, 4]
    assert HashEmbedder().max_tokens == 256


def test_hash_token_spans_split_punctuation_and_map_back_to_the_text() -> None:
    text = "def f(x):\n    return x['key'] + 1  # café"
    spans = HashEmbedder().token_spans(text)
    pieces = [text[a:b] for a, b in spans]
    assert pieces[:6] == ["def", "f", "(", "x", ")", ":"]
    assert "café" in pieces
    assert all(piece.strip() == piece and piece for piece in pieces)


def test_hash_embedder_refuses_a_window_below_one() -> None:
    with pytest.raises(InvalidInput, match="max_tokens"):
        HashEmbedder(max_tokens=0)


def test_a_callable_embedder_says_its_window_only_when_the_function_does() -> None:
    def fn(texts):
        return np.ones((len(texts), 4))

    assert CallableEmbedder(fn).max_tokens is None
    fn.max_tokens = 77  # type: ignore[attr-defined]
    assert CallableEmbedder(fn).max_tokens == 77
