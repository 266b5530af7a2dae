"""Embedders: the model behind relevance.

Three kinds, one protocol (``name``, ``dim``, ``embed(list[str]) -> float32 array``):

* :class:`FastEmbedEmbedder` — ``sentence-transformers/all-MiniLM-L6-v2`` through
  fastembed, the spec's model and the default.  ``$NBMEMORY_MODEL_PATH`` points it
  at a local copy; otherwise fastembed's cache, then its download when the hub
  answers a quick check.  A model that cannot load raises
  :class:`ModelUnavailable` within seconds, and keeps raising it at once (the
  failure is remembered) until the model path or the cache folder changes.
* :class:`HashEmbedder` — deterministic, offline, no model: hashed words and
  character trigrams.  For unit tests and air-gapped smoke runs; never picked
  silently (ask for it with ``embedder="hash"``).
* :class:`CallableEmbedder` — any ``list[str] -> array`` function you pass.

The background :class:`~nbmemory.retrieval.worker.EmbeddingWorker` runs them.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import os
import re
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..config import DEFAULT_MODEL, ENV_MODEL_PATH
from ..errors import EmbedderError, InvalidInput, ModelUnavailable

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


#: The hub fastembed downloads from (``$HF_ENDPOINT`` replaces it, as in huggingface_hub).
DEFAULT_HUB = "https://huggingface.co"
#: Seconds the quick check of the hub waits for a connection before calling it unreachable.
HUB_CHECK_TIMEOUT = 2.5


#: Held while ONNX Runtime's session options are swapped for a model load.
_SESSION_OPTIONS_LOCK = threading.Lock()


@contextlib.contextmanager
def _threads_that_sleep() -> Iterator[None]:
    """Sessions created inside the block do not spin their threads between runs.

    By default ONNX Runtime's worker threads keep spinning for a while after each
    run, ready for the next one.  Here the model runs in the background while the
    caller writes to DuckDB: on two cores the spinning threads took that CPU and
    slowed ``add_event`` markedly, for no gain in texts/s
    (``benchmarks/bench_ingest.py`` times both; ``docs/performance.md``, "Ingest",
    has the figures before and after).  fastembed takes no option for it, so the
    session options class it instantiates is swapped for the length of the load.
    """
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - a fastembed dependency
        yield
        return
    original = ort.SessionOptions

    class SleepingThreads(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self.add_session_config_entry("session.inter_op.allow_spinning", "0")

    with _SESSION_OPTIONS_LOCK:
        ort.SessionOptions = SleepingThreads
        try:
            yield
        finally:
            ort.SessionOptions = original


def model_unavailable(exc: BaseException | None) -> ModelUnavailable | None:
    """The :class:`ModelUnavailable` behind ``exc`` (itself or a cause), if any."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ModelUnavailable):
            return exc
        exc = exc.__cause__
        seen += 1
    return None


#: (model, model path, fastembed cache) -> why the load failed; see ModelUnavailable.
_FAILED_LOADS: dict[tuple[str, str | None, str], str] = {}
_FAILED_LOCK = threading.Lock()


def forget_failed_loads() -> None:
    """Forget every remembered load failure: the next use of each model tries again."""
    with _FAILED_LOCK:
        _FAILED_LOADS.clear()


def fastembed_cache_dir() -> str:
    """The folder fastembed keeps downloaded models in (``$FASTEMBED_CACHE_PATH``)."""
    return os.environ.get("FASTEMBED_CACHE_PATH") or os.path.join(
        tempfile.gettempdir(), "fastembed_cache"
    )


