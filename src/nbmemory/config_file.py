"""The project's configuration file: ``nbmemory.toml``, or ``[tool.nbmemory]`` in
``pyproject.toml``, read when a store opens.

Vectora's state persistence configures a project in one file
(``vectora.config.yaml``, its "configuration reference"); nbmemory reads the same
keys, in TOML, and maps each one to a :class:`~nbmemory.config.Settings` field
(:data:`KEYS`)::

    [state.session]
    ttl_hours = 24            # session_ttl_hours
    max_concurrent = 5        # max_concurrent_sessions
    [state.memory]
    agents_file = "AGENTS.md" # synced at open (relative to this file's folder)
    auto_update = true        # ... and watched until close
    [state.audit]
    retain_days = 90          # audit_retention_days

Any other setting goes in a ``[settings]`` table under its own name
(``relevance_threshold = 0.5``).  The file is found (:func:`find`) by
``$NBMEMORY_CONFIG``, else in the store's folder, else in the working folder: the
first ``nbmemory.toml``, or ``pyproject.toml`` with a ``[tool.nbmemory]`` table.
Arguments given to :class:`~nbmemory.Memory` win over the file (:func:`merged`).
A key nbmemory does not know, or a value of the wrong type, is an error naming the
file and its line; nothing is opened then.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import write_text_atomically
from .config import Settings
from .errors import InvalidInput
from .file_kinds import database_kind, named_like_database, read_head

#: Points at the configuration file to read (``none``: read none).
ENV_CONFIG = "NBMEMORY_CONFIG"
FILE_NAME = "nbmemory.toml"
PYPROJECT = "pyproject.toml"

#: Key of Vectora's configuration reference -> the setting it sets.
KEYS: dict[str, str] = {
    "state.session.ttl_hours": "session_ttl_hours",
    "state.session.max_concurrent": "max_concurrent_sessions",
    "state.session.persist_on_exit": "persist_on_exit",
    "state.memory.agents_file": "agents_file",
    "state.memory.auto_update": "agents_auto_update",
    "state.memory.embedding_model": "embedding_model",
    "state.memory.max_memory_tokens": "max_memory_tokens",
    "state.audit.enabled": "audit_enabled",
    "state.audit.retain_days": "audit_retention_days",
    "state.audit.redact_patterns": "redact_patterns",
}
#: Settings that are not nbmemory's to read from a file (set by the code only).
_NOT_IN_FILES = frozenset({"relevance_threshold_explicit"})


def setting_names() -> list[str]:
    """Every setting a file may set under ``[settings]``."""
    return [f.name for f in dataclasses.fields(Settings) if f.name not in _NOT_IN_FILES]


def key_of(name: str) -> str:
    """The file key of a setting: Vectora's key when it has one, else ``settings.NAME``."""
    for key, setting in KEYS.items():
        if setting == name:
            return key
    return f"settings.{name}"


def setting_of(key: str) -> str:
    """The setting a key sets (Vectora's key, ``settings.NAME`` or a bare NAME)."""
    if key in KEYS:
        return KEYS[key]
    name = key.removeprefix("settings.")
    if name in setting_names():
        return name
    raise InvalidInput(
        f"unknown configuration key {key!r}; keys: {', '.join(KEYS)}, or settings.NAME "
        f"for a setting ({', '.join(setting_names())})"
    )


@dataclass
class ConfigFile:
    """What one configuration file sets: setting -> value, and where it says so."""

    path: Path
    #: ``"tool.nbmemory"`` in a pyproject.toml, else None (the whole file)
    table: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    #: setting -> line of the file (1-based) that sets it
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        """Where relative paths of the file (``agents_file``) start."""
        return self.path.parent

    def where(self, name: str) -> str:
        """``path:line`` of the setting ``name``."""
        line = self.lines.get(name)
        return f"{self.path}:{line}" if line else str(self.path)

    def settings(self, base: Settings | None = None) -> Settings:
        """``base`` (the defaults) with this file's values, each checked as
        :class:`Settings` checks it; an error names the file and line."""
        settings = base or Settings()
        for name, value in self.values.items():
            try:
                settings = settings.replace(**{name: _setting_value(name, value)})
            except InvalidInput as exc:
                raise InvalidInput(f"{self.where(name)}: {key_of(name)}: {exc}") from None
        return settings


