"""Learnings appended to AGENTS.md (issue 38, seed 003: Vectora's state persistence).

003: "Atualizações incrementais: Novos aprendizados são anexados ao AGENTS.md e
re-embedados sem re-indexar o arquivo inteiro" (new learnings are appended to
AGENTS.md and re-embedded without re-indexing the whole file).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import CountingEmbedder

from nbmemory import InvalidInput, Memory
from nbmemory.cli import main
from nbmemory.knowledge.agents_md import section_id

SEED = """# Memória do Projeto: meu-projeto

## Padrões Aprendidos

- Fluxos de autenticação usam JWT com expiração de 1 hora

## Preferências

- Preferir composição funcional sobre herança de classes
- Usar modo estrito de TypeScript para todos os novos arquivos

## Diretrizes do Projeto

- Todos os endpoints de API devem incluir anotações OpenAPI
"""
PREFERENCES = "Memória do Projeto: meu-projeto > Preferências"


@pytest.fixture
def counting() -> CountingEmbedder:
    return CountingEmbedder(64)


@pytest.fixture
def cmem(store_path: str, counting: CountingEmbedder):
    with Memory(store_path, embedder=counting) as memory:
        yield memory


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    path = tmp_path / "AGENTS.md"
    path.write_text(SEED, encoding="utf-8")
    return path


def test_a_learning_is_appended_under_its_section_and_only_that_section_reembedded(
    cmem: Memory, agents: Path, counting: CountingEmbedder
) -> None:
    """003: new learnings are appended to AGENTS.md and re-embedded without re-indexing
    the whole file."""
    cmem.agents_md.sync(agents)
    cmem.flush()
    embedded = len(counting.texts)
    result = cmem.agents_md.add_learning("Preferências", "Preferir pytest a unittest", path=agents)
    assert result.updated == [PREFERENCES] and not result.added and not result.removed
    assert result.learning == PREFERENCES
    assert len(result.unchanged) == 2
    assert agents.read_text(encoding="utf-8") == SEED.replace(
        "novos arquivos\n", "novos arquivos\n- Preferir pytest a unittest\n"
    )
    cmem.flush()
    new = counting.texts[embedded:]
    assert len(new) == 1 and "Preferir pytest a unittest" in new[0]  # the section alone
    row = (
        cmem.events(kind="agents_md")
        .set_index("id")
        .loc[section_id("default", str(agents.resolve()), PREFERENCES)]
    )
    assert row["content"].endswith("- Preferir pytest a unittest")
    audit = cmem.audit.log(action="agents_md_learning")
    assert len(audit) == 1
    assert list(audit["target_ids"].iloc[0]) == [
        section_id("default", str(agents.resolve()), PREFERENCES)
    ]
    assert json.loads(audit["details"].iloc[0])["sections"] == [PREFERENCES]


def test_a_learning_is_redacted_before_the_file_and_the_store_see_it(
    cmem: Memory, agents: Path
) -> None:
    """003: "Conteúdo sensível detectado via regex é redigido antes da geração do
    embedding", and the file a person reads holds no secret either."""
    secret = "hunter2-very-secret"
    cmem.agents_md.add_learning(
        "Padrões Aprendidos", f"the staging db uses password: {secret}", path=agents
    )
    text = agents.read_text(encoding="utf-8")
    assert secret not in text and "the staging db uses password" in text
    stored = " ".join(cmem.events(kind="agents_md")["content"])
    assert secret not in stored and "the staging db uses" in stored
    details = cmem.audit.log(action="agents_md_learning")["details"].iloc[0]
    assert json.loads(details)["redacted"] >= 1 and secret not in details


def test_a_missing_section_and_a_missing_file_are_created(cmem: Memory, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    result = cmem.agents_md.add_learning("Lessons", "retry the flaky upload once", path=agents)
    assert agents.read_text(encoding="utf-8") == "## Lessons\n\n- retry the flaky upload once\n"
    assert result.added == ["Lessons"]
    seeded = tmp_path / "seeded" / "AGENTS.md"
    seeded.parent.mkdir()
    seeded.write_text(SEED, encoding="utf-8")
    result = cmem.agents_md.add_learning("Segurança", "revisar mudanças de auth", path=seeded)
    assert seeded.read_text(encoding="utf-8") == (
        SEED + "\n## Segurança\n\n- revisar mudanças de auth\n"
    )
    assert "Memória do Projeto: meu-projeto > Segurança" in result.added


def test_the_configured_agents_file_is_the_default(store_path: str, tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(SEED, encoding="utf-8")
    with Memory(store_path, embedder="hash", agents_file=str(agents)) as mem:
        mem.agents_md.add_learning(PREFERENCES, "two spaces, never tabs")
        assert "- two spaces, never tabs\n\n## Diretrizes" in agents.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("section", "text", "field"),
    [
        ("", "x", "section"),
        ("# Preferências", "x", "section"),
        ("Pre\nferências", "x", "section"),
        ("Preferências", "   ", "text"),
        ("Preferências", 3, "text"),
        (None, "x", "section"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    cmem: Memory, agents: Path, section: object, text: object, field: str
) -> None:
    with pytest.raises(InvalidInput, match=field):
        cmem.agents_md.add_learning(section, text, path=agents)  # type: ignore[arg-type]
    assert agents.read_text(encoding="utf-8") == SEED
    assert cmem.audit.log(action="agents_md_learning").empty
    assert cmem.events(kind="agents_md").empty


def test_a_blocked_file_is_refused(cmem: Memory, tmp_path: Path) -> None:
    """003: "O AGENTS.md está sujeito à mesma blocklist do Guardian que outros arquivos"."""
    with pytest.raises(InvalidInput, match=r"\.env"):
        cmem.agents_md.add_learning("A", "b", path=tmp_path / ".env")
    assert not (tmp_path / ".env").exists()


def test_the_cli_appends_a_learning(capsys, agents: Path, tmp_path: Path) -> None:
    """003's CLI: ``vectora memory sync --file AGENTS.md``; ``memory learn`` appends first."""
    store = str(tmp_path / "cli.duckdb")
    Memory(store, embedder="hash").close()
    argv = ["memory", "learn", "--section", "Preferências", "--text", "short functions"]
    code = main([*argv, "--file", str(agents), "--store", store, "--embedder", "hash"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"section {PREFERENCES}" in out
    assert "- short functions\n\n## Diretrizes" in agents.read_text(encoding="utf-8")
    with Memory(store, embedder="hash", read_only=True) as mem:
        assert mem.events(kind="agents_md")["embedding_model"].notna().all()
    code = main(["memory", "learn", "--section", "", "--text", "x", "--store", store])
    out, err = capsys.readouterr()
    assert code != 0 and "section" in err and err.count("\n") == 1