def hub_unreachable(timeout: float = HUB_CHECK_TIMEOUT) -> str | None:
    """None when the model hub (or the proxy to it) accepts a connection, else why not.

    One TCP connection with a short timeout, name lookup included (it runs on a
    daemon thread, since a lookup ignores socket timeouts): seconds, not the minutes
    fastembed's retries take when the network is down.
    """
    import urllib.parse
    import urllib.request  # here, not at import: ssl and http, time no search needs

    endpoint = os.environ.get("HF_ENDPOINT") or DEFAULT_HUB
    parts = urllib.parse.urlsplit(endpoint)
    host = parts.hostname or "huggingface.co"
    try:
        port = parts.port or (80 if parts.scheme == "http" else 443)
    except ValueError:
        port = 443
    target, via = (host, port), host
    proxy = urllib.request.getproxies().get(parts.scheme or "https")
    if proxy and not urllib.request.proxy_bypass(host):
        proxy_parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if proxy_parts.hostname:
            target = (proxy_parts.hostname, proxy_parts.port or 8080)
            via = f"{host} (through the proxy {proxy_parts.hostname})"
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            socket.create_connection(target, timeout=timeout).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(f"{via} cannot be reached ({_one_line(exc.strerror or exc)})")

    thread = threading.Thread(target=probe, name="nbmemory-hub-check", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    if not outcome:
        return f"{via} did not answer within {timeout:g} s"
    return outcome[0]


class FastEmbedEmbedder:
    """fastembed's ONNX runtime; the model loads on first use (not at construction).

    ``model_path`` (default: ``$NBMEMORY_MODEL_PATH``, read when the model loads)
    names a local copy.  Without one, fastembed's cache is tried first, and the
    download only when the hub answers a quick check, so a machine without network
    learns in seconds that the model is missing (:class:`ModelUnavailable`).
    """

    def __init__(self, model_name: str = DEFAULT_MODEL, *, model_path: str | None = None) -> None:
        self.name = model_name
        self._model_path = model_path
        self._model: Any = None
        self._dim: int | None = None
        self._load_lock = threading.Lock()
        self._loading = False

    @property
    def model_path(self) -> str | None:
        """The local copy: the one given, else ``$NBMEMORY_MODEL_PATH`` as it is now."""
        if self._model_path is not None:
            return self._model_path
        return os.environ.get(ENV_MODEL_PATH) or None

    @model_path.setter
    def model_path(self, value: str | None) -> None:
        self._model_path = value

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def _key(self) -> tuple[str, str | None, str]:
        return (self.name, self.model_path, fastembed_cache_dir())

    @property
    def load_state(self) -> str:
        """``"ok (384-d)"``, ``"loading"``, ``"not loaded yet"`` or why it cannot load.

        Never waits for the model (``%memory status`` shows it while a load runs).
        """
        if self._model is not None:
            return f"ok ({self._dim}-d)" if self._dim else "ok"
        with _FAILED_LOCK:
            reason = _FAILED_LOADS.get(self._key())
        if reason is not None:
            return f"cannot load: {reason}"
        return "loading" if self._loading else "not loaded yet"

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is not None:
                return self._model
            key = self._key()
            with _FAILED_LOCK:
                reason = _FAILED_LOADS.get(key)
            if reason is not None:  # remembered: fail at once, nothing changed since
                raise ModelUnavailable(self.name, reason)
            self._loading = True
            try:
                with _threads_that_sleep():
                    self._model = self._open(key[1], key[2])
            except ModelUnavailable as exc:
                with _FAILED_LOCK:
                    _FAILED_LOADS[key] = exc.reason
                raise
            finally:
                self._loading = False
            return self._model

    def _open(self, model_path: str | None, cache_dir: str) -> Any:
        """Load the model: from ``model_path``, else fastembed's cache, else the hub."""
        if model_path:
            if not os.path.isdir(model_path):
                named = (
                    f"{ENV_MODEL_PATH}={model_path}"
                    if self._model_path is None
                    else f"model_path={model_path} (used instead of {ENV_MODEL_PATH})"
                )
                raise ModelUnavailable(self.name, f"{named} is not a directory")
            try:
                return self._text_embedding()(model_name=self.name, specific_model_path=model_path)
            except ModelUnavailable:
                raise
            except Exception as exc:
                raise ModelUnavailable(
                    self.name, f"loading it from {model_path} failed: {_describe(exc)}"
                ) from exc
        missing = f"it is not in fastembed's cache ({cache_dir})"
        if not _is_empty_folder(cache_dir):  # (an empty one cannot hold it: no need to look)
            try:
                with _quiet_fastembed():  # a miss is not an error yet
                    return self._text_embedding()(model_name=self.name, local_files_only=True)
            except ModelUnavailable:
                raise
            except Exception as exc:
                if "not supported" in str(exc):  # a name fastembed does not know
                    raise ModelUnavailable(self.name, _describe(exc)) from exc
        if os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "TRUE", "YES", "ON"}:
            raise ModelUnavailable(
                self.name, f"{missing} and HF_HUB_OFFLINE forbids downloading it"
            )
        unreachable = hub_unreachable()
        if unreachable is not None:
            raise ModelUnavailable(self.name, f"{missing} and {unreachable}")
        log.info("downloading the embedding model %s into %s", self.name, cache_dir)
        try:
            return self._text_embedding()(model_name=self.name)
        except ModelUnavailable:
            raise
        except Exception as exc:
            raise ModelUnavailable(
                self.name, f"{missing} and downloading it failed: {_describe(exc)}"
            ) from exc

    def _text_embedding(self) -> Any:
        """fastembed's ``TextEmbedding`` class (imported on first load: it is slow)."""
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:  # pragma: no cover - fastembed is a dependency
            raise ModelUnavailable(
                self.name, "fastembed is not installed (pip install fastembed)"
            ) from exc
        return TextEmbedding

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


def model_state(embedder: Any, unavailable: ModelUnavailable | None = None) -> str:
    """How ``embedder``'s model is doing, without waiting for it: ``"ok (384-d)"``,
    ``"loading"``, ``"not loaded yet"`` or ``"cannot load: <why>"``.

    ``unavailable`` is what the worker last got from an embedder that cannot say
    itself (one of your own raising :class:`ModelUnavailable`).
    """
    state = getattr(embedder, "load_state", None)
    if isinstance(state, str):
        return state
    if unavailable is not None:
        return f"cannot load: {unavailable.reason}"
    dim = inspect.getattr_static(embedder, "dim", None)
    if isinstance(dim, property):  # learnt on first use: look, never embed
        dim = getattr(embedder, "_dim", None)
    return f"ok ({dim}-d)" if isinstance(dim, int) and dim else "not loaded yet"


def _has_static(obj: Any, name: str) -> bool:
    """``hasattr`` without running a property."""
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def _is_empty_folder(path: str) -> bool:
    """True when ``path`` is missing or holds nothing (so no model can be cached there)."""
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except FileNotFoundError:
        return True
    except OSError:  # unreadable: let fastembed look and say why
        return False


def _one_line(text: object, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _describe(exc: BaseException) -> str:
    return _one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


@contextlib.contextmanager
def _quiet_fastembed() -> Iterator[None]:
    """Silence fastembed's log while it looks in its cache: a miss is not an error yet."""
    try:
        from loguru import logger
    except ImportError:  # pragma: no cover - fastembed depends on loguru
        yield
        return
    logger.disable("fastembed")
    try:
        yield
    finally:
        logger.enable("fastembed")


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
    # Looked up statically: ``isinstance(spec, Embedder)`` would read ``dim``, which
    # loads a fastembed model (seconds, or a failure) before the store even opens.
    if _has_static(spec, "embed") and _has_static(spec, "name"):
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
