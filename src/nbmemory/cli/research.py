"""The research sub-commands of ``nbmemory``: ``eval locomo``, ``eval corpora`` and
``import-sqlite``.

Registered into :func:`nbmemory.cli.build_parser` by :func:`add_commands`; the
engine does the work (:mod:`nbmemory.research.evaluation`, ``Memory.import_sqlite``).
"""

from __future__ import annotations

import argparse
import importlib
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..memory import Memory
from ..research.evaluation import frame_to_markdown
from .options import store_options
from .stores import opened, store_path


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``eval`` (with ``locomo``) and ``import-sqlite`` to the ``nbmemory`` parser."""
    evaluate = sub.add_parser("eval", help="evaluate retrieval on labelled data")
    datasets = evaluate.add_subparsers(dest="dataset", metavar="DATASET", required=True)
    locomo = datasets.add_parser(
        "locomo",
        help="recall@k, precision@k and MRR per strategy on LoCoMo conversations",
        description="Load LoCoMo conversation files (or folders of them) into a store, ask "
        "every answerable question and print one table: strategies x metrics.",
    )
    locomo.add_argument("paths", nargs="+", metavar="PATH", help="conv-*.json files or folders")
    locomo.add_argument("--k", default="5,10", help="cut-offs, comma-separated (default 5,10)")
    locomo.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="cosine threshold of relevance@threshold and tri-hybrid (default: the profile's,"
        " 0.65 for spec)",
    )
    locomo.add_argument(
        "--profile",
        default=None,
        help="retrieval profiles, comma-separated: spec (cosine relevance > 0.65) and/or hybrid "
        "(default: both; profile-dependent strategies get a row per profile)",
    )
    locomo.add_argument(
        "--strategies", default=None, help="comma-separated subset of the strategies"
    )
    locomo.add_argument(
        "--target-recall",
        type=float,
        default=None,
        help="suggest the highest threshold reaching this recall (default: best F1)",
    )
    locomo.add_argument(
        "--no-importance-estimate",
        dest="estimate_importance",
        action="store_false",
        help="store the turns with their role's importance only (LoCoMo has no labels; "
        "default: the estimate from the text, as a store does)",
    )
    locomo.add_argument(
        "--by-category",
        action="store_true",
        help="also print recall@K, hit@K (any evidence in the top K) and all@K (all of it) "
        "per question category, K the largest cut-off",
    )
    locomo.add_argument(
        "--ablation",
        action="store_true",
        help="instead of the strategies, the hybrid search with each of its signals switched "
        "off in turn (keywords, neighbours, speaker, mentions, time, dates, session, form, "
        "diversity) and plain cosine: recall@K, hit@K, MRR",
    )
    locomo.add_argument(
        "--fit",
        action="store_true",
        help="instead of the strategies, fit the hybrid search's weights on these "
        "conversations and print them with recall@K, hit@K, MRR before and after, with "
        "each conversation held out (one conversation: five folds of its questions) and "
        "beside cosine only, keywords only and their RRF",
    )
    locomo.add_argument(
        "--fit-out",
        metavar="FILE",
        default=None,
        help="with --fit: write the fitted weights as JSON to FILE (load them with "
        "Settings(fusion_weights=json.load(open(FILE)))); refused when their held-out "
        "recall is below the best unfused ranking's",
    )
    locomo.add_argument(
        "--reranker",
        metavar="MODULE:NAME",
        default=None,
        help="re-score the best candidates of search and context with NAME from an importable "
        "MODULE: a callable (query, texts) -> scores, or an object with .rerank(query, "
        "documents) such as fastembed's TextCrossEncoder",
    )
    locomo.add_argument("--markdown", action="store_true", help="print markdown tables")
    store_options(locomo, default_store="in memory, discarded")
    locomo.set_defaults(func=cmd_eval_locomo)

    _add_corpora(datasets)

    imp = sub.add_parser(
        "import-sqlite",
        help="import an agent's SQLite memory (the Rust agent's schema) into a store",
        description="Read events/messages, facts, macros, scheduled_tasks and "
        "terminal_allowed_prefixes of a SQLite database into the store, keeping ids, "
        "timestamps and importance; embeddings are kept or re-computed.",
    )
    imp.add_argument("path", metavar="PATH", help="the SQLite database file")
    imp.add_argument("--namespace", default=None, help="namespace to import into (default)")
    store_options(imp, default_store="$NBMEMORY_PATH or ./nbmemory.duckdb")
    imp.set_defaults(func=cmd_import_sqlite)


def _add_corpora(datasets: argparse._SubParsersAction) -> None:
    """``eval corpora``: the default ranking beside its inputs on every development corpus."""
    corpora = datasets.add_parser(
        "corpora",
        help="default hybrid vs cosine vs keywords vs RRF on each development corpus",
        description="Build the development corpora (LoCoMo, LoCoMo re-shaped into long "
        "messages, LoCoMo stored without speakers' names, a generated technical chat), store them and print recall@k, MRR and hit@k "
        "of the default hybrid ranking, cosine only, keywords only and their reciprocal-rank "
        "fusion, per corpus: whether the fusion holds on conversations it was not fitted to.",
    )
    corpora.add_argument(
        "--corpus",
        default=None,
        help="corpora, comma-separated: locomo, locomo-long, locomo-plain, tech-chat (default: "
        "all; the LoCoMo ones only when --locomo or $NBMEMORY_LOCOMO_PATH names the data)",
    )
    corpora.add_argument("--locomo", metavar="PATH", default=None, help="the LoCoMo folder")
    corpora.add_argument("--k", default="5,10", help="cut-offs, comma-separated (default 5,10)")
    corpora.add_argument(
        "--seed", type=int, default=0, help="seed of the generated corpora (default 0)"
    )
    corpora.add_argument(
        "--by-category",
        action="store_true",
        help="also print recall@K per question category of each corpus, K the largest cut-off",
    )
    corpora.add_argument(
        "--ablation",
        action="store_true",
        help="also print, per corpus, the hybrid search with each signal switched off in turn",
    )
    corpora.add_argument("--markdown", action="store_true", help="print markdown tables")
    store_options(corpora, default_store="in memory, discarded")
    corpora.set_defaults(func=cmd_eval_corpora)


def cmd_eval_corpora(args: argparse.Namespace) -> int:
    """``nbmemory eval corpora``: one table of (corpus, ranking) x metrics."""
    import os

    from ..research.corpora import build_corpus, load_corpus, needs_locomo, parse_corpora
    from ..research.datasets import ENV_LOCOMO_PATH
    from ..research.evaluation import evaluate_ablation, parse_ks
    from ..research.generalisation import evaluate_corpora

    ks = parse_ks(args.k)
    names = parse_corpora(args.corpus)
    left_out = []
    if args.corpus is None and not (args.locomo or os.environ.get(ENV_LOCOMO_PATH)):
        left_out = [n for n in names if needs_locomo(n)]
        names = [n for n in names if n not in left_out]
    built = [build_corpus(n, locomo_path=args.locomo, seed=args.seed) for n in names]
    with _memory(args, ":memory:") as mem:
        loaded = {corpus.name: load_corpus(corpus, mem) for corpus in built}
        result = evaluate_corpora(mem, built, k=ks, seed=args.seed, loaded=loaded)
        sizes = "; ".join(
            f"{c.name}: {len(c.conversations)} conversation(s), {c.messages} messages, "
            f"{c.questions} questions"
            for c in built
        )
        print(
            f"development corpora (seed {args.seed}; model {result.parameters['model']}): {sizes}"
        )
        if left_out:
            print(f"left out {', '.join(left_out)}: set {ENV_LOCOMO_PATH} or pass --locomo")
        print(
            "rankings: default = hybrid search, cosine = vector only, keywords = BM25 only, "
            "rrf = reciprocal-rank fusion of cosine and keywords (k=60)"
        )
        _print_frame(result.table, args)
        if args.by_category:
            for corpus in built:
                print(f"\n{corpus.name}")
                _print_frame(result.by_category(f"recall@{ks[-1]}", corpus=corpus.name), args)
        if args.ablation:
            for corpus in built:
                table = evaluate_ablation(mem, loaded[corpus.name], k=ks).table
                print(f"\n{corpus.name}: one signal of the hybrid search switched off per row")
                _print_frame(table, args)
    return 0


def _print_frame(frame: Any, args: argparse.Namespace) -> None:
    print(
        frame_to_markdown(frame.reset_index())
        if args.markdown
        else frame.to_string(float_format=lambda v: f"{v:.3f}")
    )


def _memory(
    args: argparse.Namespace, default: str | None, **settings: Any
) -> AbstractContextManager[Memory]:
    """The store of ``--store`` (else ``default``), removed again if this command made it
    and fails."""
    return opened(args, store_path(args, default), **settings)


#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def cmd_import_sqlite(args: argparse.Namespace) -> int:
    """``nbmemory import-sqlite PATH``: import, wait for the embeddings, print the report."""
    source = Path(args.path).expanduser()
    if not source.is_file():
        raise InvalidInput(f"no SQLite database at {args.path}; pass the agent's .db file")
    with open(source, "rb") as handle:
        if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise InvalidInput(
                f"{args.path} is not a readable SQLite database (no SQLite header); "
                "pass the agent's .db file"
            )
    with _memory(args, None) as mem:
        report = mem.transfer.import_sqlite(args.path, namespace=args.namespace)
        mem.flush()
        print(report.summary())
        print(f"store: {mem.store.path}")
    return 0


def load_reranker(spec: str) -> Any:
    """``module:name`` -> the object ``name`` of the importable ``module`` (``--reranker``)."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise InvalidInput(
            f"--reranker takes MODULE:NAME (e.g. myrerankers:cross_encoder), got {spec!r}"
        )
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any failure to import it is bad input
        raise InvalidInput(
            f"--reranker: cannot import {module_name} ({type(exc).__name__}: {exc}); "
            "put its folder on PYTHONPATH"
        ) from None
    for part in name.split("."):
        if not hasattr(found, part):
            raise InvalidInput(f"--reranker: {module_name} has no {name}")
        found = getattr(found, part)
    return found


