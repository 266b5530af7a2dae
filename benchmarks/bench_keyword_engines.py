"""Keyword search engines side by side: tantivy (Rust BM25) against nbmemory's KeywordIndex.

    pip install tantivy   # not a dependency of nbmemory: only this benchmark needs it
    python benchmarks/bench_keyword_engines.py --sizes 100000 [1000000]

Two parts, both engines in the same run:

1. Recall on LoCoMo, keywords only (no embedding model): every turn of a
   conversation ("Speaker: text") goes into both engines, each answerable
   question (categories 1-4) is a query, and recall@5, recall@10 and MRR@10 of
   the evidence turns are averaged over the questions, as
   :func:`nbmemory.research.evaluation.evaluate_queries` counts them.  The data
   is read where it lies (``--locomo``, default ``$NBMEMORY_LOCOMO_PATH``);
   ``--no-locomo`` skips this part.  KeywordIndex is
   the plain BM25 of ``score_array``, without the speaker, time and neighbour
   signals that ``Memory.search`` adds on top.

2. Scale on synthetic text (12 Zipf words a memory, ``_common.random_text``):
   each engine builds, is queried and is written to in its own processes, so
   peak RSS is per engine; the texts go to a parquet file first, from which
   both build; KeywordIndex saves its arrays (as nbmemory does beside a store)
   and a new process opening it cold loads them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    compile_package,
    machine,
    p50,
    print_table,
    random_text,
    timings,
)

try:
    import tantivy
except ImportError:  # an optional comparison: nbmemory does not depend on tantivy
    tantivy = None

import numpy as np  # noqa: E402

from nbmemory.retrieval import keywords  # noqa: E402
from nbmemory.retrieval.keywords import KeywordIndex  # noqa: E402

#: the keyword index's package (``nbmemory.retrieval.keywords``) this process imported
KEYWORDS_DIR = Path(keywords.__file__).parent


def source_digest(folder: Path) -> str:
    """A short hash of a package's sources: which KeywordIndex a process measured."""
    digest = hashlib.sha1()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:10]


#: the keyword index's sources as imported (they may change while the benchmark runs)
KEYWORD_INDEX_DIGEST = source_digest(KEYWORDS_DIR)

DEFAULT_LOCOMO = "../shared/data/locomo"
NAMESPACE = "default"
#: Alphanumeric words: what tantivy's simple tokenizer splits a text into, so a
#: cleaned query has no query-language syntax left and every word is one term.
_WORD_RE = re.compile(r"[^\W_]+")


# -- tantivy helpers -------------------------------------------------------------------
def tantivy_schema(tokenizer: str) -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    # term frequencies, no positions: what BM25 needs, and all KeywordIndex keeps
    builder.add_text_field("text", tokenizer_name=tokenizer, index_option="freq")
    builder.add_unsigned_field("pos", fast=True)  # the row's position: maps a hit to its id
    return builder.build()


