"""Real conversations with ground truth, for tests, evaluation and research notebooks.

LoCoMo (Maharana et al., ACL 2024, "Evaluating Very Long-Term Conversational
Memory of LLM Agents") is research data: nbmemory never ships it, it reads the
JSON files from a path you give (``$NBMEMORY_LOCOMO_PATH`` in the notebooks).
Each file is one conversation: ``session_N`` lists of turns, ``session_N_date_time``
and ``qa`` (question, answer, evidence dia_ids, category; 5 = adversarial).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..errors import InvalidInput
from ..validation import check_flag

if TYPE_CHECKING:
    from .subject import MemoryLike as Memory

#: Environment variable naming the folder that holds the LoCoMo ``conv-*.json`` files.
ENV_LOCOMO_PATH = "NBMEMORY_LOCOMO_PATH"

_SESSION_RE = re.compile(r"^session_(\d+)$")
_DIA_RE = re.compile(r"^D:?(\d+):(\d+)$")


@dataclass
class LocomoConversation:
    """One LoCoMo conversation: its turns and its questions."""

    conversation_id: str
    speakers: tuple[str, str]
    turns: pd.DataFrame  # dia_id, session, speaker, text, content, caption, created_at
    questions: pd.DataFrame  # question, answer, evidence (list of dia_id), category

    def answerable(self) -> pd.DataFrame:
        """Questions of category 1-4 with at least one known evidence turn."""
        known = set(self.turns["dia_id"])
        mask = (self.questions["category"] < 5) & self.questions["evidence"].map(
            lambda ids: any(i in known for i in ids)
        )
        return self.questions[mask].reset_index(drop=True)


@dataclass
class LoadedConversation:
    """What :func:`load_locomo` returns: the data plus where each turn went."""

    conversation: LocomoConversation
    namespace: str
    event_ids: dict[str, str]  # dia_id -> event id

    @property
    def last_session(self) -> str:
        """The session id of the conversation's last turn (where evaluation asks its questions)."""
        return f"session_{int(self.conversation.turns['session'].max())}"

    def relevant_ids(self, evidence: list[str]) -> set[str]:
        return {self.event_ids[d] for d in evidence if d in self.event_ids}

    def queries(self) -> pd.DataFrame:
        """Answerable questions with the event ids of their evidence (``relevant_ids``)."""
        frame = self.conversation.answerable().copy()
        frame["relevant_ids"] = frame["evidence"].map(lambda e: sorted(self.relevant_ids(e)))
        return frame


def locomo_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The LoCoMo folder: ``path``, else ``$NBMEMORY_LOCOMO_PATH``; a clear error if absent."""
    chosen = path or os.environ.get(ENV_LOCOMO_PATH)
    if not chosen:
        raise InvalidInput(f"no LoCoMo data: pass a path or set {ENV_LOCOMO_PATH}; {WHERE_FROM}")
    resolved = Path(chosen).expanduser()
    if not resolved.exists():
        raise InvalidInput(f"LoCoMo path {resolved} does not exist; {WHERE_FROM}")
    return resolved


#: Where LoCoMo comes from, for the errors of a missing path (nbmemory never ships it).
WHERE_FROM = (
    "LoCoMo (Maharana et al., ACL 2024) is at https://github.com/snap-research/locomo: "
    "save each conversation of data/locomo10.json as its own file (conv-26.json ...) in "
    "one folder and pass that folder (the README's 'Development' section shows how)"
)


def locomo_files(path: str | os.PathLike[str] | None = None) -> list[Path]:
    """The conversation files at ``path`` (a folder or a single file)."""
    resolved = locomo_path(path)
    if resolved.is_file():
        return [resolved]
    files = sorted(resolved.glob("*.json"))
    if not files:
        raise InvalidInput(f"no LoCoMo .json files in {resolved}; {WHERE_FROM}")
    return files


def parse_locomo_datetime(text: str) -> dt.datetime:
    """``"1:56 pm on 8 May, 2023"`` -> ``datetime(2023, 5, 8, 13, 56)``."""
    try:
        return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        raise InvalidInput(f"unrecognised LoCoMo date-time {text!r}") from None


def _clean_evidence(raw: Any) -> list[str]:
    out: list[str] = []
    for item in raw or []:
        for part in str(item).split(";"):
            match = _DIA_RE.match(part.strip())
            if match:
                out.append(f"D{match.group(1)}:{match.group(2)}")
    return out


def read_locomo(path: str | os.PathLike[str]) -> LocomoConversation:
    """Parse one LoCoMo conversation file (no store involved)."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidInput(f"path must be a LoCoMo file's path, got {type(path).__name__}")
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read LoCoMo file {file}: {exc}") from None
    conv = data.get("conversation", data)
    if "speaker_a" not in conv:
        raise InvalidInput(f"{file} is not a LoCoMo conversation (no speaker_a)")
    rows = []
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conv
        if (m := _SESSION_RE.match(key)) and isinstance(conv[key], list)
    )
    for number, key in sessions:
        start = parse_locomo_datetime(conv[f"{key}_date_time"])
        for index, turn in enumerate(conv[key]):
            text = turn.get("text", "")
            # "Speaker: text": questions name the speakers, and the name in the text
            # doubles recall@10 with all-MiniLM-L6-v2 (0.24 -> 0.48 on conv-26).
            content = f"{turn['speaker']}: {text}"
            rows.append(
                {
                    "dia_id": turn["dia_id"],
                    "session": number,
                    "speaker": turn["speaker"],
                    "text": text,
                    "content": content,
                    "caption": turn.get("blip_caption"),
                    # turns keep their order: one minute apart from the session's start
                    "created_at": start + dt.timedelta(minutes=index),
                }
            )
    turns = pd.DataFrame(rows)
    questions = pd.DataFrame(
        [
            {
                "question": q["question"],
                "answer": q.get("answer", q.get("adversarial_answer")),
                "evidence": _clean_evidence(q.get("evidence")),
                "category": int(q.get("category", 0)),
            }
            for q in data.get("qa", [])
        ]
    )
    conversation_id = str(data.get("sample_id") or file.stem)
    return LocomoConversation(
        conversation_id, (conv["speaker_a"], conv["speaker_b"]), turns, questions
    )