def cmd_eval_locomo(args: argparse.Namespace) -> int:
    """``nbmemory eval locomo PATH...``: one table of strategies x metrics (or, with
    ``--ablation``, of the hybrid search's signals switched off in turn)."""
    from ..config import PROFILES
    from ..research.datasets import load_locomo, locomo_files
    from ..research.evaluation import evaluate_profiles, parse_ks
    from ..research.thresholds import labelled_similarities, suggest_threshold, threshold_sweep

    files = [f for path in args.paths for f in locomo_files(path)]
    if args.fit_out and not args.fit:
        raise InvalidInput("--fit-out writes the weights --fit fits; add --fit")
    if args.fit and args.ablation:
        raise InvalidInput("--fit and --ablation are two runs; pick one")
    if args.fit:
        return _eval_fit(args, files)
    if args.ablation:
        return _eval_ablation(args, files)
    profiles = [p.strip() for p in (args.profile or "spec,hybrid").split(",") if p.strip()]
    unknown = [p for p in profiles if p not in PROFILES]
    if unknown or not profiles:
        raise InvalidInput(
            f"unknown profile {', '.join(unknown) or repr(args.profile)}; profiles: "
            f"{', '.join(PROFILES)}"
        )
    strategies = (
        [s.strip() for s in args.strategies.split(",") if s.strip()] if args.strategies else None
    )
    reranker = load_reranker(args.reranker) if args.reranker else None
    with _memory(
        args, ":memory:", estimate_importance=args.estimate_importance, reranker=reranker
    ) as mem:
        loaded = [load_locomo(f, mem) for f in files]
        result = evaluate_profiles(
            mem,
            loaded,
            profiles,
            k=args.k,
            strategies=strategies,
            relevance_threshold=args.threshold,
        )
        sweep = threshold_sweep(labelled_similarities(mem, loaded))
        suggestion = suggest_threshold(sweep, target_recall=args.target_recall)
        params = result.parameters
        thresholds = ", ".join(
            f"{p} relevance > "
            f"{PROFILES[p]['relevance_threshold'] if args.threshold is None else args.threshold}"
            for p in profiles
        )
        print(
            f"LoCoMo: {len(files)} conversation(s), {int(result.table['questions'].iloc[0])} "
            f"questions; model {params['model']}; profiles {params['profiles']} "
            f"({thresholds}); salience >= {params['salience_threshold']}, importance "
            f"{'estimated from the text' if args.estimate_importance else 'by role only'}"
            f"{_reranked(params)}"
        )
        _print_tables(result, args, parse_ks(args.k))
        print(f"suggested {suggestion}")
    return 0


