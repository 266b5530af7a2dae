"""The project's configuration file (Vectora's state persistence, 003: "Referência de
Configuração", ``vectora.config.yaml``'s ``state:`` keys), read when a store opens."""

from __future__ import annotations

import json

import pytest

from nbmemory import Memory, cli
from nbmemory.config import Settings
from nbmemory.errors import InvalidInput

VECTORA = """\
# the keys of Vectora's configuration reference, in TOML
[state.session]
ttl_hours = 12          # Tempo limite de inatividade antes da limpeza
max_concurrent = 3
persist_on_exit = true

[state.memory]
max_memory_tokens = 2048

[state.audit]
enabled = true
retain_days = 30
redact_patterns = ["sesame\\\\s+\\\\w+"]

[settings]
relevance_threshold = 0.5
importance_by_role = { user = 0.6, assistant = 0.5, tool = 0.3, system = 0.1 }
"""


@pytest.fixture(autouse=True)
def _no_env_config(monkeypatch):
    monkeypatch.delenv("NBMEMORY_CONFIG", raising=False)


def test_a_file_beside_the_store_sets_vectoras_keys(tmp_path):
    (tmp_path / "nbmemory.toml").write_text(VECTORA)
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash") as mem:
        s = mem.settings
        assert mem.config_file == tmp_path / "nbmemory.toml"
        assert (s.session_ttl_hours, s.max_concurrent_sessions) == (12, 3)
        assert (s.max_memory_tokens, s.audit_retention_days) == (2048, 30)
        assert s.relevance_threshold == 0.5 and s.importance_by_role["user"] == 0.6
        event = mem.add_event("s", "user", "the door opens with sesame please")
        assert "please" not in mem.get(event.id).content  # the file's pattern redacts


def test_arguments_win_over_the_file(tmp_path):
    (tmp_path / "nbmemory.toml").write_text(VECTORA)
    path = str(tmp_path / "m.duckdb")
    with Memory(path, embedder="hash", audit_retention_days=7) as mem:
        assert mem.settings.audit_retention_days == 7
        assert mem.settings.session_ttl_hours == 12  # the rest still from the file
    with Memory(path, embedder="hash", settings=Settings(session_ttl_hours=48)) as mem:
        assert mem.settings.session_ttl_hours == 48 and mem.settings.audit_retention_days == 30
    with Memory(path, embedder="hash", config=False) as mem:
        assert mem.settings == Settings() and mem.config_file is None


def test_pyproject_tool_table_in_the_working_folder(tmp_path, monkeypatch):
    project, stores = tmp_path / "project", tmp_path / "stores"
    project.mkdir()
    stores.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "agent"\n\n[tool.nbmemory.state.audit]\nretain_days = 14\n'
    )
    monkeypatch.chdir(project)
    with Memory(str(stores / "m.duckdb"), embedder="hash") as mem:
        assert mem.settings.audit_retention_days == 14
        assert mem.config_file == project / "pyproject.toml"
    # a pyproject.toml without the table is not a configuration file
    (project / "pyproject.toml").write_text('[project]\nname = "agent"\n')
    with Memory(str(stores / "m.duckdb"), embedder="hash") as mem:
        assert mem.config_file is None


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (
            "[state.audit]\nretain_dayz = 3\n",
            2,
            "unknown configuration key 'state.audit.retain_dayz'",
        ),
        ("[state.session]\n\nttl_hours = 'a day'\n", 3, "session_ttl_hours must be"),
        ("[state.audit]\nenabled = 'no'\n", 2, "audit_enabled must be True or False"),
        ("[state.session]\npersist_on_exit = false\n", 2, "persist_on_exit=False is not supported"),
        ("[settings]\nprofile = 'fast'\n", 2, "unknown profile 'fast'"),
        ("[state.audit\nretain_days = 3\n", 1, "not valid TOML"),
    ],
)
def test_a_wrong_file_is_refused_naming_its_line_and_nothing_is_made(tmp_path, text, line, words):
    config = tmp_path / "nbmemory.toml"
    config.write_text(text)
    store = tmp_path / "m.duckdb"
    with pytest.raises(InvalidInput) as caught:
        Memory(str(store), embedder="hash")
    message = str(caught.value)
    assert message.startswith(f"{config}:{line}: ") and words in message
    assert "\n" not in message
    assert not store.exists()