def load_locomo(
    path: str | os.PathLike[str],
    memory: Memory,
    *,
    namespace: str | None = None,
    flush: bool = True,
) -> LoadedConversation:
    """Store every turn of a LoCoMo conversation as an event and return the mapping.

    Speaker A is role ``user`` and speaker B ``assistant``; the speaker's name, the
    turn's dia_id and the conversation id go in metadata; sessions become
    ``session_N`` and their date-times become ``created_at``.  The namespace is
    ``locomo/<conversation id>`` unless given.  Loading the same file twice into
    the same namespace stores nothing new.
    """
    return load_conversation(read_locomo(path), memory, namespace=namespace, flush=flush)


def load_conversation(
    conversation: LocomoConversation,
    memory: Memory,
    *,
    namespace: str | None = None,
    flush: bool = True,
    source: str = "locomo",
) -> LoadedConversation:
    """Store a conversation of LoCoMo's shape (from :func:`read_locomo` or a
    generated corpus, :mod:`nbmemory.research.corpora`) as events, as
    :func:`load_locomo` does: namespace ``<source>/<conversation id>`` unless
    given, event ids ``<source>:<conversation id>:<dia_id>``."""
    if not isinstance(conversation, LocomoConversation):
        raise InvalidInput(
            "conversation must be a LocomoConversation (read_locomo(path), or a corpus's), "
            f"got {type(conversation).__name__}"
        )
    flush = check_flag(flush, "flush")
    ns = namespace or f"{source}/{conversation.conversation_id}"
    roles = {conversation.speakers[0]: "user", conversation.speakers[1]: "assistant"}
    prefix = f"{source}:{conversation.conversation_id}:"
    existing_ids = memory.store.events.ids_with_prefix(ns, prefix)
    rows = []
    event_ids = {}
    for turn in conversation.turns.itertuples(index=False):
        event_id = prefix + turn.dia_id
        event_ids[turn.dia_id] = event_id
        if event_id in existing_ids:
            continue
        rows.append(
            {
                "id": event_id,
                "session_id": f"session_{turn.session}",
                "role": roles.get(turn.speaker, "user"),
                "content": turn.content,
                "created_at": turn.created_at,
                "metadata": {
                    "speaker": turn.speaker,
                    "dia_id": turn.dia_id,
                    "conversation": conversation.conversation_id,
                    **({"image_caption": turn.caption} if isinstance(turn.caption, str) else {}),
                },
            }
        )
    if rows:
        memory.add_events(rows, namespace=ns)
    if flush:
        memory.flush()
    return LoadedConversation(conversation, ns, event_ids)


def conversations_of(loaded: Any) -> list[LoadedConversation]:
    """``loaded`` (one :class:`LoadedConversation` or several) as a list; an
    :class:`InvalidInput` saying what to pass for anything else."""
    items = [loaded] if isinstance(loaded, LoadedConversation) else loaded
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        items = [items]
    items = list(items)
    wrong = next((item for item in items if not isinstance(item, LoadedConversation)), None)
    if wrong is not None:
        raise InvalidInput(
            "give what load_locomo() or load_conversation() returned (one or a list), "
            f"got {type(wrong).__name__}"
        )
    return items
