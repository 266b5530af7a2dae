"""The ``nbmemory`` command line: one module per command group.

Each sub-command is a function ``cmd_<name>(args) -> int`` registered in
:func:`build_parser`; errors nbmemory raises on purpose become one line on stderr
and exit code 1 (2 for bad usage, as argparse does), a store held by another
process named with the command line's remedies (``--shared``).  Every command on a
store takes ``--store``, ``--embedder`` and ``--shared`` (:mod:`.options`), and opens
it through :mod:`.stores`: a store the command made is removed if it then fails.

* :mod:`.demo` — ``demo``;
* :mod:`.state` — ``state list|cleanup|delete|export|import``, ``memory sync``, ``health``;
* :mod:`.research` — ``eval locomo``, ``import-sqlite``;
* :mod:`.lake` — ``lake status|snapshots|compact|expire|push|pull``;
* :mod:`.install` — ``install-ipython-config``;
* :mod:`.logs` — ``logs`` (what was redacted, refused by the blocklist or failed to embed);
* :mod:`.project_config` — ``config show|get|set`` (the project's configuration file);
* :mod:`.consolidate` — ``consolidate run|archive|restore`` (summaries, compaction).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..errors import NbMemoryError
from ..version import __version__
from . import consolidate, install, lake, logs, project_config, research, state
from .demo import cmd_demo
from .options import in_cli_words, store_options


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nbmemory", description="A memory layer for AI agents, in one DuckDB file."
    )
    parser.add_argument("--version", action="version", version=f"nbmemory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="remember a conversation and print a context")
    store_options(demo, default_store="a store in memory, kept nowhere")
    demo.add_argument("--question", default="What language do I like?")
    demo.set_defaults(func=cmd_demo)
    research.add_commands(sub)  # eval, import-sqlite
    install.add_command(sub)  # install-ipython-config
    state.add_commands(sub)  # state, memory sync, health
    lake.add_commands(sub)  # lake status|snapshots|compact|expire|push|pull
    project_config.add_commands(sub)  # config show|get|set
    logs.add_commands(sub)  # logs --filter redaction|blocklist|errors
    consolidate.add_commands(sub)  # consolidate run|archive|restore
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
        print(f"nbmemory: error: {in_cli_words(exc, args)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("nbmemory: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os._exit(0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