def _eval_ablation(args: argparse.Namespace, files: list[Path]) -> int:
    """``nbmemory eval locomo --ablation``: the hybrid search's signals switched off in turn."""
    from ..research.datasets import load_locomo
    from ..research.evaluation import evaluate_ablation, parse_ks

    unused = _set_flags(args, "profile", "strategies", "threshold", "target_recall")
    if unused:
        raise InvalidInput(
            f"--ablation evaluates the hybrid profile's search with each signal switched off; "
            f"leave out {', '.join(unused)}"
        )
    ks = parse_ks(args.k)
    reranker = load_reranker(args.reranker) if args.reranker else None
    with _memory(
        args, ":memory:", estimate_importance=args.estimate_importance, reranker=reranker
    ) as mem:
        loaded = [load_locomo(f, mem) for f in files]  # embedded once, read by every row
        result = evaluate_ablation(mem, loaded, k=ks)
        params = result.parameters
        print(
            f"LoCoMo: {len(files)} conversation(s), {int(result.table['questions'].iloc[0])} "
            f"questions; model {params['model']}; hybrid search (weights "
            f"{params['fusion_weights']}, diversity_weight {params['diversity_weight']}), "
            f"one signal switched off per row{_reranked(params)}"
        )
        _print_tables(result, args, ks)
    return 0