def stop_stem_analyzer() -> tantivy.TextAnalyzer:
    """en_stem plus tantivy's English stop word list (Lucene's 33 words)."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def tantivy_doc(text: str, pos: int) -> tantivy.Document:
    doc = tantivy.Document()
    doc.add_text("text", text)
    doc.add_unsigned("pos", pos)
    return doc


def clean_query(text: str) -> str:
    """The query's distinct words, lower-cased, separated by spaces: no punctuation
    for tantivy's query parser to choke on, no upper-case AND/OR/NOT operators, and
    each word once (KeywordIndex also scores a repeated term once)."""
    return " ".join(dict.fromkeys(_WORD_RE.findall(text.lower())))


def tantivy_search(index: tantivy.Index, searcher: tantivy.Searcher, text: str, k: int) -> list:
    """(position, score) of the ``k`` best documents for ``text``, best first."""
    cleaned = clean_query(text)
    if not cleaned:
        return []
    try:
        query = index.parse_query(cleaned, ["text"])
    except ValueError:  # a word the tokenizer still splits (a phrase, and no positions)
        query, _ = index.parse_query_lenient(cleaned, ["text"])
    hits = searcher.search(query, k, count=False).hits
    positions = searcher.fast_field_values("pos", [address for _, address in hits])
    return [(pos, score) for (score, _), pos in zip(hits, positions, strict=True)]


# -- part 1: LoCoMo recall ----------------------------------------------------------------
LOCOMO_ENGINES = [
    ("KeywordIndex", "own tokenizer: stop words + light suffix stemmer"),
    ("tantivy", "en_stem (lower-case + Snowball English)"),
    ("tantivy", "default (lower-case, no stemming)"),
    ("tantivy", "en_stem + tantivy's English stop words (Lucene's 33)"),
]


def locomo_recall(path: str, ks: tuple[int, int] = (5, 10)) -> tuple[list, list, list]:
    from nbmemory.research.datasets import locomo_files, read_locomo

    top = max(ks)
    per_engine: dict[int, list[dict]] = {i: [] for i in range(len(LOCOMO_ENGINES))}
    conversations = []
    for file in locomo_files(path):
        conv = read_locomo(file)
        turns = conv.turns
        dia_ids = turns["dia_id"].tolist()
        contents = turns["content"].tolist()
        questions = conv.answerable()
        conversations.append((conv.conversation_id, len(dia_ids), len(questions)))
        ours = KeywordIndex()
        ours.rebuild(
            (dia_id, NAMESPACE, f"session_{session}", content, created_at, seq)
            for seq, (dia_id, session, content, created_at) in enumerate(
                zip(dia_ids, turns["session"], contents, turns["created_at"], strict=True)
            )
        )
        engines = [lambda q, ours=ours: [i for i, _ in ours.score_array(q, NAMESPACE).top(top)]]
        for tokenizer in ("en_stem", "default", "en_stem_stop"):
            index = tantivy.Index(tantivy_schema(tokenizer))  # in RAM
            if tokenizer == "en_stem_stop":
                index.register_tokenizer("en_stem_stop", stop_stem_analyzer())
            writer = index.writer(50_000_000, 1)
            for pos, content in enumerate(contents):
                writer.add_document(tantivy_doc(content, pos))
            writer.commit()
            writer.wait_merging_threads()
            index.reload()
            searcher = index.searcher()
            engines.append(
                lambda q, index=index, searcher=searcher, dia_ids=dia_ids: [
                    dia_ids[pos] for pos, _ in tantivy_search(index, searcher, q, top)
                ]
            )
        known = set(dia_ids)
        for q in questions.itertuples(index=False):
            relevant = {d for d in q.evidence if d in known}
            for e, search in enumerate(engines):
                retrieved = search(q.question)[:top]
                row = {"category": q.category, "empty": not retrieved}
                for cut in ks:
                    row[f"recall@{cut}"] = len(relevant.intersection(retrieved[:cut])) / len(
                        relevant
                    )
                row["hit@10"] = float(any(r in relevant for r in retrieved[:10]))
                first = next((i for i, x in enumerate(retrieved) if x in relevant), None)
                row["rr"] = 0.0 if first is None else 1.0 / (first + 1)
                per_engine[e].append(row)
    table = []
    by_category = []
    for e, (engine, tokenizer) in enumerate(LOCOMO_ENGINES):
        rows = per_engine[e]
        mean = {key: float(np.mean([r[key] for r in rows])) for key in rows[0] if key != "category"}
        table.append(
            [engine, tokenizer, len(rows)]
            + [f"{mean[f'recall@{cut}']:.3f}" for cut in ks]
            + [f"{mean['rr']:.3f}", f"{mean['hit@10']:.3f}", f"{mean['empty']:.3f}"]
        )
        cells = [engine, tokenizer]
        for category in (1, 2, 3, 4):
            values = [r[f"recall@{top}"] for r in rows if r["category"] == category]
            cells.append(f"{np.mean(values):.3f} ({len(values)})" if values else "-")
        by_category.append(cells)
    return table, by_category, conversations


# -- part 2: scale, one engine per process ------------------------------------------------
def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so the peak is the build's own."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def _read_texts(folder: str) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(os.path.join(folder, "texts.parquet")).column("content").to_pylist()


def _queries(count: int) -> list[str]:
    rng = np.random.default_rng(7)
    return [random_text(rng, 3) for _ in range(count)]


def _new_texts(count: int) -> list[str]:
    rng = np.random.default_rng(11)
    return [random_text(rng, 12) for _ in range(count)]


def _rows(texts: list[str], start: int = 0):
    for i, text in enumerate(texts, start):
        yield (f"e{i}", NAMESPACE, f"s{i % 100}", text, i, i)


def child_build(engine: str, folder: str, args: argparse.Namespace) -> dict:
    """Build from the parquet texts, then warm queries (and, for ours, writes)."""
    texts = _read_texts(folder)
    n = len(texts)
    queries = _queries(args.queries)
    baseline_kb = _status_kb("VmRSS")
    reset = _reset_peak()
    out: dict = {"engine": engine, "n": n, "peak_reset": reset, "digest": KEYWORD_INDEX_DIGEST}
    if engine == "ours":
        index = KeywordIndex()
        start = time.perf_counter()
        index.rebuild(_rows(texts))
        out["build_s"] = time.perf_counter() - start
        out["build_peak_mb"] = (_status_kb("VmHWM") - baseline_kb) / 1024
        saved = os.path.join(folder, "keywords.npz")  # what nbmemory saves beside a store
        np.savez(saved, **index.to_arrays())
        out["disk_mb"] = os.path.getsize(saved) / 2**20

        def query(i: int) -> list:
            return index.score_array(queries[i % len(queries)], NAMESPACE).top(args.k)

        out["top10"] = [[round(s, 3) for _, s in query(i)[:10]] for i in range(len(queries))]
        out["query_s"] = timings(query, len(queries))
        new = _new_texts(args.writes + 2)
        counter = iter(range(len(new)))

        def write(_: int) -> None:
            i = next(counter)
            index.add(_rows([new[i]], start=n + i))

        out["write_s"] = timings(write, args.writes)
        return out
    path = os.path.join(folder, "tantivy")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    start = time.perf_counter()
    index = tantivy.Index(tantivy_schema("en_stem"), path=path)
    writer = index.writer(args.tantivy_heap_mb * 1_000_000, args.tantivy_threads)
    for pos, text in enumerate(texts):
        writer.add_document(tantivy_doc(text, pos))
    writer.commit()
    writer.wait_merging_threads()  # the index in its final shape: merges done
    out["build_s"] = time.perf_counter() - start
    out["build_peak_mb"] = (_status_kb("VmHWM") - baseline_kb) / 1024
    index.reload()
    searcher = index.searcher()
    out["segments"] = searcher.num_segments
    out["disk_mb"] = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 2**20
    ids = [f"e{i}" for i in range(n)]  # what KeywordIndex returns: ids, not positions

    def tquery(i: int) -> list:
        hits = tantivy_search(index, searcher, queries[i % len(queries)], args.k)
        return [(ids[pos], score) for pos, score in hits]

    out["top10"] = [[round(s, 3) for _, s in tquery(i)[:10]] for i in range(len(queries))]
    out["query_s"] = timings(tquery, len(queries))
    return out


def child_write_tantivy(folder: str, args: argparse.Namespace) -> dict:
    """One more document, made searchable: add + commit + reload, per document; then
    the same documents in one batch (one commit for all) for the amortised cost."""
    index = tantivy.Index.open(os.path.join(folder, "tantivy"))
    writer = index.writer(args.tantivy_heap_mb * 1_000_000, args.tantivy_threads)
    n = index.searcher().num_docs
    new = _new_texts(2 * args.writes + 2)
    counter = iter(range(len(new)))

    def write(_: int) -> None:
        i = next(counter)
        writer.add_document(tantivy_doc(new[i], n + i))
        writer.commit()
        index.reload()
        index.searcher()

    out: dict = {"write_s": timings(write, args.writes)}
    start = time.perf_counter()
    for i in counter:
        writer.add_document(tantivy_doc(new[i], n + i))
    writer.commit()
    index.reload()
    index.searcher()
    out["batch_doc_s"] = (time.perf_counter() - start) / args.writes
    out["num_docs"] = index.searcher().num_docs
    writer.wait_merging_threads()
    return out


#: A new process opens the index and answers one query.  KeywordIndex loads the
#: arrays it saved (as nbmemory does beside a store, ``index_cache``).
COLD = """
import json, os, sys, time
start = time.perf_counter()
engine, folder, query, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if engine == "tantivy":
    import tantivy
    imported = time.perf_counter()
    index = tantivy.Index.open(os.path.join(folder, "tantivy"))
    searcher = index.searcher()
    hits = searcher.search(index.parse_query(query, ["text"]), k, count=False).hits
    top = [f"e{p}" for p in searcher.fast_field_values("pos", [a for _, a in hits])]
