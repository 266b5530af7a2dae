"""Embedders: the model behind relevance.

Three kinds, one protocol (``name``, ``dim``, ``embed(list[str]) -> float32 array``):

* :class:`FastEmbedEmbedder` — ``sentence-transformers/all-MiniLM-L6-v2`` through
  fastembed, the spec's model and the default.  ``$NBMEMORY_MODEL_PATH`` points it
  at a local copy, which runs on ONNX Runtime directly, as fastembed would run it
  (:mod:`.onnx_text`); otherwise fastembed's cache, then its download when the hub
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
import inspect
import logging
import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..config import DEFAULT_BATCH_TOKENS, DEFAULT_MODEL, ENV_MODEL_PATH
from ..errors import EmbedderError, InvalidInput, ModelUnavailable
from . import model_pool, onnx_text
from .model_pool import SharedModel
from .offline_embedders import CallableEmbedder, HashEmbedder

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

    Embedders of the same model share one loaded copy in the process
    (:mod:`~nbmemory.retrieval.model_pool`); :meth:`close` lets go of it, and the
    last to let go frees it.  Texts are cut at the length the model was trained on
    (``max_tokens`` word-pieces: 254 for all-MiniLM-L6-v2, whose window of 256
    holds [CLS] and [SEP] too) and embedded in batches of similar length holding at
    most ``batch_tokens`` padded word-pieces, which bounds the memory a batch takes.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        *,
        model_path: str | None = None,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        window: int | None = None,
    ) -> None:
        self.name = model_name
        self._model_path = model_path
        #: Padded word-pieces per batch at most (``Settings.embed_batch_tokens``).
        self.batch_tokens = batch_tokens
        self._window = window
        self._shared: SharedModel | None = None
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
    def _model(self) -> Any:
        """The loaded fastembed model, or None (never loads)."""
        shared = self._shared
        return None if shared is None else shared.model

    @property
    def load_state(self) -> str:
        """``"ok (384-d, ...)"``, ``"loading"``, ``"not loaded yet"`` or why it cannot load.

        Once loaded it says the footprint too: how many embedders in this process
        share the model and what its load added to the resident memory.  Never
        waits for the model (``%memory status`` shows it while a load runs).
        """
        shared = self._shared
        if shared is not None:
            return "ok (" + ", ".join(_footprint_words(shared, self._dim)) + ")"
        with _FAILED_LOCK:
            reason = _FAILED_LOADS.get(self._key())
        if reason is not None:
            return f"cannot load: {reason}"
        return "loading" if self._loading else "not loaded yet"

    def footprint(self) -> dict[str, Any]:
        """What the model costs this process now (``Memory.status()["embedder"]``).

        ``loaded``; ``shared_by``: embedders in the process using this loaded copy;
        ``load_mb``: resident memory (MiB) the load added, measured around it;
        ``model_file_mb``: the ONNX file; ``max_tokens`` and ``batch_tokens``;
        ``threads``: the session's (``$NBMEMORY_MODEL_THREADS``; None: one per core).
        Running a batch takes more on top, bounded by ``batch_tokens``
        (``docs/performance.md``, "Memory").
        """
        shared = self._shared
        return {
            "model": self.name,
            "loaded": shared is not None,
            "shared_by": 0 if shared is None else shared.users,
            "load_mb": None if shared is None or shared.load_mb is None else round(shared.load_mb),
            "model_file_mb": None
            if shared is None or shared.file_mb is None
            else round(shared.file_mb, 1),
            "max_tokens": None if shared is None else shared.max_tokens,
            "batch_tokens": self.batch_tokens,
            "threads": None if shared is None else shared.threads,
        }

    def _load(self) -> Any:
        """The loaded fastembed ``TextEmbedding`` (loading or sharing it on first use)."""
        return self._acquire().model

    def _acquire(self) -> SharedModel:
        shared = self._shared
        if shared is not None:
            return shared
        with self._load_lock:
            if self._shared is not None:
                return self._shared
            key = self._key()
            try:  # a bad value is not remembered: set right, the next call loads
                threads = onnx_text.model_threads()
            except ValueError as exc:
                raise ModelUnavailable(self.name, str(exc), onnx_text.THREADS_ADVICE) from None
            with _FAILED_LOCK:
                reason = _FAILED_LOADS.get(key)
            if reason is not None:  # remembered: fail at once, nothing changed since
                raise ModelUnavailable(self.name, reason)
            self._loading = True
            try:
                self._shared = model_pool.acquire(
                    (*key, self._window, threads),
                    lambda: self._load_shared(key, self._window, threads),
                )
            except ModelUnavailable as exc:
                with _FAILED_LOCK:
                    _FAILED_LOADS[key] = exc.reason
                raise
            finally:
                self._loading = False
            return self._shared

    def _load_shared(
        self, key: tuple[str, str | None, str], window: int | None, threads: int | None = None
    ) -> SharedModel:
        before = model_pool.rss_mb()
        with onnx_text.lean_sessions(threads):
            model = self._open(key[1], key[2])
        inner = getattr(model, "model", None)
        model_dir = getattr(inner, "_model_dir", None) or key[1]
        tokenizer = getattr(inner, "tokenizer", None)
        if tokenizer is None:  # pragma: no cover - every fastembed text model has one
            raise ModelUnavailable(self.name, "fastembed's model has no tokenizer")
        window = window or model_pool.trained_length(model_dir, self.name)
        truncation = tokenizer.truncation or {}
        if window is not None and window < truncation.get("max_length", window + 1):
            tokenizer.enable_truncation(
                max_length=window, direction=truncation.get("direction", "right")
            )
        elif window is None:
            window = truncation.get("max_length")
        counter = type(tokenizer).from_str(tokenizer.to_str())
        counter.no_truncation()
        counter.no_padding()
        cutter = type(tokenizer).from_str(tokenizer.to_str())
        cutter.no_padding()
        after = model_pool.rss_mb()
        return SharedModel(
            key=key,
            model=model,
            tokenizer=tokenizer,
            counter=counter,
            window=window,
            special_tokens=len(counter.encode("").ids),
            load_mb=None if before is None or after is None else max(0.0, after - before),
            file_mb=model_pool.file_size_mb(model_dir),
            cutter=cutter,
            threads=threads,
        )

    def close(self) -> None:
        """Let go of the shared model (the last user frees it); idempotent.

        The embedder still works afterwards: its next ``embed`` loads (or shares)
        the model again.
        """
        with self._load_lock:
            shared, self._shared = self._shared, None
        if shared is not None:
            model_pool.release(shared)

    @property
    def max_tokens(self) -> int | None:
        """Word-pieces of a text the vector sees (loads the model's tokenizer)."""
        return self._acquire().max_tokens

    @property
    def known_max_tokens(self) -> int | None:
        """:attr:`max_tokens` as far as it is known without loading the model: the
        loaded model's, else the trained length by the model's name or its folder's
        ``sentence_bert_config.json``, less [CLS] and [SEP]; None when unknown.
        (A store opens without loading the model; see ``passages.Splitter``.)"""
        shared = self._shared
        if shared is not None:
            return shared.max_tokens
        window = self._window or model_pool.trained_length(self.model_path, self.name)
        return None if window is None else max(window - 2, 1)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character span of each word-piece of ``text`` (no special tokens, no cut)."""
        encoding = self._acquire().counter.encode(text, add_special_tokens=False)
        return [(int(start), int(end)) for start, end in encoding.offsets]

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word-pieces of each text, uncut and without special tokens."""
        counter = self._acquire().counter
        return [len(e.ids) for e in counter.encode_batch(list(texts), add_special_tokens=False)]

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
                if onnx_text.runs_locally(self.name, model_path):
                    return onnx_text.LocalTextModel(model_path)  # no fastembed import
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
        """One unit vector per text, each cut at ``max_tokens`` word-pieces.

        The texts are embedded in batches of similar length (shortest first), each at
        most ``batch_tokens`` padded word-pieces, and returned in the order given.
        Safe from several threads at once: ONNX Runtime's ``run`` and the tokenizer's
        ``encode_batch`` are, and nothing else in the call changes shared state.
        """
        shared = self._acquire()
        model, cutter = shared.model, shared.cutter
        if model is None:  # released under our feet by a close() racing this call
            self._shared = None
            shared = self._acquire()
            model, cutter = shared.model, shared.cutter
        texts = list(texts)
        # each text's own length (cut at the window, unpadded): the batches group
        # texts of similar length, and a model that takes tokens is not fed twice
        encodings = cutter.encode_batch(texts)
        lengths = [len(encoding.ids) for encoding in encodings]
        encoded = getattr(model, "run_encoded", None)
        rows: list[np.ndarray | None] = [None] * len(texts)
        for batch in model_pool.token_batches(lengths, self.batch_tokens):
            if encoded is not None:
                part = encoded([encodings[i] for i in batch])
            else:
                part = model.embed([texts[i] for i in batch], batch_size=len(batch))
            for index, vector in zip(batch, part, strict=True):
                rows[index] = vector
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        vectors = np.asarray(rows, dtype=np.float32)
        if self._dim is None and len(vectors):
            self._dim = int(vectors.shape[1])
        return vectors

    def __repr__(self) -> str:
        return f"FastEmbedEmbedder({self.name!r})"


def _footprint_words(shared: SharedModel, dim: int | None) -> list[str]:
    words = [f"{dim}-d"] if dim else []
    if shared.max_tokens is not None:
        words.append(f"reads {shared.max_tokens} word-pieces")
    users = shared.users
    words.append("used by 1 embedder" if users == 1 else f"shared by {users} embedders")
    if shared.load_mb is not None:
        words.append(f"+{shared.load_mb:.0f} MB resident at load")
    return words


def close_embedder(embedder: Any) -> None:
    """Call ``embedder.close()`` when it has one (the model-sharing embedders do)."""
    close = getattr(embedder, "close", None)
    if callable(close):
        close()


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