def _eval_fit(args: argparse.Namespace, files: list[Path]) -> int:
    """``nbmemory eval locomo --fit``: fit the hybrid weights, print them and what they change."""
    from ..research.datasets import load_locomo
    from ..research.fitting import fit

    unused = _set_flags(args, "profile", "strategies", "threshold", "target_recall", "reranker")
    unused += ["--by-category"] if args.by_category else []
    if unused:
        raise InvalidInput(f"--fit fits the hybrid search's weights; leave out {', '.join(unused)}")
    if args.fit_out and Path(args.fit_out).expanduser().is_dir():
        raise InvalidInput(f"--fit-out {args.fit_out} is a folder; name a .json file")
    with _memory(args, ":memory:", estimate_importance=args.estimate_importance) as mem:
        loaded = [load_locomo(f, mem) for f in files]
        result = fit(mem, loaded, k=args.k)
        print(
            f"LoCoMo: {len(files)} conversation(s), {int(result.table['questions'].iloc[0])} "
            f"questions; model {result.parameters['model']}; hybrid search weights fitted "
            f"on these questions (L2 {result.parameters['l2']:g}, chosen by holding out "
            f"{result.parameters['held out']}); baselines: cosine only, keywords only, their RRF"
        )
        print(result.to_markdown() if args.markdown else str(result))
        print()
        frame = result.weights_frame()
        print(
            frame_to_markdown(frame.reset_index())
            if args.markdown
            else frame.to_string(float_format=lambda v: f"{v:.3f}")
        )
        if args.fit_out:
            name, best = result.baseline
            if not result.acceptable:
                raise InvalidInput(
                    f"not writing {args.fit_out}: the fitted weights' held-out recall "
                    f"{result.held_out:.3f} is below the unfused {name} ({best:.3f}); "
                    "fit on more conversations or keep the defaults"
                )
            target = Path(args.fit_out).expanduser()
            try:
                target.write_text(result.to_json() + "\n", encoding="utf-8")
            except OSError as exc:
                raise InvalidInput(f"cannot write {target}: {exc.strerror or exc}") from None
            print(f"\nweights written to {target}: Settings(fusion_weights=json.load(open(...)))")
    return 0


def _set_flags(args: argparse.Namespace, *names: str) -> list[str]:
    """The options among ``names`` the command line gave (as ``--flag-name``)."""
    return ["--" + name.replace("_", "-") for name in names if getattr(args, name) is not None]


def _reranked(parameters: dict[str, Any]) -> str:
    return f"; reranker {parameters['reranker']}" if "reranker" in parameters else ""


def _print_tables(result: Any, args: argparse.Namespace, ks: list[int]) -> None:
    """The evaluation's table, then with ``--by-category`` recall, hit and all at the
    largest k per question category."""

    print(result.to_markdown() if args.markdown else str(result))
    if args.by_category:
        for metric in (f"recall@{ks[-1]}", f"hit@{ks[-1]}", f"all@{ks[-1]}"):
            table = result.by_category(metric)
            print()
            print(
                frame_to_markdown(table.reset_index())
                if args.markdown
                else table.to_string(float_format=lambda v: f"{v:.3f}")
            )