else:
    import numpy as np
    from nbmemory.retrieval import keywords
    from nbmemory.retrieval.keywords import KeywordIndex
    imported = time.perf_counter()
    with np.load(os.path.join(folder, "keywords.npz"), allow_pickle=False) as saved:
        arrays = {name: saved[name] for name in saved.files}
    index = KeywordIndex()
    index.load_arrays(arrays)
    top = [i for i, _ in index.score_array(query, "default").top(k)]
seconds = time.perf_counter() - start
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
import_s = imported - start
digest = None
if engine != "tantivy":
    import hashlib, pathlib
    sources = hashlib.sha1()
    for path in sorted(pathlib.Path(keywords.__file__).parent.glob("*.py")):
        sources.update(path.name.encode() + b"\0" + path.read_bytes())
    digest = sources.hexdigest()[:10]
print(json.dumps({"seconds": seconds, "import_s": import_s, "rss_mb": peak / 1024, "hits": len(top), "digest": digest}))
"""


def _run(argv: list[str]) -> dict:
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"benchmark child failed: {' '.join(argv[:4])}")
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _child_argv(args: argparse.Namespace, mode: str, engine: str, folder: str) -> list[str]:
    return [
        sys.executable,
        __file__,
        "--child",
        mode,
        engine,
        folder,
        "--queries",
        str(args.queries),
        "-k",
        str(args.k),
        "--writes",
        str(args.writes),
        "--tantivy-heap-mb",
        str(args.tantivy_heap_mb),
        "--tantivy-threads",
        str(args.tantivy_threads),
    ]


def _filesystem(path: str) -> str:
    """The file system type holding ``path`` (fsync on commit costs differ a lot)."""
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                parts = line.split()
                mount = parts[1]
                if os.path.realpath(path).startswith(mount) and len(mount) > len(best):
                    best, kind = mount, parts[2]
    except OSError:
        pass
    return kind


def scale(n: int, args: argparse.Namespace) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tempfile.mkdtemp(prefix="nbmemory-kw-", dir=args.workdir)
    try:
        rng = np.random.default_rng(n)
        texts = [random_text(rng, 12) for _ in range(n)]
        parquet = os.path.join(folder, "texts.parquet")
        pq.write_table(pa.table({"content": texts}), parquet)
        del texts
        result: dict = {"n": n, "parquet_mb": os.path.getsize(parquet) / 2**20}
        result["fs"] = _filesystem(folder)
        first_query = clean_query(_queries(1)[0])
        compile_package()
        for engine in ("ours", "tantivy"):
            print(f"  {n:,} memories: {engine} ...", file=sys.stderr, flush=True)
            built = _run(_child_argv(args, "build", engine, folder))
            cold_argv = [sys.executable, "-c", COLD, engine, folder, first_query, str(args.k)]
            built["cold"] = _run(cold_argv)
            if engine == "tantivy":
                built.update(_run(_child_argv(args, "write", engine, folder)))
            result[engine] = built
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _agreement(a: list[list[float]], b: list[list[float]]) -> float:
    """Share of queries whose top-10 BM25 scores agree (ties may order ids differently)."""
    same = [
        len(x) == len(y)
        and all(abs(s - t) <= 0.01 * max(abs(s), 1.0) for s, t in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    ]
    return sum(same) / max(len(same), 1)


def print_scale(results: list[dict], args: argparse.Namespace) -> None:
    print(
        f"scale: synthetic memories of 12 Zipf words (5,000-word vocabulary); "
        f"{args.queries} queries of 3 Zipf words, top {args.k}; tantivy en_stem on disk, "
        f"writer {args.tantivy_threads} thread(s), {args.tantivy_heap_mb} MB heap"
    )
    rows = []
    for r in results:
        for engine, name in (("ours", "KeywordIndex"), ("tantivy", "tantivy")):
            e = r[engine]
            cold = e["cold"]
            write_us = p50(e["write_s"]) * 1e6
            if engine == "ours":
                disk = f"{e['disk_mb']:.2f} (saved arrays)"
                write = f"{write_us:.0f} (add)"
                cold_cell = (
                    f"{cold['seconds']:.2f} (imports {cold['import_s']:.2f} + load saved arrays)"
                )
            else:
                disk = f"{e['disk_mb']:.2f} ({e['segments']} segment(s))"
                write = f"{write_us:.0f} (add+commit+reload); {e['batch_doc_s'] * 1e6:.0f} batched"
                cold_cell = f"{cold['seconds']:.3f} (imports {cold['import_s']:.3f} + Index.open)"
            rows.append(
                [
                    f"{r['n']:,}",
                    name,
                    f"{e['build_s']:.2f}",
                    f"{e['build_peak_mb']:.0f}",
                    disk,
                    cold_cell,
                    f"{cold['rss_mb']:.0f}",
                    f"{p50(e['query_s']) * 1000:.2f}",
                    write,
                ]
            )
    print_table(
        [
            "memories",
            "engine",
            "build s",
            "build peak RSS Δ MiB",
            "on disk MiB",
            "cold open + 1st query s",
            "cold process peak RSS MiB",
            f"warm query p50 ms (top {args.k})",
            "write 1 doc p50 µs",
        ],
        rows,
    )
    print()
    for r in results:
        agree = _agreement(r["ours"]["top10"], r["tantivy"]["top10"])
        print(
            f"- {r['n']:,}: top-10 BM25 scores agree between the engines on "
            f"{agree:.0%} of the queries; index files on {r['fs']}; "
            f"tantivy write batch: {args.writes} docs, one commit"
        )
    digests = {KEYWORD_INDEX_DIGEST} | {
        d for r in results for d in (r["ours"]["digest"], r["ours"]["cold"]["digest"])
    }
    if len(digests) > 1:
        print(
            f"- WARNING: nbmemory.retrieval.keywords changed during the run (sha1 {', '.join(sorted(digests))}):"
            " the KeywordIndex rows mix versions"
        )
    if not all(r[e]["peak_reset"] for r in results for e in ("ours", "tantivy")):
        print("- VmHWM could not be reset: build peak deltas include loading the texts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--locomo", default=os.environ.get("NBMEMORY_LOCOMO_PATH", DEFAULT_LOCOMO))
    parser.add_argument("--no-locomo", action="store_true", help="skip the LoCoMo recall part")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("-k", type=int, default=50, help="top-k of the scale queries")
    parser.add_argument("--writes", type=int, default=50, help="single-document writes timed")
    parser.add_argument("--tantivy-heap-mb", type=int, default=128)
    parser.add_argument("--tantivy-threads", type=int, default=1)
    parser.add_argument("--workdir", help="where the indexes are built (default: the temp dir)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if tantivy is None:
        print("tantivy is not installed: pip install tantivy to run this comparison")
        return
    if args.child:
        mode, engine, folder = args.child
        if mode == "build":
            result = child_build(engine, folder, args)
        else:
            result = child_write_tantivy(folder, args)
        print(json.dumps(result))
        return
    print(f"machine: {machine()}")
    print(
        f"tantivy {_tantivy_version()} vs nbmemory KeywordIndex "
        f"({KEYWORDS_DIR}, sha1 {KEYWORD_INDEX_DIGEST})\n"
    )
    if not args.no_locomo:
        if Path(args.locomo).exists():
            table, by_category, conversations = locomo_recall(args.locomo)
            turns = sum(c[1] for c in conversations)
            print(
                f"LoCoMo, keywords only: {len(conversations)} conversations, {turns:,} turns "
                f"('Speaker: text'), answerable questions (categories 1-4), one index per "
                "conversation; recall@k of the evidence turns, macro over questions"
            )
            print_table(
                ["engine", "tokenizer", "questions", "recall@5", "recall@10", "MRR@10"]
                + ["hit@10", "no hit"],
                table,
            )
            print()
            print("recall@10 by category (questions)")
            print_table(
                ["engine", "tokenizer", "1 multi-hop", "2 temporal", "3 open-domain"]
                + ["4 single-hop"],
                by_category,
            )
            print()
        else:
            print(f"LoCoMo data not found at {args.locomo}: recall part skipped\n")
    sys.stdout.flush()
    results = [scale(n, args) for n in args.sizes]
    print_scale(results, args)


def _tantivy_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tantivy")
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
