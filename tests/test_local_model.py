"""A local copy of the spec's model runs on ONNX Runtime alone, with fastembed's vectors.

Importing fastembed keeps ~520 modules resident for the life of the process; a
model whose files are on disk does not need them (``nbmemory.retrieval.onnx_text``).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from child_process import child_env

from nbmemory.retrieval.embedders import FastEmbedEmbedder
from nbmemory.retrieval.onnx_text import LocalTextModel, runs_locally
from nbmemory.retrieval.onnx_text import lean_sessions as _lean_sessions

TEXTS = [
    "",
    "a",
    "The staging database password rotates every Thursday at 04:00.",
    "é ü 日本語 — emoji 🎉 and tabs\tand\nnew lines",
    "def plan(items):\n    return [x * 2 for x in items if x > 3]\n" * 40,  # past the window
]


def test_vectors_are_fastembeds(model_path: str) -> None:
    from fastembed import TextEmbedding

    with _lean_sessions():
        theirs = TextEmbedding(
            model_name="sentence-transformers/all-MiniLM-L6-v2", specific_model_path=model_path
        )
        ours = LocalTextModel(model_path)
    for model in (theirs, ours):
        model.model.tokenizer.enable_truncation(max_length=256)
    for batch in (1, 3, 16):
        a = np.array(list(theirs.embed(TEXTS, batch_size=batch)))
        b = np.array(list(ours.embed(TEXTS, batch_size=batch)))
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_allclose(b, a, atol=1e-6)


@pytest.mark.slow
def test_the_embedder_runs_a_local_copy_without_fastembed(model_path: str) -> None:
    import subprocess

    code = (
        "import sys\n"
        "from nbmemory.retrieval.embedders import FastEmbedEmbedder\n"
        f"e = FastEmbedEmbedder(model_path={model_path!r})\n"
        "print(e.embed(['hello there']).shape, 'fastembed' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True
    )
    assert out.stdout.split() == ["(1,", "384)", "False"], out.stderr


def test_another_model_or_an_incomplete_folder_goes_through_fastembed(
    model_path: str, tmp_path
) -> None:
    assert runs_locally("sentence-transformers/all-MiniLM-L6-v2", model_path)
    assert not runs_locally("BAAI/bge-small-en-v1.5", model_path)  # CLS-pooled: not ours
    (tmp_path / "tokenizer.json").write_text("{}")
    assert not runs_locally("sentence-transformers/all-MiniLM-L6-v2", str(tmp_path))


@pytest.mark.parametrize("texts", [["short"], TEXTS])
def test_the_embedder_gives_unit_vectors_in_order(model_path: str, texts: list[str]) -> None:
    embedder = FastEmbedEmbedder(model_path=model_path)
    try:
        vectors = embedder.embed(texts)
        one_by_one = np.vstack([embedder.embed([t]) for t in texts])
    finally:
        embedder.close()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)


def test_a_mixed_batch_gives_fastembeds_vectors_each_text_counted_unpadded(
    model_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Short and long texts in one call: each is measured by its own length (not the
    call's longest), batched with texts like it, and embedded as fastembed would."""
    from fastembed import TextEmbedding

    from nbmemory.retrieval import model_pool

    with _lean_sessions():
        theirs = TextEmbedding(
            model_name="sentence-transformers/all-MiniLM-L6-v2", specific_model_path=model_path
        )
    theirs.model.tokenizer.enable_truncation(max_length=256)
    texts = TEXTS * 3
    expected = np.array(list(theirs.embed(texts, batch_size=4)))
    embedder = FastEmbedEmbedder(model_path=model_path, batch_tokens=512)
    seen: list[list[int]] = []
    real = model_pool.token_batches

    def spy(lengths, budget):
        seen.append(list(lengths))
        return real(lengths, budget)

    monkeypatch.setattr(model_pool, "token_batches", spy)
    try:
        ours = embedder.embed(texts)
    finally:
        embedder.close()
    np.testing.assert_allclose(ours, expected, atol=1e-6)
    assert min(seen[0]) == 2 and max(seen[0]) == 256  # "" is [CLS] [SEP]; the code is cut


def _session_threads(embedder: FastEmbedEmbedder) -> int:
    runner = embedder._acquire().model.model  # LocalTextModel -> its ONNX runner
    return runner.model.get_session_options().intra_op_num_threads


def test_model_threads_sets_each_sessions_threads_and_keeps_the_vectors(
    model_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NBMEMORY_MODEL_THREADS=1: the session runs on one thread (a busy machine's
    choice: a fifth to a quarter less CPU for the same texts), and its vectors are the
    default session's, bit for bit."""
    monkeypatch.delenv("NBMEMORY_MODEL_THREADS", raising=False)
    default = FastEmbedEmbedder(model_path=model_path)
    default.embed(["loaded before the variable is set"])
    monkeypatch.setenv("NBMEMORY_MODEL_THREADS", "1")
    single = FastEmbedEmbedder(model_path=model_path)
    try:
        assert _session_threads(single) == 1 and single.footprint()["threads"] == 1
        assert _session_threads(default) == 0  # ONNX Runtime's choice: one per core
        assert default.footprint()["threads"] is None
        np.testing.assert_array_equal(single.embed(TEXTS * 4), default.embed(TEXTS * 4))
    finally:
        single.close()
        default.close()


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_a_bad_model_threads_is_one_line_and_not_remembered(
    model_path: str, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from nbmemory.errors import ModelUnavailable

    monkeypatch.setenv("NBMEMORY_MODEL_THREADS", value)
    embedder = FastEmbedEmbedder(model_path=model_path)
    try:
        with pytest.raises(ModelUnavailable, match="NBMEMORY_MODEL_THREADS=") as caught:
            embedder.embed(["hello"])
        message = str(caught.value)
        assert "\n" not in message and "unset it" in message
        assert "NBMEMORY_MODEL_PATH" not in message  # no local copy would help
        monkeypatch.setenv("NBMEMORY_MODEL_THREADS", "1")  # set right: the next call loads
        assert embedder.embed(["hello"]).shape == (1, 384)
    finally:
        embedder.close()