def _setting_value(name: str, value: Any) -> Any:
    """A TOML value as the setting holds it (arrays of patterns are tuples)."""
    if name == "redact_patterns" and isinstance(value, list):
        return tuple(value)
    return value


def _plain(value: Any) -> Any:
    """tomlkit's items as plain Python values."""
    return value.unwrap() if hasattr(value, "unwrap") else value


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\.\"']+)\s*=")


def _key_lines(text: str) -> dict[str, int]:
    """Dotted key -> its line, from the file's tables and ``key =`` lines."""
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            table = header.group(1).replace('"', "").replace("'", "").replace(" ", "")
            lines.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            name = key.group(1).replace('"', "").replace("'", "")
            lines.setdefault(f"{table}.{name}" if table else name, number)
    return lines


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        whole = dotted in KEYS or dotted.removeprefix("settings.") in setting_names()
        if isinstance(value, Mapping) and not whole:  # (a setting may be a table itself)
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = _plain(value)
    return out


def load(path: str | os.PathLike[str]) -> ConfigFile:
    """Read one configuration file (``nbmemory.toml`` or a ``pyproject.toml``)."""
    file = Path(path)
    return parse(_read(file), file)


def _read(file: Path) -> str:
    """The text of a configuration file; one line naming it when it cannot be read."""
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read the configuration file {file}: {exc}") from None


def _check_not_a_database(file: Path) -> None:
    """Refuse a database as the configuration file, by its first bytes or by its name:
    an empty ``agent.duckdb`` parses as TOML, and is a new store to nbmemory."""
    kind = database_kind(read_head(file)) if file.is_file() else None
    if kind is not None or named_like_database(file):
        raise InvalidInput(
            f"{file} is {f'a {kind} database' if kind else 'named like a database'}, not a "
            f"configuration file; nothing was written. Pass {FILE_NAME} or {PYPROJECT}"
        )


def _toml(text: str, file: Path) -> Any:
    """``text`` parsed by tomlkit (comments and layout kept); one line naming the file
    and the line when it is not TOML."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise InvalidInput(
            f"{file}:{exc.line}: not valid TOML ({exc}); fix the file or set "
            f"{ENV_CONFIG}=none to open without it"
        ) from None


def parse(text: str, file: Path) -> ConfigFile:
    """The configuration ``text`` holds, as the file ``file`` (its name says whether
    it is a pyproject.toml; errors name it)."""
    document = _toml(text, file).unwrap()
    table: str | None = None
    if file.name == PYPROJECT:
        table = "tool.nbmemory"
        document = document.get("tool", {}).get("nbmemory", {})
    key_lines = _key_lines(text)
    config = ConfigFile(file, table)
    for key, value in _flatten(document).items():
        line = key_lines.get(f"{table}.{key}" if table else key)
        where = f"{file}:{line}" if line else str(file)
        if key.startswith("settings.") or key in KEYS:
            try:
                name = setting_of(key)
            except InvalidInput as exc:
                raise InvalidInput(f"{where}: {exc}") from None
        else:
            raise InvalidInput(
                f"{where}: unknown configuration key {key!r}; keys: {', '.join(KEYS)}, or a "
                f"setting under [settings] ({', '.join(setting_names())})"
            )
        if name in config.values:
            raise InvalidInput(f"{where}: {name} is set twice ({key_of(name)} and settings.{name})")
        config.values[name] = value
        if line:
            config.lines[name] = line
    config.settings()  # every value checked now: a wrong one is refused at open
    return config


def _has_tool_table(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(r"^\s*\[\s*tool\.nbmemory(?:\.[^\]]*)?\s*\]", text, re.M) is not None


def find(store_path: str | None = None, cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The configuration file a store at ``store_path`` reads, or None.

    ``$NBMEMORY_CONFIG`` (``none``: no file), else the store's folder, else the
    working folder: ``nbmemory.toml``, then ``pyproject.toml`` holding
    ``[tool.nbmemory]``.
    """
    named = os.environ.get(ENV_CONFIG)
    if named:
        if named.strip().lower() in {"none", "off", "0"}:
            return None
        path = Path(named).expanduser()
        if not path.is_file():
            raise InvalidInput(
                f"{ENV_CONFIG}={named} is not a file; point it at an nbmemory.toml, or set "
                f"{ENV_CONFIG}=none to read no configuration file"
            )
        return path
    folders: list[Path] = []
    if store_path and store_path != ":memory:" and "://" not in store_path:
        # (a path the store refuses, e.g. with a NUL byte, is refused there, in its words)
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            folders.append(Path(store_path).expanduser().resolve().parent)
    here = Path(cwd) if cwd is not None else Path.cwd()
    if here.resolve() not in folders:
        folders.append(here.resolve())
    for folder in folders:
        with contextlib.suppress(OSError, ValueError):
            if (folder / FILE_NAME).is_file():
                return folder / FILE_NAME
            if (folder / PYPROJECT).is_file() and _has_tool_table(folder / PYPROJECT):
                return folder / PYPROJECT
    return None