def test_the_environment_names_the_file_or_none(tmp_path, monkeypatch):
    elsewhere = tmp_path / "team.toml"
    elsewhere.write_text("[state.audit]\nretain_days = 5\n")
    (tmp_path / "nbmemory.toml").write_text("[state.audit]\nretain_days = 9\n")
    monkeypatch.setenv("NBMEMORY_CONFIG", str(elsewhere))
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash") as mem:
        assert mem.settings.audit_retention_days == 5
    monkeypatch.setenv("NBMEMORY_CONFIG", "none")
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash") as mem:
        assert mem.settings.audit_retention_days == 90
    monkeypatch.setenv("NBMEMORY_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(InvalidInput, match="NBMEMORY_CONFIG=.* is not a file"):
        Memory(str(tmp_path / "m.duckdb"), embedder="hash")


def test_audit_disabled_writes_no_compliance_rows_but_erasure_still_finds_sessions(tmp_path):
    """003: "state.audit.enabled: false ... disables ... compliance logs"."""
    (tmp_path / "nbmemory.toml").write_text("[state.audit]\nenabled = false\n")
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash") as mem:
        session = mem.sessions.start(user_id="ana")
        mem.add_event(session.session_id, "user", "I live in Porto")
        mem.facts.set("user", "city", "Porto")
        mem.flush()
        actions = set(mem.audit.log()["action"])
        assert actions <= {"session_start"}, actions
        mem.sessions.close(session.session_id)
        mem.sessions.forget_user("ana")
        assert mem.events(session_id=session.session_id).empty
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash", config=False) as mem:
        before = len(mem.audit.log())
        mem.add_event("s", "user", "audited again")
        assert len(mem.audit.log()) > before


def test_turning_the_audit_off_is_itself_audited(tmp_path):
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash", config=False) as mem:
        mem.configure(audit_enabled=False)
        mem.add_event("s", "user", "not audited")
        log = mem.audit.log()
        assert list(log["action"]).count("configure") == 1
        assert "add_event" not in set(log["action"]) and "add_events" not in set(log["action"])


def test_agents_file_is_synced_at_open_relative_to_the_file(tmp_path):
    """003: "agents_file: AGENTS.md # Caminho relativo à raiz do projeto"."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "AGENTS.md").write_text("# Build\n\nRun make test before pushing.\n")
    (project / "nbmemory.toml").write_text(
        '[state.memory]\nagents_file = "AGENTS.md"\nauto_update = false\n'
    )
    with Memory(str(project / "m.duckdb"), embedder="hash") as mem:
        memories = mem.events(kind="agents_md")
        assert memories["content"].str.contains("make test").any()


def test_agents_file_with_auto_update_is_watched_until_close(tmp_path):
    """003: "auto_update: true # Atualiza automaticamente ... novo conteúdo do AGENTS.md"."""
    import time

    (tmp_path / "AGENTS.md").write_text("# Build\n\nRun make test.\n")
    (tmp_path / "nbmemory.toml").write_text('[state.memory]\nagents_file = "AGENTS.md"\n')
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash") as mem:
        (tmp_path / "AGENTS.md").write_text("# Build\n\nRun make check, never make test.\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the watcher's thread syncs the change
            if mem.events(kind="agents_md")["content"].str.contains("make check").any():
                break
            mem.flush(timeout=0.2)
        assert mem.events(kind="agents_md")["content"].str.contains("make check").any()


def test_a_missing_agents_file_is_a_clear_error(tmp_path):
    (tmp_path / "nbmemory.toml").write_text('[state.memory]\nagents_file = "AGENTS.md"\n')
    with pytest.raises(InvalidInput, match=r"agents_file .*AGENTS.md \(set in .*nbmemory.toml:2\)"):
        Memory(str(tmp_path / "m.duckdb"), embedder="hash")


def test_cli_config_set_get_show(tmp_path, monkeypatch, capsys):
    """003: ``vectora config get state.audit.retain_days``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nbmemory.toml").write_text("# our agent\n[state.audit]\nretain_days = 90 # days\n")
    assert cli.main(["config", "set", "state.audit.retain_days", "30"]) == 0
    text = (tmp_path / "nbmemory.toml").read_text()
    assert "# our agent" in text and "retain_days = 30" in text  # comments kept
    capsys.readouterr()
    assert cli.main(["config", "get", "state.audit.retain_days"]) == 0
    assert capsys.readouterr().out.strip() == "30"
    assert cli.main(["config", "show", "--json"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["state.audit.retain_days"]["source"] == f"{tmp_path / 'nbmemory.toml'}:3"
    assert rows["state.session.ttl_hours"]["source"] == "default"
    before = (tmp_path / "nbmemory.toml").read_bytes()
    assert cli.main(["config", "set", "state.audit.retain_days", "lots"]) == 1
    assert cli.main(["config", "set", "state.audit.retain_dayz", "3"]) == 1
    assert (tmp_path / "nbmemory.toml").read_bytes() == before  # nothing written
    err = capsys.readouterr().err
    assert "audit_retention_days must be" in err and "unknown configuration key" in err
    with Memory(str(tmp_path / "m.duckdb"), embedder="hash") as mem:
        assert mem.settings.audit_retention_days == 30


def test_the_defaults_table_lists_every_key_of_vectoras_reference():
    from pathlib import Path

    from nbmemory.config_file import KEYS

    text = (Path(__file__).resolve().parents[1] / "docs" / "python-api.md").read_text()
    missing = [key for key in KEYS if f"`{key}`" not in text]
    assert not missing, missing
