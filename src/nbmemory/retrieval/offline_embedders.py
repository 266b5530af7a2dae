"""The embedders that need no model: hashed words, or a function of yours.

* :class:`HashEmbedder` — deterministic, offline: hashed words and character
  trigrams, reading the first ``max_tokens`` tokens of a text as the model reads
  its first word-pieces.  For unit tests and air-gapped smoke runs.
* :class:`CallableEmbedder` — any ``list[str] -> array`` function you pass.

Both are re-exported by :mod:`nbmemory.retrieval.embedders`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import EmbedderError, InvalidInput

_WORD_RE = re.compile(r"\w+", re.UNICODE)
#: The hash embedder's word-pieces: words and single punctuation marks.
_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class HashEmbedder:
    """A deterministic bag of hashed words and character trigrams, L2-normalised.

    Texts sharing words come out similar, so tests of ranking behave like a real
    model on easy cases.  The same text gives the same vector in every process.
    Like the model it stands in for, it reads only the first ``max_tokens`` tokens
    of a text (words and punctuation marks, :meth:`token_spans`; None: all).
    """

    def __init__(self, dim: int = 384, *, max_tokens: int | None = 256) -> None:
        if dim < 8:
            raise InvalidInput("HashEmbedder dim must be at least 8")
        if max_tokens is not None and (isinstance(max_tokens, bool) or max_tokens < 1):
            raise InvalidInput(f"HashEmbedder max_tokens must be >= 1 or None, got {max_tokens!r}")
        self.dim = dim
        self.max_tokens = max_tokens
        self.name = f"nbmemory/hash-{dim}"

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character span of each token of ``text``: a word or one punctuation mark."""
        return [match.span() for match in _TOKEN_RE.finditer(text)]

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text (uncut)."""
        return [sum(1 for _ in _TOKEN_RE.finditer(text)) for text in texts]

    def _features(self, text: str) -> list[tuple[str, float]]:
        if self.max_tokens is not None:
            for count, match in enumerate(_TOKEN_RE.finditer(text), 1):
                if count == self.max_tokens:
                    text = text[: match.end()]
                    break
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
        #: Tokens of a text the function reads, when it says (``fn.max_tokens``).
        self.max_tokens: int | None = getattr(fn, "max_tokens", None)
        spans = getattr(fn, "token_spans", None)
        if callable(spans):
            self.token_spans = spans

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
