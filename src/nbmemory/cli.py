"""The ``nbmemory`` command line.

Each sub-command is a function ``cmd_<name>(args) -> int`` registered in
:func:`build_parser`; errors nbmemory raises on purpose become one line on stderr
and exit code 1 (2 for bad usage, as argparse does).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import __version__
from .errors import NbMemoryError

DEMO_CONVERSATION = [
    ("user", "Hi! My name is John and I love TypeScript.", None),
    ("assistant", "Nice to meet you, John! TypeScript is a great choice.", None),
    ("user", "Our project budget is $50k and the deadline is March 3rd.", 0.9),
    ("assistant", "Noted: budget $50k, deadline March 3rd.", None),
    ("tool", "calendar.create(title='Project deadline', date='2025-03-03') -> ok", None),
    ("user", "I prefer short answers with code examples.", 0.85),
    ("system", "You are a helpful coding assistant.", None),
]


def _store_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        default=None,
        help="store file (default: $NBMEMORY_PATH or ./nbmemory.duckdb)",
    )
    parser.add_argument(
        "--embedder",
        default=None,
        help="embedding model: default all-MiniLM-L6-v2 via fastembed; 'hash' for offline tests",
    )


def cmd_demo(args: argparse.Namespace) -> int:
    """Remember a short conversation, then show what the agent would recall."""
    from .memory import Memory

    path = args.store or ":memory:"
    with Memory(path, embedder=args.embedder) as mem:
        for role, text, importance in DEMO_CONVERSATION:
            mem.add_event("demo", role, text, importance=importance)
        mem.flush()
        print(f"store: {path}   model: {mem.model_name}")
        print(f"remembered {len(DEMO_CONVERSATION)} events in session 'demo'\n")
        question = args.question
        print(f"search({question!r}):")
        hits = mem.search(question, limit=3)
        for row in hits.itertuples():
            print(f"  {row.similarity:.3f}  {row.role:<9} {row.content}")
        context = mem.get_context("demo", question)
        print(f"\nget_context('demo', {question!r}):")
        frame = context.to_frame()
        for row in frame.itertuples():
            sim = "" if row.similarity != row.similarity else f" sim={row.similarity:.3f}"
            print(f"  #{row.rank} [{row.strategies}]{sim} imp={row.importance:.2f}  {row.content}")
        if not context.by_strategy("relevance") and len(hits):
            print(
                f"  (relevance found nothing above {mem.settings.relevance_threshold}: the best"
                f" memory scored {hits['similarity'].iloc[0]:.3f}; tune the threshold with"
                " nbmemory's research toolkit)"
            )
        prompt = context.to_prompt()
        print("\nprompt for the agent:\n" + prompt)
        print(f"\n({prompt.report()})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nbmemory", description="A memory layer for AI agents, in one DuckDB file."
    )
    parser.add_argument("--version", action="version", version=f"nbmemory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="remember a conversation and print a context")
    _store_arg(demo)
    demo.add_argument("--question", default="What language do I like?")
    demo.set_defaults(func=cmd_demo)

    from .research_cli import add_commands as add_research_commands  # eval, import-sqlite

    add_research_commands(sub)

    from .ipython_config import add_command as add_ipython_config_command

    add_ipython_config_command(sub)  # install-ipython-config

    from .cli_state import add_commands as add_state_commands  # state, memory sync, health

    add_state_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nbmemory`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except NbMemoryError as exc:
        print(f"nbmemory: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("nbmemory: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os._exit(0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
