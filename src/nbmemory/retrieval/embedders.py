"""Embedders: the model behind relevance.

Three kinds, one protocol (``name``, ``dim``, ``embed(list[str]) -> float32 array``):

* :class:`FastEmbedEmbedder` — ``sentence-transformers/all-MiniLM-L6-v2`` through
  fastembed, the spec's model and the default.  ``$NBMEMORY_MODEL_PATH`` points it
  at a local copy; otherwise fastembed's own cache and download are used.
* :class:`HashEmbedder` — deterministic, offline, no model: hashed words and
  character trigrams.  For unit tests and air-gapped smoke runs; never picked
  silently (ask for it with ``embedder="hash"``).
* :class:`CallableEmbedder` — any ``list[str] -> array`` function you pass.

The background :class:`~nbmemory.retrieval.worker.EmbeddingWorker` runs them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..config import DEFAULT_MODEL, ENV_MODEL_PATH
from ..errors import EmbedderError, InvalidInput

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """What nbmemory needs from a model: a stable name, a dimension, and ``embed``."""

    name: str

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """One float32 row per text."""
        ...


class FastEmbedEmbedder:
    """fastembed's ONNX runtime; the model loads on first use (not at construction)."""

    def __init__(self, model_name: str = DEFAULT_MODEL, *, model_path: str | None = None) -> None:
        self.name = model_name
        self.model_path = model_path if model_path is not None else os.environ.get(ENV_MODEL_PATH)
        self._model: Any = None
        self._dim: int | None = None
        self._load_lock = threading.Lock()

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is not None:
                return self._model
            try:
                from fastembed import TextEmbedding
            except ImportError as exc:  # pragma: no cover - fastembed is a dependency
                raise EmbedderError(
                    "fastembed is not installed: pip install fastembed, "
                    'or use Memory(..., embedder="hash") for an offline test model'
                ) from exc
            kwargs: dict[str, Any] = {"model_name": self.name}
            if self.model_path:
                if not os.path.isdir(self.model_path):
                    raise EmbedderError(
                        f"{ENV_MODEL_PATH}={self.model_path} is not a directory. Point it at a "
                        "folder holding model.onnx and tokenizer.json, or unset it to let "
                        "fastembed download the model."
                    )
                kwargs["specific_model_path"] = self.model_path
            try:
                self._model = TextEmbedding(**kwargs)
            except Exception as exc:
                where = (
                    f"from {self.model_path}"
                    if self.model_path
                    else "through fastembed's download (is the network reachable?)"
                )
                raise EmbedderError(
                    f"could not load the embedding model {self.name} {where}: {exc}. "
                    f"Set {ENV_MODEL_PATH} to a local copy of the model, or pass "
                    'embedder="hash" for an offline test embedder.'
                ) from exc
            return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        vectors = np.asarray(list(model.embed(list(texts), batch_size=64)), dtype=np.float32)
        if vectors.ndim != 2:
            vectors = vectors.reshape(len(texts), -1)
        if self._dim is None and len(vectors):
            self._dim = int(vectors.shape[1])
        return vectors

    def __repr__(self) -> str:
        return f"FastEmbedEmbedder({self.name!r})"


_WORD_RE = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """A deterministic bag of hashed words and character trigrams, L2-normalised.

    Texts sharing words come out similar, so tests of ranking behave like a real
    model on easy cases.  The same text gives the same vector in every process.
    """

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise InvalidInput("HashEmbedder dim must be at least 8")
        self.dim = dim
        self.name = f"nbmemory/hash-{dim}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = [w.lower() for w in _WORD_RE.findall(text)]
        features = [(f"w:{w}", 1.0) for w in words]
        for w in words:
            padded = f"#{w}#"
            features += [(f"c:{padded[i : i + 3]}", 0.25) for i in range(len(padded) - 2)]
        return features

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text):
                digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8)
                value = int.from_bytes(digest.digest(), "little")
                index = value % self.dim
                sign = 1.0 if (value >> 32) & 1 else -1.0
                out[row, index] += sign * weight
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
            else:  # no word at all: a fixed unit vector, so the row is still comparable
                out[row, 0] = 1.0
        return out

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"


class CallableEmbedder:
    """Wraps ``fn(list[str]) -> array-like``; the dimension is learnt on first call."""

    def __init__(self, fn: Callable[[list[str]], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name: str = str(
            name or getattr(fn, "name", None) or getattr(fn, "__name__", "callable")
        )
        self._dim: int | None = getattr(fn, "dim", None)

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.fn(list(texts)), dtype=np.float32)
        if vectors.ndim == 1 and len(texts) == 1:
            vectors = vectors.reshape(1, -1)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbedderError(
                f"embedder {self.name!r} returned shape {vectors.shape} for {len(texts)} texts; "
                "it must return one vector per text"
            )
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        return vectors

    def __repr__(self) -> str:
        return f"CallableEmbedder({self.name!r})"


def resolve_embedder(spec: Any = None) -> Embedder:
    """An :class:`Embedder` from ``None`` (the default model), a name, or an object.

    Names: ``"fastembed"`` or any fastembed model name (``"fastembed:<model>"`` too),
    and ``"hash"`` / ``"hash:<dim>"`` for the offline test embedder.
    """
    if spec is None:
        return FastEmbedEmbedder(DEFAULT_MODEL)
    if isinstance(spec, str):
        if spec in ("fastembed", "default"):
            return FastEmbedEmbedder(DEFAULT_MODEL)
        if spec == "hash" or spec.startswith("hash:"):
            _, _, dim = spec.partition(":")
            return HashEmbedder(int(dim) if dim else 384)
        if spec.startswith("nbmemory/hash-"):
            return HashEmbedder(int(spec.rsplit("-", 1)[1]))
        return FastEmbedEmbedder(spec.removeprefix("fastembed:"))
    if isinstance(spec, Embedder) or (hasattr(spec, "embed") and hasattr(spec, "name")):
        return spec
    if callable(spec):
        return CallableEmbedder(spec)
    raise InvalidInput(
        f"embedder must be None, a model name, an Embedder or a callable; got {type(spec).__name__}"
    )


def check_vectors(vectors: Any, count: int, dim: int | None) -> tuple[np.ndarray, dict[int, str]]:
    """Validate a batch: returns the float32 matrix and {row: error} for bad rows."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != count:
        raise EmbedderError(f"expected {count} vectors, got an array of shape {array.shape}")
    errors: dict[int, str] = {}
    if dim is not None and array.shape[1] != dim:
        raise EmbedderError(f"expected {dim}-dimensional vectors, got {array.shape[1]}")
    finite = np.isfinite(array).all(axis=1)
    norms = np.linalg.norm(np.where(np.isfinite(array), array, 0).astype(np.float64), axis=1)
    for row in np.flatnonzero(~finite):
        errors[int(row)] = "embedding contains NaN or infinite values"
    for row in np.flatnonzero(finite & (norms == 0)):
        errors[int(row)] = "embedding is the zero vector"
    return array, errors