def explicit(settings: Settings | None, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a caller gave: ``overrides``, and the fields of ``settings`` that
    differ from the defaults."""
    given: dict[str, Any] = {}
    if settings is not None:
        defaults = Settings()
        for f in dataclasses.fields(Settings):
            if f.name in _NOT_IN_FILES:
                continue
            value = getattr(settings, f.name)
            if value != getattr(defaults, f.name):
                given[f.name] = value
        if settings.relevance_threshold_explicit:
            given["relevance_threshold"] = settings.relevance_threshold
    given.update(overrides)
    return given


def merged(
    config: ConfigFile | None, settings: Settings | None, overrides: Mapping[str, Any]
) -> Settings:
    """The settings of a store: the defaults, then the file, then what the caller gave."""
    base = Settings() if config is None else config.settings()
    given = explicit(settings, overrides)
    if config is not None and "agents_file" in config.values and "agents_file" not in given:
        base = base.replace(agents_file=str(config.folder / str(config.values["agents_file"])))
    return base.replace(**given) if given else base


def write(path: str | os.PathLike[str], key: str, value: str) -> ConfigFile:
    """Set ``key`` to ``value`` (TOML syntax, or a bare word as a string) in the
    file at ``path`` (made if missing), keeping its comments and layout; the
    value is checked before the file is written."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    file = Path(path)
    name = setting_of(key)
    dotted = key if key in KEYS else f"settings.{name}"
    try:
        parsed = tomlkit.parse(f"v = {value}")["v"]
    except ParseError:
        parsed = value  # a bare word: a string
    plain = _plain(parsed)
    try:
        Settings().replace(**{name: _setting_value(name, plain)})
    except InvalidInput as exc:
        raise InvalidInput(f"{key} = {value}: {exc}") from None
    _check_not_a_database(file)
    text = _read(file) if file.exists() else ""
    document = _toml(text, file)  # a file that does not read is left as it is
    table: Any = document
    parts = dotted.split(".")
    if file.name == PYPROJECT:
        parts = ["tool", "nbmemory", *parts]
    for depth, part in enumerate(parts[:-1], 1):
        if part not in table:
            table[part] = tomlkit.table()
        table = table[part]
        if not isinstance(table, MutableMapping):
            raise InvalidInput(
                f"{file}: {'.'.join(parts[:depth])} is a value, not a table, so {key} "
                "cannot go under it; fix the file"
            )
    table[parts[-1]] = plain
    new_text = tomlkit.dumps(document)
    config = parse(new_text, file)  # the whole file still reads: else nothing is written
    write_text_atomically(file, new_text)
    return config
