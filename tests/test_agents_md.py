"""AGENTS.md as memory: sections by heading, delta re-embedding, priority in context, watcher."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from fakes import CountingEmbedder

from nbmemory import InvalidInput, Memory
from nbmemory.knowledge.agents_md import parse_sections

SEED_EXAMPLE = """# Memória do Projeto: meu-projeto

## Padrões Aprendidos

- Fluxos de autenticação usam JWT com expiração de 1 hora
- Conexões de banco de dados usam connection pooling com máximo de 10 conexões

## Preferências

- Preferir composição funcional sobre herança de classes
- Usar modo estrito de TypeScript para todos os novos arquivos

## Diretrizes do Projeto

- Todos os endpoints de API devem incluir anotações OpenAPI
- Testes devem atingir 80% de cobertura de ramificação
"""


@pytest.fixture
def counting() -> CountingEmbedder:
    return CountingEmbedder(64)


@pytest.fixture
def cmem(store_path: str, counting: CountingEmbedder):
    with Memory(store_path, embedder=counting) as memory:
        yield memory


def _vectors(mem: Memory) -> dict[str, tuple[str, bytes]]:
    rows = mem.store.fetchall(
        "SELECT e.metadata, v.embedding, e.updated_at FROM events e"
        " LEFT JOIN event_vectors v USING (id) WHERE e.kind = 'agents_md'"
    )
    return {
        json.loads(meta)["section"]: (str(updated), np.asarray(vec, dtype=np.float32).tobytes())
        for meta, vec, updated in rows
    }


def test_sections_by_heading_with_their_path() -> None:
    sections = parse_sections(SEED_EXAMPLE)
    assert [s.key for s in sections] == [
        "Memória do Projeto: meu-projeto > Padrões Aprendidos",
        "Memória do Projeto: meu-projeto > Preferências",
        "Memória do Projeto: meu-projeto > Diretrizes do Projeto",
    ]
    assert sections[1].text.startswith("## Preferências\n\n- Preferir composição")
    assert sections[1].level == 2


def test_preamble_code_fences_and_repeated_headings() -> None:
    text = (
        "Intro line.\n\n# A\n\nalpha\n\n```bash\n# not a heading\n```\n\n"
        "## Notes\n\none\n\n# B\n\n## Notes\n\ntwo\n\n## Notes\n\nthree\n\n# Empty\n"
    )
    sections = parse_sections(text)
    assert [s.key for s in sections] == [
        "(preamble)",
        "A",
        "A > Notes",
        "B > Notes",
        "B > Notes #2",
    ]
    assert "# not a heading" in sections[1].text


def test_sync_stores_each_section_as_high_priority_memory(
    cmem: Memory, tmp_path: Path, counting: CountingEmbedder
) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(SEED_EXAMPLE, encoding="utf-8")
    result = cmem.sync_agents_md(agents)
    assert len(result.added) == 3 and not result.updated and not result.removed
    cmem.flush()
    assert len(counting.texts) == 3
    frame = cmem.events(kind="agents_md")
    assert set(frame["role"]) == {"system"} and set(frame["importance"]) == {1.0}
    cmem.add_event("s1", "user", "what about the database?")
    context = cmem.get_context("s1")
    found = [item for item in context.items if item.kind == "agents_md"]
    assert len(found) == 3
    assert all("salience" in item.strategies for item in found)


def test_only_changed_sections_are_reembedded(
    cmem: Memory, tmp_path: Path, counting: CountingEmbedder
) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(SEED_EXAMPLE, encoding="utf-8")
    cmem.sync_agents_md(agents)
    cmem.flush()
    before = _vectors(cmem)
    embedded_before = len(counting.texts)

    edited = (
        SEED_EXAMPLE.replace("máximo de 10 conexões", "máximo de 20 conexões")
        .replace(
            "## Diretrizes do Projeto\n\n- Todos os endpoints de API devem incluir anotações "
            "OpenAPI\n- Testes devem atingir 80% de cobertura de ramificação\n",
            "",
        )
        .rstrip()
        + "\n\n## Segurança\n\n- Revisões de segurança para mudanças em autenticação\n"
    )
    agents.write_text(edited, encoding="utf-8")
    result = cmem.sync_agents_md(agents)
    cmem.flush()
    root = "Memória do Projeto: meu-projeto"
    assert result.updated == [f"{root} > Padrões Aprendidos"]
    assert result.added == [f"{root} > Segurança"]
    assert result.removed == [f"{root} > Diretrizes do Projeto"]
    assert result.unchanged == [f"{root} > Preferências"]
    # exactly the changed and the new section reached the model
    assert len(counting.texts) - embedded_before == 2
    assert any("20 conexões" in t for t in counting.texts[embedded_before:])
    after = _vectors(cmem)
    assert after[f"{root} > Preferências"] == before[f"{root} > Preferências"]
    assert after[f"{root} > Padrões Aprendidos"][1] != before[f"{root} > Padrões Aprendidos"][1]
    assert f"{root} > Diretrizes do Projeto" not in after
    assert (
        "20 conexões"
        in cmem.search("connection pooling conexões", kind="agents_md").iloc[0]["content"]
    )

    # syncing an unchanged file does nothing at all
    audit_rows = len(cmem.audit_log())
    embedded_before = len(counting.texts)
    again = cmem.sync_agents_md(agents)
    cmem.flush()
    assert not again.changed and len(again.unchanged) == 3
    assert len(counting.texts) == embedded_before
    assert len(cmem.audit_log()) == audit_rows


def test_sync_is_scoped_to_its_namespace(cmem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(SEED_EXAMPLE, encoding="utf-8")
    cmem.sync_agents_md(agents, namespace="auth-service")
    cmem.sync_agents_md(agents, namespace="billing")
    agents.write_text("# Only\n\none section now\n", encoding="utf-8")
    cmem.sync_agents_md(agents, namespace="auth-service")
    assert len(cmem.events(namespace="auth-service", kind="agents_md")) == 1
    assert len(cmem.events(namespace="billing", kind="agents_md")) == 3
    assert cmem.events(kind="agents_md").empty


def test_secrets_in_agents_md_are_redacted(cmem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# Deploy\n\nUse password: hunter2 for staging\n", encoding="utf-8")
    result = cmem.sync_agents_md(agents)
    assert result.redacted == 1
    content = cmem.events(kind="agents_md")["content"].iloc[0]
    assert "hunter2" not in content and "[REDACTED]" in content
    details = json.loads(cmem.audit_log(action="agents_md_sync")["details"].iloc[0])
    assert details["redacted"] == 1
    # the redacted text is what is hashed, so a resync sees no change
    assert not cmem.sync_agents_md(agents).changed


@pytest.mark.parametrize("name", [".env", "deploy.key", "cert.pem"])
def test_blocklisted_files_are_refused(cmem: Memory, tmp_path: Path, name: str) -> None:
    secret = tmp_path / name
    secret.write_text("# Keys\n\nAPI=1\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="refusing to ingest"):
        cmem.sync_agents_md(secret)
    assert cmem.events().empty


def test_missing_file_is_a_clear_error(cmem: Memory, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no file .*AGENTS.md"):
        cmem.sync_agents_md(tmp_path / "AGENTS.md")


def test_watcher_resyncs_on_change_and_stops_on_close(
    store_path: str, tmp_path: Path, counting: CountingEmbedder
) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(SEED_EXAMPLE, encoding="utf-8")
    synced = threading.Event()
    results = []

    def on_sync(result) -> None:
        results.append(result)
        if result.changed:
            synced.set()

    mem = Memory(store_path, embedder=counting)
    before = set(threading.enumerate())
    watcher = mem.watch_agents_md(agents, on_sync=on_sync)
    started = set(threading.enumerate()) - before
    assert watcher.running and started  # the watch runs on a thread of its own
    assert len(mem.events(kind="agents_md")) == 3  # synced once before returning
    agents.write_text(SEED_EXAMPLE + "\n## Nova seção\n\n- aprendida agora\n", encoding="utf-8")
    assert synced.wait(30), f"no sync after the change (last error: {watcher.last_error})"
    assert any(r.added == ["Memória do Projeto: meu-projeto > Nova seção"] for r in results)
    assert len(mem.events(kind="agents_md")) == 4
    mem.close()
    assert not watcher.running
    assert not [thread for thread in started if thread.is_alive()]  # none left behind


def test_watcher_can_be_stopped_and_polls_on_request(cmem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# One\n\nfirst\n", encoding="utf-8")
    watcher = cmem.watch_agents_md(agents, force_polling=True)
    agents.write_text("# One\n\nfirst, edited\n", encoding="utf-8")
    assert watcher.wait_for_sync(1, timeout=30), watcher.last_error
    assert cmem.events(kind="agents_md")["content"].iloc[0].endswith("first, edited")
    watcher.stop()
    assert not watcher.running
