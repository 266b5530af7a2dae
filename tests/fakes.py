"""The test embedders, in one place: each imitates one way a model behaves.

All of them satisfy nbmemory's Embedder protocol (``name``, ``dim``, ``embed``).
Child processes started by the tests import them too (``sys.path`` gets this
folder first).
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from nbmemory.retrieval.embedders import HashEmbedder

TESTS_DIR = __file__.rsplit("/", 1)[0]


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting every text it is asked to embed."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self.texts.extend(texts)
        return super().embed(texts)


class SpyEmbedder:
    """Records every text that reaches the model; every vector is the same."""

    name = "spy-8"
    dim = 8

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        return np.ones((len(texts), 8), dtype=np.float32)


class GatedEmbedder:
    """Blocks in ``embed`` until the test opens the gate; counts calls."""

    name = "test/gated"
    dim = 384

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.inner = HashEmbedder(384)
        self.calls = 0
        #: how many texts each call got
        self.sizes: list[int] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.sizes.append(len(texts))
        self.entered.set()
        self.gate.wait()
        return self.inner.embed(texts)


class StuckEmbedder:
    """A model that never answers (a child process is killed while it waits)."""

    name = HashEmbedder(384).name
    dim = 384
    entered = threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        StuckEmbedder.entered.set()
        threading.Event().wait()
        raise AssertionError("unreachable")


class FlakyEmbedder:
    """Fails on texts containing a marker: raises, NaN, or the wrong dimension."""

    name = "test/flaky"
    dim = 384

    def __init__(self) -> None:
        self.inner = HashEmbedder(384)
        self.broken = True

    def embed(self, texts: list[str]):
        if self.broken and any("raise" in t for t in texts):
            raise RuntimeError("model exploded")
        out = self.inner.embed(texts)
        if not self.broken:
            return out
        rows = []
        for text, vec in zip(texts, out, strict=True):
            if "nan" in text:
                vec = np.full(384, np.nan, dtype=np.float32)
            rows.append(vec)
        if any("wrongdim" in t for t in texts):
            return [
                list(v) if "wrongdim" not in t else list(v[:10])
                for t, v in zip(texts, rows, strict=True)
            ]
        return np.stack(rows)


class SwitchableEmbedder:
    """The hash model, or a broken variant of it chosen by ``mode``."""

    name = "test/switchable"
    dim = 384

    def __init__(self) -> None:
        self.inner = HashEmbedder(384)
        self.mode = "ok"
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = self.inner.embed(texts)
        if self.mode == "ok":
            return out
        if self.mode == "dim":  # a different model behind the same name: 128-d for all
            return out[:, :128]
        if self.mode == "inf":
            out[:, 0] = np.inf
            return out
        if self.mode == "zero":
            return np.zeros_like(out)
        if self.mode == "short":  # one vector fewer than texts asked for
            return out[:-1]
        if self.mode == "raise":
            raise MemoryError("model ran out of memory")
        raise AssertionError(self.mode)


class RandomEmbedder:
    """Random (but fixed per text) unit vectors: no ties, no structure."""

    name = "test/random-32"
    dim = 32

    def embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode()).digest()[:8], "little")
            out.append(np.random.default_rng(seed).standard_normal(self.dim))
        return np.asarray(out, dtype=np.float32)
