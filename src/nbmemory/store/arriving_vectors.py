"""Vectors that arrive with new event rows (an import, a bulk load): grouped by model
as :class:`~.changes.Vectors`, and the rows marked as embedded by them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .changes import Vectors


def embedded_vectors(
    rows: list[dict[str, Any]],
    kept: np.ndarray,
    vectors: dict[str, tuple[str, np.ndarray]],
    matrix: tuple[str, np.ndarray] | None,
    spans: dict[str, list[tuple[int, int]]] | None = None,
) -> list[Vectors]:
    """The vectors that arrive with the rows, by model (rows whose text changed left out).

    An id of ``spans`` comes as passages: its vector is a matrix, one row per passage
    in order, and ``spans`` gives their characters."""
    if matrix is not None:
        model, block = matrix
        block = np.asarray(block, dtype=np.float32)
        chosen = np.flatnonzero(kept)
        return [
            Vectors(
                model,
                [rows[i]["id"] for i in chosen],
                [rows[i]["namespace"] for i in chosen],
                block[chosen],
            )
        ]
    cuts = spans or {}
    by_model: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row["id"] in vectors and kept[i]:
            by_model.setdefault(vectors[row["id"]][0], []).append(i)
    groups = []
    for model, picked in by_model.items():
        row_ids: list[str] = []
        namespaces: list[str] = []
        passages: list[int | None] = []
        row_spans: list[tuple[int, int] | None] = []
        for i in picked:
            cut: list[tuple[int, int] | None] = list(cuts.get(rows[i]["id"], [None]))
            row_ids += [rows[i]["id"]] * len(cut)
            namespaces += [rows[i]["namespace"]] * len(cut)
            passages += [None] if cut[0] is None else list(range(len(cut)))
            row_spans += cut
        block = np.concatenate(
            [np.atleast_2d(np.asarray(vectors[rows[i]["id"]][1], dtype=np.float32)) for i in picked]
        )
        split = any(p is not None for p in passages)
        groups.append(
            Vectors(
                model,
                row_ids,
                namespaces,
                block,
                passages if split else None,
                row_spans if split else None,
            )
        )
    return groups


def mark_embedded(data: pa.Table, groups: list[Vectors]) -> pa.Table:
    """Event rows ``data`` with ``embedding_model`` set for the events of ``groups``."""
    model_of = {event_id: g.model for g in groups for event_id in g.ids}
    models = pa.array(
        [
            model_of.get(i, old)
            for i, old in zip(
                data.column("id").to_pylist(),
                data.column("embedding_model").to_pylist(),
                strict=True,
            )
        ],
        pa.string(),
    )
    return data.set_column(
        data.schema.get_field_index("embedding_model"), "embedding_model", models
    )
