"""The spec's model run from a local folder on ONNX Runtime alone, without fastembed.

fastembed runs ``sentence-transformers/all-MiniLM-L6-v2`` as: ``tokenizer.json``
(truncated, padded to the longest text of the batch), the ONNX graph, the mean of
the last hidden state over the attention mask, an L2 norm.  When the model's files
are already on disk (``$NBMEMORY_MODEL_PATH`` or ``model_path=``) nbmemory does the
same with ``onnxruntime`` and ``tokenizers``, which fastembed itself uses: importing
fastembed loads ~520 modules (PIL, huggingface_hub, requests, ...) that stay in
the process for its whole life, ~47 MB resident measured, for nothing a local copy
needs (``docs/performance.md``, "Memory").  The vectors are fastembed's: a test
compares them.  Other models, and downloads, go through fastembed.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

#: Models fastembed runs mean-pooled and L2-normalised from ``model.onnx``: the
#: ones this module may run in its place.
MEAN_POOLED = frozenset({"sentence-transformers/all-MiniLM-L6-v2"})
MODEL_FILE = "model.onnx"
_NEEDED = ("tokenizer.json", "tokenizer_config.json", MODEL_FILE)


#: ``onnxruntime.SessionOptions`` attributes set on the model's session.  The memory
#: pattern (buffers planned per input shape and kept) is off: batches here come in
#: many shapes, and with it on the peak resident memory of 200 long messages was
#: 886 MB instead of 612 (``docs/performance.md``, "Memory").  The CPU arena stays
#: on: without it the peak was no lower (859 MB) and runs were slower.
SESSION_OPTIONS: dict[str, Any] = {"enable_mem_pattern": False}

#: Held while ONNX Runtime's session options are swapped for a model load.
_SESSION_OPTIONS_LOCK = threading.Lock()


#: Threads each ONNX session runs on (``intra_op_num_threads``); unset: ONNX
#: Runtime's own choice, one per core.  Read when a model loads.
ENV_MODEL_THREADS = "NBMEMORY_MODEL_THREADS"


def model_threads() -> int | None:
    """``$NBMEMORY_MODEL_THREADS`` as a number of threads (None: unset or empty).

    One thread is the better choice on a machine whose cores are all busy (several
    processes embedding at once, a CI runner): two threads per process then cost
    a fifth to a third more CPU for the same vectors and finish later
    (docs/performance.md, "Threads").  The vectors are the same either way.
    """
    text = os.environ.get(ENV_MODEL_THREADS, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{ENV_MODEL_THREADS}={text!r} is not a number of threads")
    return int(text)


#: What to do about a bad :data:`ENV_MODEL_THREADS`, on every surface.
THREADS_ADVICE = (
    f"Set {ENV_MODEL_THREADS} to a whole number of threads (1, 2, ...), or unset it "
    "to let ONNX Runtime use every core."
)


@contextlib.contextmanager
def lean_sessions(threads: int | None = None) -> Iterator[None]:
    """Sessions created inside the block do not spin their threads between runs, and
    do not keep an arena sized by the largest batch they ever ran.

    By default ONNX Runtime's worker threads keep spinning for a while after each
    run, ready for the next one.  Here the model runs in the background while the
    caller writes to DuckDB: on two cores the spinning threads took that CPU and
    slowed ``add_event`` markedly, for no gain in texts/s
    (``benchmarks/bench_ingest.py`` times both; ``docs/performance.md``, "Ingest",
    has the figures before and after).  The arena options are :data:`SESSION_OPTIONS`
    (measured in ``docs/performance.md``, "Memory").  fastembed takes no option for
    either, so the session options class it instantiates is swapped for the length
    of the load.  ``threads``, when given, is each session's ``intra_op_num_threads``
    (:func:`model_threads`).
    """
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - a fastembed dependency
        yield
        return
    original = ort.SessionOptions

    class LeanSession(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self.add_session_config_entry("session.inter_op.allow_spinning", "0")
            for name, value in SESSION_OPTIONS.items():
                setattr(self, name, value)
            if threads is not None:
                self.intra_op_num_threads = threads

    with _SESSION_OPTIONS_LOCK:
        ort.SessionOptions = LeanSession
        try:
            yield
        finally:
            ort.SessionOptions = original


def runs_locally(model_name: str, model_dir: str) -> bool:
    """Whether :class:`LocalTextModel` can run ``model_name`` from ``model_dir``."""
    folder = Path(model_dir)
    return model_name in MEAN_POOLED and all((folder / name).is_file() for name in _NEEDED)


class LocalTextModel:
    """Mean-pooled, normalised sentence vectors from a local model folder.

    Shaped like fastembed's ``TextEmbedding`` where nbmemory looks at it:
    ``embed(texts, batch_size)`` yields one vector per text; ``model`` holds the
    ``tokenizer`` (which the caller may re-truncate), the folder (``_model_dir``) and
    the ONNX Runtime session (``model.model``).  The session's ``run`` and the
    tokenizer's ``encode_batch`` are safe from several threads.
    """

    def __init__(self, model_dir: str) -> None:
        self.model = _Runner(model_dir)

    def embed(self, texts: list[str], batch_size: int = 256) -> Iterator[np.ndarray]:
        """One unit float32 vector per text, in order, ``batch_size`` texts per run."""
        step = max(int(batch_size), 1)
        for first in range(0, len(texts), step):
            yield from self.model.run(texts[first : first + step])

    def run_encoded(self, encodings: list[Any]) -> np.ndarray:
        """The vectors of one batch of texts the caller tokenised already (with
        ``model.tokenizer``'s truncation, padding off): no second tokenisation."""
        return self.model.run_encoded(encodings)


class _Runner:
    """The tokenizer and the ONNX session of one model folder."""

    def __init__(self, model_dir: str) -> None:
        import onnxruntime as ort

        self._model_dir = model_dir
        folder = Path(model_dir)
        self.tokenizer = _tokenizer(folder)
        options = ort.SessionOptions()  # (nbmemory's lean options while it loads)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.model = ort.InferenceSession(
            str(folder / MODEL_FILE), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {node.name for node in self.model.get_inputs()}

    def run(self, texts: list[str]) -> np.ndarray:
        """The vectors of ``texts``, one batch padded to its longest text."""
        return self.run_encoded(self.tokenizer.encode_batch(texts))

    def run_encoded(self, encodings: list[Any]) -> np.ndarray:
        """The vectors of texts already tokenised (truncated, padded or not): one batch,
        padded here to its longest with the model's pad token."""
        longest = max((len(e.ids) for e in encodings), default=0)
        pad_id = (self.tokenizer.padding or {}).get("pad_id", 0)
        ids = np.full((len(encodings), longest), pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), longest), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.attention_mask)] = encoding.attention_mask
        feed: dict[str, np.ndarray] = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.model.run(None, feed)[0]
        summed = np.sum(hidden, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(hidden.dtype, copy=False)


def _tokenizer(folder: Path) -> Any:
    """``tokenizer.json`` set up as fastembed does: truncated at the tokenizer config's
    length, padded to the longest text of each batch with the model's pad token."""
    from tokenizers import Tokenizer

    config = json.loads((folder / "tokenizer_config.json").read_text())
    model_config: dict[str, Any] = {}
    if (folder / "config.json").is_file():
        model_config = json.loads((folder / "config.json").read_text())
    lengths = [
        int(value)
        for value in (config.get("model_max_length"), config.get("max_length"))
        if isinstance(value, int) and 0 < value < 1_000_000
    ]
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    truncation = tokenizer.truncation or {}
    tokenizer.enable_truncation(
        max_length=min(lengths) if lengths else 512,
        direction=config.get("truncation_side") or truncation.get("direction", "right"),
    )
    padding = tokenizer.padding or {}
    pad_token = padding.get("pad_token") or config.get("pad_token") or "[PAD]"
    pad_id = padding.get("pad_id", model_config.get("pad_token_id"))
    if pad_id is None:
        pad_id = tokenizer.token_to_id(pad_token) or 0
    tokenizer.enable_padding(
        direction=config.get("padding_side") or padding.get("direction", "right"),
        pad_id=pad_id,
        pad_type_id=padding.get("pad_type_id", 0),
        pad_token=pad_token,
        length=None,
    )
    return tokenizer
