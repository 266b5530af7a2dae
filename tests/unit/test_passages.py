"""Splitting long texts into overlapping passages (``nbmemory.retrieval.passages``)."""

from __future__ import annotations

import json

from nbmemory.retrieval.passages import passage_size, split_passages, word_spans


def _prose_and_code(lines: int = 60) -> str:
    parts = []
    for i in range(lines):
        if i % 3 == 0:
            parts.append(f"The deploy step number {i} restarted the worker pool after the check.")
        else:
            parts.append(f"    result_{i} = compute_value(alpha={i}, beta=[1, 2, 3], mode='fast')")
    return "\n".join(parts)


def _tokens(text: str, span: tuple[int, int]) -> int:
    return len(word_spans(text[span[0] : span[1]]))


def test_short_text_is_one_span() -> None:
    text = "A short memory about the weekly report."
    assert split_passages(text, word_spans, 256) == [(0, len(text))]
    assert split_passages("", word_spans, 256) == [(0, 0)]


def test_passages_cover_the_text_and_overlap() -> None:
    text = _prose_and_code()
    spans = split_passages(text, word_spans, 64)
    assert len(spans) > 3
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for before, after in zip(spans, spans[1:], strict=False):
        assert after[0] < before[1]  # overlap: no character left out between them
        assert after[0] > before[0]  # progress
    size, _ = passage_size(64)
    assert all(_tokens(text, span) <= size + 1 for span in spans)


def test_code_lines_are_not_cut_when_a_break_is_near() -> None:
    text = _prose_and_code()
    spans = split_passages(text, word_spans, 128)
    assert len(spans) > 3
    for _, stop in spans[:-1]:
        # each passage but the last ends at the end of a line
        assert stop == len(text) or text[stop] == "\n", repr(text[stop - 20 : stop + 5])


def test_json_without_newlines_is_still_bounded() -> None:
    text = json.dumps([{"key": f"value_{i}", "n": i, "ok": True} for i in range(150)])
    assert "\n" not in text and len(text) > 4000
    spans = split_passages(text, word_spans, 128)
    size, _ = passage_size(128)
    assert len(spans) > 5
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(_tokens(text, span) <= size for span in spans)
    assert all(after[0] < before[1] for before, after in zip(spans, spans[1:], strict=False))


def test_a_tail_sentence_lands_whole_in_a_passage() -> None:
    text = _prose_and_code() + "\nThe staging database password rotates every Friday at noon."
    tail = text.rindex("The staging")
    spans = split_passages(text, word_spans, 64)
    assert any(start <= tail and stop == len(text) for start, stop in spans)
