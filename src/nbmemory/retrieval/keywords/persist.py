"""The keyword index as named arrays: the form it is saved in beside a store.

:meth:`~.postings.Postings.to_arrays` gives the index (merged and compacted
first) as plain numpy arrays, strings packed as offsets and UTF-8 bytes
(:mod:`nbmemory.retrieval.encoding`), so a saved copy loads without pickle.
:mod:`nbmemory.retrieval.index_cache` writes them to ``keywords.npz`` and maps
them back from the file with CRC checks; :func:`unpack` checks that what was
read fits together before the index takes it, so a copy that does not is
refused with a :class:`ValueError` and the index is built from the table.

The arrays: the per-document ones (:data:`DOCUMENT_ARRAYS`, one value per
document, in index order); ``offsets``, ``post_docs`` and ``post_tfs`` (the
postings grouped by term); ``session_ns`` (each session's namespace code);
``id_order`` (the ids' sort order, for look-ups without a dictionary); and the
strings ``ids``, ``vocab``, ``namespaces``, ``speakers`` and ``session_ids``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..encoding import (
    pack_strings,
    permutation,
    sort_order,
    unpack_string_array,
    unpack_strings,
)

#: The per-document arrays, by the names they are saved under, in the order saved.
DOCUMENT_ARRAYS = (
    "ns_codes",
    "lengths",
    "timed",
    "speakers",
    "sessions",
    "created",
    "seq",
    "question",
    "said_from",
    "said_to",
)


@dataclass(frozen=True)
class SavedKeywords:
    """A saved keyword index, unpacked and checked to fit together (:func:`unpack`)."""

    ids: list[str]
    #: the ids as saved, which :class:`nbmemory.retrieval.id_rows.IdRows` searches
    saved_ids: pa.LargeStringArray
    #: the ids' sort order when it was saved and is one (else None)
    id_order: np.ndarray | None
    vocab: list[str]
    namespaces: list[str]
    speakers: list[str]
    #: (namespace code, session id) of each session code
    session_keys: list[tuple[int, str]]
    #: :data:`DOCUMENT_ARRAYS` by name
    documents: dict[str, np.ndarray]
    offsets: np.ndarray
    post_docs: np.ndarray
    post_tfs: np.ndarray


def pack(
    *,
    documents: dict[str, np.ndarray],
    offsets: np.ndarray,
    post_docs: np.ndarray,
    post_tfs: np.ndarray,
    ids: Sequence[str],
    vocab: Sequence[str],
    namespaces: Sequence[str],
    speakers: Sequence[str],
    session_keys: Sequence[tuple[int, str]],
) -> dict[str, np.ndarray]:
    """A compacted index's content as the named arrays saved (see the module's text)."""
    arrays = {name: documents[name] for name in DOCUMENT_ARRAYS}
    arrays.update(
        offsets=offsets,
        post_docs=post_docs,
        post_tfs=post_tfs,
        session_ns=np.array([k[0] for k in session_keys], dtype=np.int32),
    )
    arrays["id_order"] = sort_order(ids)
    for name, strings in (
        ("ids", ids),
        ("vocab", vocab),
        ("namespaces", namespaces),
        ("speakers", speakers),
        ("session_ids", [k[1] for k in session_keys]),
    ):
        arrays.update(pack_strings(name, strings))
    return arrays


def unpack(arrays: dict[str, np.ndarray]) -> SavedKeywords:
    """What :func:`pack` gave, checked for shape: a :class:`ValueError` (or the
    :class:`KeyError` of a missing array) when the arrays do not fit together."""
    saved_ids = unpack_string_array(arrays, "ids")
    ids = saved_ids.to_pylist()
    vocab = unpack_strings(arrays, "vocab")
    n = len(ids)
    offsets = arrays["offsets"]
    post_docs = arrays["post_docs"]
    namespaces = unpack_strings(arrays, "namespaces")
    speakers = unpack_strings(arrays, "speakers")
    session_ids = unpack_strings(arrays, "session_ids")

    def within(name: str, low: int, high: int) -> bool:
        values = arrays[name]
        return not values.size or (values.min() >= low and values.max() < high)

    if (
        len(offsets) != len(vocab) + 1
        or offsets[0] != 0
        or offsets[-1] != len(post_docs)
        or np.any(np.diff(offsets) < 0)
        or len(arrays["post_tfs"]) != len(post_docs)
        or any(len(arrays[name]) != n for name in DOCUMENT_ARRAYS)
        or len(arrays["session_ns"]) != len(session_ids)
        or not within("post_docs", 0, n)
        or not within("ns_codes", 0, len(namespaces))
        or not within("speakers", -1, len(speakers))
        or not within("sessions", 0, len(session_ids))
        or not within("session_ns", 0, max(1, len(namespaces)))
    ):
        raise ValueError("the saved keyword index is inconsistent")
    return SavedKeywords(
        ids=ids,
        saved_ids=saved_ids,
        id_order=permutation(arrays.get("id_order"), n),
        vocab=vocab,
        namespaces=namespaces,
        speakers=speakers,
        session_keys=list(zip(arrays["session_ns"].tolist(), session_ids, strict=True)),
        documents={name: arrays[name] for name in DOCUMENT_ARRAYS},
        offsets=np.asarray(offsets, dtype=np.int64),
        post_docs=np.asarray(post_docs, dtype=np.int32),
        post_tfs=np.asarray(arrays["post_tfs"], dtype=np.float32),
    )
