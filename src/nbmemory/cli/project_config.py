"""``nbmemory config show|get|set``: the project's configuration file, as Vectora's
``vectora config get state.audit.retain_days`` reads it.

Every command finds the file the store would read (``--for-store``'s folder, else the
working folder; ``$NBMEMORY_CONFIG``), or takes ``--file``.  No store is opened.  ``show`` prints every
setting with its value and where it comes from (the file and line, or the
default); ``get KEY`` one value; ``set KEY VALUE`` writes it (the file is made when
there is none: ``nbmemory.toml`` in the working folder), keeping the file's
comments, and refuses a value the store would refuse.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import config_file
from ..config import Settings, default_store_path


def add_commands(sub: Any) -> None:
    """Register ``config show|get|set`` on the ``nbmemory`` parser."""
    config = sub.add_parser("config", help="the project's configuration file: show, get, set")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)

    show = actions.add_parser("show", help="every setting, its value and where it comes from")
    _common(show)
    show.add_argument("--json", action="store_true", help="print JSON records")
    show.set_defaults(func=cmd_config_show)

    get = actions.add_parser("get", help="one setting's value (e.g. state.audit.retain_days)")
    _common(get)
    get.add_argument("key", help="a key of the file (state.audit.retain_days) or a setting name")
    get.set_defaults(func=cmd_config_get)

    put = actions.add_parser("set", help="write one setting into the file")
    _common(put)
    put.add_argument("key", help="a key of the file (state.audit.retain_days) or a setting name")
    put.add_argument(
        "value", help="a TOML value: 30, true, 0.5, '\"AGENTS.md\"' (a bare word is text)"
    )
    put.set_defaults(func=cmd_config_set)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--for-store",
        dest="store",
        default=None,
        help="find the file a store at this path reads (default: $NBMEMORY_PATH or "
        "./nbmemory.duckdb); the store is not opened",
    )
    parser.add_argument(
        "--file", default=None, help="the configuration file (default: the one the store reads)"
    )


def _found(args: argparse.Namespace) -> Path | None:
    if args.file:
        return Path(args.file)
    return config_file.find(args.store or default_store_path())


def _rows(config: config_file.ConfigFile | None) -> list[dict[str, Any]]:
    settings = Settings() if config is None else config.settings()
    rows = []
    for name in config_file.setting_names():
        value = getattr(settings, name)
        given = config is not None and name in config.values
        source = config.where(name) if given and config is not None else "default"
        rows.append(
            {"key": config_file.key_of(name), "setting": name, "value": value, "source": source}
        )
    return rows


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, default=str)


def cmd_config_show(args: argparse.Namespace) -> int:
    path = _found(args)
    config = None if path is None else config_file.load(path)
    rows = _rows(config)
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    print(f"configuration file: {path or 'none (every value is the default)'}")
    width = max(len(r["key"]) for r in rows)
    for row in rows:
        print(f"{row['key']:<{width}}  {_shown(row['value'])}  ({row['source']})")
    return 0


def cmd_config_get(args: argparse.Namespace) -> int:
    name = config_file.setting_of(args.key)
    path = _found(args)
    config = None if path is None else config_file.load(path)
    settings = Settings() if config is None else config.settings()
    print(_shown(getattr(settings, name)))
    return 0


def cmd_config_set(args: argparse.Namespace) -> int:
    path = _found(args) or Path.cwd() / config_file.FILE_NAME
    config = config_file.write(path, args.key, args.value)
    name = config_file.setting_of(args.key)
    value = getattr(config.settings(), name)
    print(f"{config_file.key_of(name)} = {_shown(value)} ({config.where(name)})")
    return 0
