"""The learned fusion of hybrid search: settings, weights, diversity, fitting."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from nbmemory import InvalidInput, Memory, Settings
from nbmemory.cli import main
from nbmemory.config import DEFAULT_WEIGHTS, FEATURES, SIGNALS
from nbmemory.research.datasets import load_locomo
from nbmemory.research.fitting import (
    L2_GRID,
    QUESTION_FOLDS,
    Sample,
    choose_l2,
    fit,
    fit_weights,
    held_out_folds,
)
from nbmemory.retrieval.fusion import asks_for_several, names_mentioned, weights_vector


def test_every_feature_has_a_default_weight_and_every_signal_known_features():
    assert set(DEFAULT_WEIGHTS) == set(FEATURES)
    assert {f for features in SIGNALS.values() for f in features} <= set(FEATURES)


def test_weights_replace_the_defaults_and_signals_scale_their_features():
    column = list(FEATURES).index
    base = weights_vector(None, None)
    assert base[column("cosine")] == DEFAULT_WEIGHTS["cosine"]
    changed = weights_vector({"cosine": 1.5}, {"speaker": 0, "dates": 2})
    assert changed[column("cosine")] == 1.5
    for name in SIGNALS["speaker"]:
        assert changed[column(name)] == 0
    assert changed[column("date_written")] == 2 * DEFAULT_WEIGHTS["date_written"]
    assert changed[column("keywords")] == DEFAULT_WEIGHTS["keywords"]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"fusion_weights": {"cosines": 1}}, "unknown features in fusion_weights: cosines"),
        ({"fusion_weights": {"cosine": "high"}}, r"fusion_weights\['cosine'\] must be a number"),
        ({"fusion_weights": {"cosine": float("nan")}}, "must be finite"),
        ({"fusion_weights": [1, 2]}, "must be a dict"),
        ({"signal_weights": {"speakers": 0}}, "unknown signals in signal_weights: speakers"),
        ({"signal_weights": {"speaker": -1}}, "must be >= 0"),
        ({"diversity_weight": -0.1}, "diversity_weight must be a number >= 0"),
        ({"speaker_weight": 0.0}, r"speaker_weight was replaced .*signal_weights=\{'speaker': 0\}"),
        ({"keyword_weight": 0.5}, "keyword_weight was replaced"),
    ],
)
def test_bad_fusion_settings_say_what_to_do(changes, message):
    with pytest.raises(InvalidInput, match=message):
        Settings().replace(**changes)


@pytest.mark.parametrize(
    "question, several",
    [
        ("What activities does Melanie partake in?", True),
        ("Which books has Tim read?", True),
        ("How many children does Melanie have?", True),
        ("What did both of them paint?", True),
        ("What are Caroline's plans?", True),
        ("What is Caroline's identity?", False),
        ("What does Melanie do to destress?", False),
        ("What has Melanie painted?", False),
        ("When did she go camping?", False),
    ],
)
def test_a_question_asking_for_several_things(question, several):
    assert asks_for_several(question) is several


def test_names_a_question_mentions_leave_out_speakers_months_and_its_first_word():
    question = "What did Caroline and Jean see at Universal Studios in May?"
    assert names_mentioned(question, {"caroline"}) == ["Jean", "Studios", "Universal"]
    assert names_mentioned("Melanie went where?", set()) == []


def test_a_question_asking_for_several_things_gets_several_sessions(tmp_path):
    def blind(texts):
        return np.ones((len(texts), 8), dtype=np.float32)

    # a strong cost: the lone turn has no neighbour to lift it, the others two each
    with Memory(tmp_path / "m.duckdb", embedder=blind, diversity_weight=5.0) as mem:
        for i in range(3):
            mem.add_event("garden", "user", f"I grow tomatoes and basil, bed {i}")
        lone = mem.add_event("kitchen", "user", "I grow tomatoes and basil")
        for i in range(3):
            mem.add_event("other", "user", f"unrelated chatter {i}")
        mem.flush()
        spread = mem.search("What plants do I grow with tomatoes and basil?", limit=2)
        assert lone.id in spread["id"].tolist()
        mem.configure(diversity_weight=0.0)
        same = mem.search("What plants do I grow with tomatoes and basil?", limit=2)
        assert set(same["session_id"]) == {"garden"}


def _samples(rng: np.random.Generator, questions: int, signal: int) -> list[Sample]:
    """Candidates with random features; the evidence is the one with the largest
    value of feature ``signal`` (plus a little noise)."""
    samples = []
    for q in range(questions):
        x = rng.normal(size=(20, len(FEATURES)))
        relevant = np.zeros(20, dtype=bool)
        relevant[np.argmax(x[:, signal] + 0.1 * rng.normal(size=20))] = True
        samples.append(Sample("c", f"q{q}", x, relevant))
    return samples


def test_fitting_finds_the_feature_that_tells_the_evidence_apart():
    signal = list(FEATURES).index("session")
    samples = _samples(np.random.default_rng(0), 200, signal)
    weights = fit_weights(samples)
    assert set(weights) == set(FEATURES)
    assert max(weights, key=lambda n: abs(weights[n])) == "session"
    assert weights["session"] > 0
    assert fit_weights(samples) == weights  # deterministic
    # a feature that never varies gets no weight
    for s in samples:
        s.features[:, 0] = 1.0
    assert fit_weights(samples)["cosine"] == 0.0


def test_fitting_needs_a_question_with_its_evidence_among_the_candidates():
    empty = Sample("c", "q", np.zeros((3, len(FEATURES))), np.zeros(3, dtype=bool))
    with pytest.raises(InvalidInput, match="nothing to fit"):
        fit_weights([empty])


def test_fit_measures_default_fitted_and_held_out_weights(tiny_locomo_path, tmp_path):
    other = tmp_path / "conv-other.json"
    data = json.loads(tiny_locomo_path.read_text())
    data["sample_id"] = "other"
    other.write_text(json.dumps(data))
    with Memory(":memory:", embedder="hash") as mem:
        before = mem.settings
        loaded = [load_locomo(tiny_locomo_path, mem), load_locomo(other, mem)]
        result = fit(mem, loaded, k="1,3")
        assert mem.settings == before  # trials only
    assert list(result.table.index) == [
        "default weights",
        "fitted weights (same questions)",
        "fitted, each held out",
        "cosine",
        "keywords",
        "rrf",
    ]
    assert result.parameters["held out"] == "conversations"
    assert result.parameters["l2"] in L2_GRID
    name, best = result.baseline
    assert best == result.table.loc[["cosine", "keywords", "rrf"], "recall@3"].max()
    assert result.acceptable is (result.held_out >= best)
    assert set(result.weights) == set(FEATURES)
    assert json.loads(result.to_json()) == result.weights
    Settings(fusion_weights=json.loads(result.to_json()))  # loads back as a setting
    assert "fitted" in result._repr_html_() and "cosine" in str(result.weights_frame())


def test_the_cli_fits_prints_and_writes_the_weights(tiny_locomo_path, tmp_path, capsys):
    out = tmp_path / "weights.json"
    args = ["eval", "locomo", str(tiny_locomo_path), "--embedder", "hash", "--k", "1,3"]
    assert main([*args, "--fit", "--fit-out", str(out), "--markdown"]) == 0
    printed = capsys.readouterr().out
    assert "| fitted weights (same questions) |" in printed
    assert "| session |" in printed
    assert set(json.loads(out.read_text())) == set(FEATURES)
    assert main([*args, "--fit-out", str(out)]) == 1
    assert "add --fit" in capsys.readouterr().err
    assert main([*args, "--fit", "--ablation"]) == 1
    assert main([*args, "--fit", "--fit-out", str(tmp_path)]) == 1
    assert "is a folder" in capsys.readouterr().err


def test_every_fused_feature_is_bounded_so_a_long_memory_does_not_win_by_length(tmp_path):
    """Issue 37: features mean the same on any corpus. A 3k-character message scored
    +8.6 from a raw log-length (weight 1.39) before: more than cosine could give."""
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash", config=False) as mem:
        mem.add_event("s", "user", "the staging port is 8443")
        filler = " ".join(f"line {i}: build step {i} finished without warnings" for i in range(300))
        mem.add_event("s", "assistant", f"here is the full build log\n{filler}")
        mem.add_event("s", "user", "deploy on friday")
        mem.flush()
        found = mem.core.retriever.candidates("which port does staging use?", "default")
        assert found is not None
        x = found.features
        assert np.isfinite(x).all()
        assert (x >= -1.0).all() and (x <= 1.0).all(), dict(
            zip(FEATURES, x.max(axis=0), strict=True)
        )
        length = x[:, list(FEATURES).index("length")]
        assert 0.0 < length.min() < length.max() == 1.0  # over the longest candidate
        top = mem.search("which port does staging use?", limit=1)
        assert top["content"].iloc[0] == "the staging port is 8443"


def test_one_conversation_is_held_out_by_folds_of_its_questions():
    signal = list(FEATURES).index("session")
    samples = _samples(np.random.default_rng(1), 60, signal)
    folds = held_out_folds(samples)
    assert len(folds) == QUESTION_FOLDS
    for _, train, test in folds:
        assert test and not {s.question for s in train} & {s.question for s in test}
    assert sorted(s.question for _, _, test in folds for s in test) == sorted(
        s.question for s in samples
    )
    assert choose_l2(samples) in L2_GRID


def test_question_weights_shift_the_fit_towards_the_heavier_questions():
    """Half the questions are answered by one feature, half by another: weighting
    the second half up makes its feature the stronger."""
    rng = np.random.default_rng(2)
    first = _samples(rng, 100, list(FEATURES).index("session"))
    second = _samples(rng, 100, list(FEATURES).index("keywords"))
    even = fit_weights(first + second)
    for s in second:
        s.weight = 5.0
    heavy = fit_weights(first + second)
    assert heavy["keywords"] / heavy["session"] > even["keywords"] / even["session"]


def _conversation(sample_id: str, answer_after: bool) -> dict:
    """Six topics, each a turn naming it and a reply that does not; the questions
    name the topic, and their evidence is the naming turn, or (``answer_after``)
    the reply: what tells the evidence apart in one conversation misleads in the other."""
    topics = ["kayaking", "sourdough", "telescopes", "origami", "beekeeping", "chess"]
    fillers = ["right", "sure thing", "go on", "tell me more", "nice", "really"]
    turns, qa = [], []
    for i, (topic, filler) in enumerate(zip(topics, fillers, strict=True)):
        turns += [
            {"speaker": "Alice", "dia_id": f"D1:{2 * i + 1}", "text": f"I love {topic} lately"},
            {"speaker": "Bob", "dia_id": f"D1:{2 * i + 2}", "text": f"{filler}, {i}"},
        ]
        evidence = f"D1:{2 * i + 2}" if answer_after else f"D1:{2 * i + 1}"
        qa.append({"question": f"What about {topic}?", "answer": "x", "evidence": [evidence],
                   "category": 4})  # fmt: skip
    return {
        "sample_id": sample_id,
        "conversation": {"speaker_a": "Alice", "speaker_b": "Bob",
                         "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns},
        "qa": qa,
    }  # fmt: skip


def test_the_cli_refuses_weights_that_do_worse_held_out_than_keywords(tmp_path, capsys):
    folder = tmp_path / "convs"
    folder.mkdir()
    for name, after in (("named", False), ("after", True)):
        (folder / f"conv-{name}.json").write_text(json.dumps(_conversation(name, after)))
    out = tmp_path / "weights.json"
    args = ["eval", "locomo", str(folder), "--embedder", "hash", "--k", "1"]
    assert main([*args, "--fit", "--fit-out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "fitted, each held out" in captured.out and "keywords" in captured.out
    (error,) = captured.err.strip().splitlines()
    assert "not writing" in error and "below the unfused" in error
    assert not out.exists()


def test_the_guard_fires_only_when_the_fused_top_shares_nothing_with_either_input():
    from nbmemory.retrieval.hybrid import disagrees, rrf_scores

    column = list(FEATURES).index
    x = np.zeros((30, len(FEATURES)))
    x[:15, column("cosine_rank")] = 1.0 / np.arange(1, 16)  # cosine ranks 0..14
    x[5:20, column("keyword_rank")] = 1.0 / np.arange(1, 16)  # keywords ranks 5..19
    # a fused top 10 made of candidates neither input ranks in its top 10
    assert disagrees(x, list(range(20, 30)))
    # one candidate of the cosine top 10 among them: no fallback
    assert not disagrees(x, [0, *range(21, 30)])
    assert not disagrees(x, list(range(10)))
    scores = rrf_scores(x)
    # ranked by both inputs beats ranked by one; unranked gets nothing
    assert scores[5] > scores[0] and scores[5] > scores[15] and scores[25] == 0
    assert np.argmax(scores) == 5  # cosine 6th and keywords 1st: the best sum


def test_weights_that_rank_by_what_neither_input_sees_fall_back_to_rrf():
    """Weights that put questions first (a corpus-fitted quirk) over memories that
    match the query: the fused top 10 shares nothing with the cosine or BM25 top 10,
    so the search ranks by their RRF and says so."""
    matching = [f"the lighthouse keeper {i} painted the lighthouse red" for i in range(12)]
    questions = [f"did you water plant number {i}?" for i in range(12)]
    with Memory(":memory:", embedder="hash", fusion_weights={"question_turn": 100.0}) as mem:
        for text in questions + matching:
            mem.add_event("s", "user", text)
        mem.flush()
        hits = mem.search("who painted the lighthouse?", limit=5)
        assert hits["content"].isin(matching).all(), hits["content"].tolist()
        assert hits["signals"].str.contains("fallback").all()
        # weights the inputs agree with: no fallback
        mem.configure(fusion_weights=None)
        hits = mem.search("who painted the lighthouse?", limit=5)
        assert not hits["signals"].str.contains("fallback").any()


# -- the recipe of the shipped weights (nbmemory.research.default_weights) -------------------
def _tagged(corpus: str, conversation: str, samples: list[Sample]) -> list[Sample]:
    return [dataclasses.replace(s, corpus=corpus, conversation=conversation) for s in samples]


def test_the_recipe_weighs_corpora_and_holds_mention_at_zero():
    from nbmemory.research.default_weights import RECIPE, fit, weighted

    rng = np.random.default_rng(1)
    mention = list(FEATURES).index("mention")
    locomo = _tagged("locomo", "conv-1", _samples(rng, 100, mention))
    tech = _tagged("tech-chat-0", "ledger", _samples(rng, 25, mention))
    tech += _tagged("tech-chat-1", "atlas", _samples(rng, 25, mention))
    ready = weighted(locomo + tech)
    # 1/sqrt(questions) per corpus; the technical chat's seeds are one corpus, counted twice
    assert ready[0].weight == pytest.approx(1 / 10)
    assert ready[-1].weight == pytest.approx(RECIPE.tech_weight / np.sqrt(50))
    assert not any(s.features[:, mention].any() for s in ready)
    assert locomo[0].features[:, mention].any()  # the samples given are not changed
    # mention tells the evidence apart here, and still gets no weight
    assert fit_weights(locomo + tech)["mention"] > 0.5
    weights = fit(locomo + tech)
    assert weights["mention"] == 0.0
    assert all(round(w, 2) == w for w in weights.values())


def test_the_recipe_holds_a_locomo_conversation_out_in_all_its_forms():
    from nbmemory.research.default_weights import fold, judge

    rng = np.random.default_rng(2)
    by_cosine = list(FEATURES).index("cosine_rank")
    samples = []
    for conversation in ("conv-1", "conv-2", "conv-3"):
        for corpus, suffix in (
            ("locomo", ""),
            ("locomo-long", "-long"),
            ("locomo-plain", "-plain"),
        ):
            samples += _tagged(corpus, conversation + suffix, _samples(rng, 6, by_cosine))
    for seed in (0, 1):
        for project in ("atlas", "beacon", "ledger"):
            samples += _tagged(f"tech-chat-{seed}", project, _samples(rng, 4, by_cosine))
    bases = ["conv-1", "conv-2", "conv-3"]
    folds = {(s.corpus, s.conversation): fold(s, locomo=bases) for s in samples}
    for base in bases:
        forms = {v for (c, conv), v in folds.items() if conv.startswith(base)}
        assert len(forms) == 1
    assert len({v for (c, _), v in folds.items() if c.startswith("tech")}) == 5
    table = judge(samples)
    assert set(table.index.get_level_values("corpus")) == {
        "locomo", "locomo-long", "locomo-plain", "tech-chat"
    }  # fmt: skip
    assert set(table.index.get_level_values("ranking")) == {"held out", "cosine", "keywords"}
    assert table.loc[("tech-chat", "held out"), "questions"] == 24
    # the evidence is the candidate with the largest cosine rank: the cosine order finds it
    assert table.loc[("locomo", "cosine"), "recall@10"] > 0.8
