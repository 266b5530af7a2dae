"""The notebook surface: ``%%remember``, ``%recall``, ``%context`` and ``%memory``.

``%load_ext nbmemory`` registers one ``@magics_class`` (:class:`MemoryMagics`).
It is a thin skin over :class:`nbmemory.Memory`: every magic parses its options,
calls one engine method and returns what the engine returns (an Event, a
DataFrame, a Context), so the same objects are there for a person to read and for
code to use (``_``, ``Out[n]``, ``df = %recall ...``).

Settings are traitlets (``%config MemoryMagics.relevance_threshold = 0.5``, or
``c.MemoryMagics.path = ...`` in ``ipython_kernel_config.py``).  The store is
opened on first use from them and reopened when the path, the model, the
namespace or the shared mode change.

``%recall`` is also IPython's history recall (alias ``%rep``).  Bare ``%recall``
and numeric arguments (``%recall 12``, ``%recall 3-5``) keep IPython's behaviour;
``%recall -- 2024`` searches for the number; ``%rep`` stays IPython's command.
``%unload_ext nbmemory`` restores both.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import math
import types
from collections.abc import Callable
from typing import Any

import pandas as pd
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
from traitlets import Bool, Float, Int, TraitError, Unicode, observe, validate

from ..config import DEFAULT_MODEL, Settings
from ..errors import EmbedderError, NbMemoryError, StoreLocked
from ..memory import Memory
from ..retrieval import FastEmbedEmbedder, resolve_embedder
from ..retrieval.embedders import model_state, model_unavailable
from ..validation import check_limit, check_name, check_timeout, check_unit_interval
from . import housekeeping
from .display import MemoryStatus, RememberedEvent
from .highlight import RecallFrame, matched_passages, passage_spans
from .parsers import (
    CONTEXT,
    MEMORY,
    RECALL,
    REMEMBER,
    HelpShown,
    interpolate,
    is_history_request,
    no_match,
    one_line,
    parse_meta,
    split_line,
    tokens,
    with_usage,
)
from .transformers import is_ours, protect_questions

_DEFAULTS = Settings()

#: Traits that are also :class:`~nbmemory.config.Settings` of the open store.
SETTINGS_TRAITS = (
    "profile",
    "relevance_threshold",
    "relevance_limit",
    "recency_limit",
    "salience_threshold",
    "salience_limit",
    "max_memory_tokens",
    "working_memory_cap",
    "max_content_bytes",
)
#: Other traits checked when set (``%config``), each as the engine checks it.
CHECKED_TRAITS = (
    "namespace",
    "session",
    "role",
    "recall_limit",
    "recall_threshold",
    "embed_timeout",
)
#: Traits that decide which store (and model) is open; changing one reopens it.
STORE_TRAITS = ("path", "embedder", "model_path", "namespace", "shared")

#: What to do about a store another process holds, in the notebook's words
#: (:class:`~nbmemory.errors.StoreLocked` says it in Python's).
LOCKED_ADVICE = (
    "run %memory close in the other kernel (or shut it down), or set "
    "%config MemoryMagics.shared = True in every kernel using the file (NBMEMORY_SHARED=1 "
    "in their environment does the same) so they take turns, or use another "
    "MemoryMagics.path."
)

#: What to do about a model that cannot load, in the notebook's words
#: (:class:`~nbmemory.retrieval.embedders.ModelUnavailable` says it in Python's).
MODEL_ADVICE = (
    'Run %config MemoryMagics.model_path = "/path/to/all-MiniLM-L6-v2" (a folder holding '
    "model.onnx and tokenizer.json; %env NBMEMORY_MODEL_PATH=... works too), or "
    '%config MemoryMagics.embedder = "hash" for the offline test embedder. '
    "The next magic tries again; memories stored meanwhile are kept and embedded then."
)

#: Columns of ``%recall``'s answer, in order.
RECALL_COLUMNS = [
    "id",
    "content",
    "role",
    "session",
    "similarity",
    "importance",
    "created_at",
    "score",
    "signals",
    "passage",
]


def _engine_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """The one place engine errors become a one-line ``UsageError`` (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HelpShown:
            return None
        except StoreLocked as exc:  # the remedies in notebook words, not mem.close()
            raise UsageError(one_line(exc.explain(LOCKED_ADVICE))) from None
        except EmbedderError as exc:  # a model that cannot load: what to run, in notebook words
            unavailable = model_unavailable(exc)
            message = exc if unavailable is None else unavailable.remedy(MODEL_ADVICE)
            raise UsageError(one_line(message)) from None
        except NbMemoryError as exc:
            raise UsageError(one_line(exc)) from None

    return wrapper


def _history_recall(shell: Any) -> Callable[[str], Any]:
    """IPython's own ``%recall`` bound to a fresh ``HistoryMagics`` (never our entry)."""
    from IPython.core.magics import HistoryMagics

    magics = HistoryMagics(shell=shell)
    with contextlib.suppress(ValueError, AttributeError):
        shell.configurables.remove(magics)  # a helper, not a configurable of the session
    recall: Callable[[str], Any] = magics.recall  # type: ignore[misc,assignment]
    return recall


# -- the magics ------------------------------------------------------------------------
def _setting(trait: type, name: str, help: str) -> Any:
    """A configurable trait mirroring one :class:`Settings` field (same default)."""
    return trait(getattr(_DEFAULTS, name), help=f"{help} Settings.{name}.").tag(config=True)


@magics_class
class MemoryMagics(Magics):
    """``%%remember``, ``%recall``, ``%context`` and ``%memory`` over one :class:`Memory`."""

    path = Unicode(
        None,
        allow_none=True,
        help="Store file. None: $NBMEMORY_PATH, else ./nbmemory.duckdb.",
    ).tag(config=True)
    embedder = Unicode(
        None,
        allow_none=True,
        help=(
            f"Embedding model: None for {DEFAULT_MODEL} through fastembed ($NBMEMORY_MODEL_PATH "
            "names a local copy), another fastembed model name, or 'hash' (offline test model)."
        ),
    ).tag(config=True)
    model_path = Unicode(
        None,
        allow_none=True,
        help="Folder holding the fastembed model files (overrides $NBMEMORY_MODEL_PATH).",
    ).tag(config=True)
    shared = Bool(
        None,
        allow_none=True,
        help=(
            "Share the store file with other kernels, each holding it only while a magic "
            "runs (slower). None: $NBMEMORY_SHARED (1 = shared)."
        ),
    ).tag(config=True)
    namespace = Unicode("default", help="Namespace the magics read and write.").tag(config=True)
    session = Unicode("notebook", help="Session of %%remember and %context by default.").tag(
        config=True
    )
    role = Unicode("user", help="Role of %%remember by default.").tag(config=True)
    recall_limit = Int(5, help="How many hits %recall returns by default (-k).").tag(config=True)
    recall_threshold = Float(
        None,
        allow_none=True,
        help="Similarity %recall requires by default (--threshold); None: plain top k.",
    ).tag(config=True)
    embed_timeout = Float(
        60.0,
        help="Seconds (0 or more) %recall and %context wait for memories still being embedded.",
    ).tag(config=True)
    profile = _setting(
        Unicode,
        "profile",
        "Retrieval profile: 'hybrid' (default) or 'spec' (cosine only, the spec's).",
    )
    relevance_threshold = Float(
        None,
        allow_none=True,
        help="%context: cosine similarity to exceed; None follows the profile "
        "(0.65 spec, 0.2 hybrid). Settings.relevance_threshold.",
    ).tag(config=True)
    relevance_limit = _setting(Int, "relevance_limit", "%context: relevant memories.")
    recency_limit = _setting(Int, "recency_limit", "%context: latest events of the session.")
    salience_threshold = _setting(Float, "salience_threshold", "%context: importance needed.")
    salience_limit = _setting(Int, "salience_limit", "%context: salient memories.")
    max_memory_tokens = _setting(Int, "max_memory_tokens", "Token budget of Context.to_prompt().")
    working_memory_cap = _setting(Int, "working_memory_cap", "Events kept in memory per session.")
    max_content_bytes = _setting(Int, "max_content_bytes", "Largest memory %%remember accepts.")

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        # set before the config is applied: trait observers look at them
        self._memory: Memory | None = None
        self._embedder: Any = None
        self._embedder_key: tuple | None = None
        #: What load_ipython_extension replaced, restored by unload.
        self._saved: dict[str, Any] = {}
        super().__init__(shell=shell, **kwargs)

    # -- settings ----------------------------------------------------------------------
    @validate(*SETTINGS_TRAITS, *CHECKED_TRAITS)
    def _check_trait(self, proposal: Any) -> Any:
        """Refuse a value with the engine's own message (shown by ``%config``)."""
        name, value = proposal.trait.name, proposal.value
        try:
            if name in SETTINGS_TRAITS:
                _DEFAULTS.replace(**{name: value})
            elif name == "recall_limit":
                value = check_limit(value, name, allow_zero=False)
            elif name == "recall_threshold":
                value = None if value is None else check_unit_interval(value, name, low=-1.0)
            elif name == "embed_timeout":  # (an inf waits as long as it takes)
                value = check_timeout(value, name)
            else:
                value = check_name(value, name)
        except NbMemoryError as exc:
            raise TraitError(f"MemoryMagics.{name}: {exc}") from None
        return value

    @observe(*SETTINGS_TRAITS)
    def _setting_changed(self, change: Any) -> None:
        if self._memory is not None and not self._memory.closed:
            self._memory.configure(**{change["name"]: change["new"]})

    @observe(*STORE_TRAITS)
    def _store_changed(self, change: Any) -> None:
        self.close()

    def settings(self) -> Settings:
        """The :class:`Settings` the traits describe (what the store is opened with)."""
        return _DEFAULTS.replace(**{name: getattr(self, name) for name in SETTINGS_TRAITS})

    # -- the store ---------------------------------------------------------------------
    def _get_embedder(self) -> Any:
        key = (self.embedder, self.model_path)
        if self._embedder is None or self._embedder_key != key:
            spec = self.embedder
            if self.model_path and not (spec or "").startswith("hash"):
                self._embedder = FastEmbedEmbedder(
                    spec or DEFAULT_MODEL, model_path=self.model_path
                )
            else:
                self._embedder = resolve_embedder(spec)
            self._embedder_key = key
        return self._embedder

    @property
    def memory(self) -> Memory:
        """The open :class:`Memory` (opened from the traits on first use)."""
        if self._memory is None or self._memory.closed:
            self._memory = Memory(
                self.path or None,
                embedder=self._get_embedder(),
                settings=self.settings(),
                namespace=self.namespace,
                shared=self.shared,
                actor="magic",
            )
        return self._memory

    def close(self) -> None:
        """Close the store (releases the file for other processes); reopened on next use."""
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def _wait_for_embeddings(self, mem: Memory) -> None:
        if not mem.flush(self.embed_timeout):
            print(
                f"{mem.embeddings.backlog} memories are still being embedded after {self.embed_timeout:g} s;"
                " results may miss them (%memory flush waits for them)"
            )

    # -- %%remember --------------------------------------------------------------------
    @cell_magic
    @no_var_expand
    @with_usage(REMEMBER)
    @_engine_errors
    def remember(self, line: str, cell: str) -> RememberedEvent | None:
        """Store the cell body as one memory, exactly as written; returns the Event.

        The single newline IPython appends to every cell is not part of the memory.
        ``{name}`` in the body is text, unless ``--interpolate`` asks to fill it from
        the notebook's variables.  Displays one line: id, session, role, importance.
        """
        options, extra = split_line(REMEMBER, line)
        args = REMEMBER.parse_args(options)
        if extra:
            raise UsageError(
                f"%%remember: unexpected {extra!r}; the memory is the cell body, options go "
                "on the first line (see %%remember --help)"
            )
        body = cell[:-1] if cell.endswith("\n") else cell
        if args.interpolate:
            assert self.shell is not None
            body = interpolate(body, self.shell.user_ns)
        mem = self.memory
        event = mem.add_event(
            args.session if args.session is not None else self.session,
            args.role if args.role is not None else self.role,
            body,
            namespace=args.namespace,
            kind=args.kind,
            importance=args.importance,
            metadata=parse_meta(args.meta),
        )
        fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
        return RememberedEvent(**fields)

    # -- %recall -----------------------------------------------------------------------
    @line_magic
    @no_var_expand
    @with_usage(RECALL)
    @_engine_errors
    def recall(self, line: str = "") -> pd.DataFrame | None:
        """Memories most similar to a question, best first, as a DataFrame.

        Columns: id, content, role, session, similarity (cosine), importance,
        created_at, score (what the ranking sorts by: the fused score in hybrid
        mode, the cosine in vector mode), signals (what found each hit: vector,
        keyword, neighbour) and passage (the part of a long memory that matched; the
        HTML display marks it in the content, the rest elided).  With a threshold and no
        hit, says how close the best memory came.  ``%recall -- 2024`` searches for a number.
        """
        if is_history_request(line):
            return _history_recall(self.shell)(line.strip())
        options, query = split_line(RECALL, line)
        args = RECALL.parse_args(options)
        if not query.strip():
            raise UsageError("%recall: give a question, e.g. %recall what do I like? -k 3")
        if args.k is not None and args.k < 1:  # the engine takes limit=0 (no hits): a slip here
            raise UsageError(f"%recall: -k {args.k} asks for no hits; give -k 1 or more")
        threshold = args.threshold if args.threshold is not None else self.recall_threshold
        mem = self.memory
        self._wait_for_embeddings(mem)
        hits = mem.search(
            query,
            limit=self.recall_limit if args.k is None else args.k,
            threshold=threshold,
            mode=args.mode,
            session_id=args.session,
            role=args.role,
            since=args.since,
            until=args.until,
        )
        frame = hits.rename(columns={"session_id": "session"})
        frame["passage"] = matched_passages(hits)
        frame = RecallFrame(frame.reindex(columns=RECALL_COLUMNS).reset_index(drop=True))
        frame.attrs = dict(hits.attrs)
        frame.attrs["passage_spans"] = passage_spans(hits)
        if frame.empty:
            best = hits.attrs.get("best_similarity")
            print(self._nothing_found(mem, query, threshold, best, args))
        return frame

    def _nothing_found(
        self, mem: Memory, query: str, threshold: float | None, best: float | None, args: Any
    ) -> str:
        if threshold is None or best is None:
            filtered = no_match(args, mem.namespace, list(mem.settings.importance_by_role))
            if filtered:
                return filtered
            if mem.events(limit=1).empty:
                return (
                    f"no memories to search for {query!r} in namespace {mem.namespace!r}; "
                    "store some with %%remember"
                )
            return (
                f"no memory matched {query!r} in namespace {mem.namespace!r} (mode "
                f"{args.mode or mem.settings.search_mode}): try other words, or --mode hybrid"
            )
        suggestion = math.floor(best * 100) / 100
        return (
            f"no memory reached similarity {threshold:.2f} for {query!r}: the best scored "
            f"{best:.3f}, {threshold - best:.3f} short. Try --threshold {suggestion:.2f}, "
            "or no threshold for the plain top k."
        )

    # -- %context ----------------------------------------------------------------------
    @line_magic
    @no_var_expand
    @with_usage(CONTEXT)
    @_engine_errors
    def context(self, line: str = "") -> Any:
        """The tri-hybrid context (recency + salience + relevance) of a session.

        Returns a :class:`~nbmemory.Context`: it displays as a table saying which
        strategy found each memory; ``.to_frame()``, ``.to_prompt()``; with
        ``--explain`` also ``.near_misses``.
        """
        options, query = split_line(CONTEXT, line)
        args = CONTEXT.parse_args(options)
        mem = self.memory
        if query.strip():
            self._wait_for_embeddings(mem)
        return mem.get_context(
            args.session if args.session is not None else self.session,
            query if query.strip() else None,
            relevance_threshold=args.threshold,
            explain=args.explain,
        )

    # -- %memory -----------------------------------------------------------------------
    @line_magic("memory")  # type: ignore[arg-type]
    @no_var_expand
    @with_usage(MEMORY)
    @_engine_errors
    def memory_magic(self, line: str = "") -> Any:
        """Housekeeping: status, sessions, facts, forget, export, import, consolidate,
        restore, learn, flush, close, open.

        Each sub-command has ``--help`` (``%memory forget --help``).
        """
        args = MEMORY.parse_args(tokens(line))
        if args.command is None:
            MEMORY.print_help()
            return None
        return getattr(self, f"_memory_{args.command}")(args)

    def _memory_open(self, args: argparse.Namespace) -> Memory:
        """The :class:`Memory` the magics use (opened now if it was not):
        ``mem = %memory open``, then ``ThresholdTuner(mem, [...])`` or any API call."""
        return self.memory

    def _memory_status(self, args: argparse.Namespace) -> MemoryStatus:
        """The store's counts and the model's state; never waits for (or loads) the model."""
        mem = self.memory
        unavailable = mem.core.worker.unavailable if mem.core.worker is not None else None
        return MemoryStatus(mem.status(), model_state=model_state(mem.core.embedder, unavailable))

    def _memory_sessions(self, args: argparse.Namespace) -> pd.DataFrame:
        return self.memory.sessions.list(namespace=args.namespace, all_namespaces=args.all)

    def _memory_facts(self, args: argparse.Namespace) -> pd.DataFrame:
        return self.memory.facts.list(category=args.category)

    def _memory_forget(self, args: argparse.Namespace) -> pd.DataFrame:
        mem = self.memory
        filters = {
            "session_id": args.session,
            "role": args.role,
            "since": args.since,
            "until": args.until,
        }
        has_filter = any(v is not None for v in filters.values()) or args.all
        if args.ids and has_filter:
            raise UsageError("%memory forget: give ids or filters, not both")
        if args.purge:
            mem.store.check_rewritable()  # before anything is deleted
        if args.purge and not args.ids and not has_filter:  # only the rewrite
            purged = mem.purge()
            print(f"rewrote {purged['path']}: {purged['bytes_after']:,} bytes")
            return None
        if not args.ids and not has_filter:
            raise UsageError(
                "%memory forget: forget what? give ids, or --session/--role/--since/--until, "
                "or --all for every memory of the namespace"
            )
        if args.ids:
            found = [mem.get(i) for i in args.ids]  # MemoryNotFound: nothing deleted
            frame = pd.DataFrame([e.to_dict() for e in found])
        else:
            frame = mem.events(**filters)
        frame = frame.reindex(columns=["id", "session_id", "role", "content", "created_at"])
        if args.dry_run:
            print(f"would forget {len(frame)} memories (dry run: nothing deleted)")
            return frame
        deleted = mem.delete(list(frame["id"])) if len(frame) else 0
        print(f"forgot {deleted} memories")
        if args.purge:
            purged = mem.purge()
            print(f"rewrote {purged['path']}: the forgotten text is gone from its bytes")
        return frame

    def _memory_export(self, args: argparse.Namespace) -> Any:
        return self.memory.transfer.export_json(
            args.path, session_id=args.session, namespace=args.namespace, overwrite=args.force
        )

    def _memory_import(self, args: argparse.Namespace) -> Any:
        return self.memory.transfer.import_json(args.path, namespace=args.namespace)

    _memory_consolidate = housekeeping.consolidate
    _memory_restore = housekeeping.restore
    _memory_learn = housekeeping.learn

    def _memory_flush(self, args: argparse.Namespace) -> MemoryStatus:
        mem = self.memory
        if not mem.flush(args.timeout):
            print(
                f"timed out after {args.timeout:g} s; {mem.embeddings.backlog} memories still queued"
            )
        return MemoryStatus(mem.status())

    def _memory_close(self, args: argparse.Namespace) -> None:
        path = self._memory.path if self._memory is not None else None
        self.close()
        if path:
            print(f"closed {path}; the next memory magic opens it again")


def current_memory(shell: Any = None) -> Memory:
    """The :class:`Memory` of the magics loaded in ``shell`` (the running one by
    default), as ``%memory open`` returns it; an error says to ``%load_ext nbmemory``."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    magics = None if shell is None else shell.magics_manager.registry.get("MemoryMagics")
    if not isinstance(magics, MemoryMagics):
        raise UsageError("the nbmemory magics are not loaded here; run %load_ext nbmemory first")
    return magics.memory


def load_ipython_extension(shell: Any) -> None:
    """Register :class:`MemoryMagics` and the ``?`` protection; keep ``%rep`` IPython's."""
    manager = shell.magics_manager
    if isinstance(manager.registry.get("MemoryMagics"), MemoryMagics):
        return
    try:
        magics = MemoryMagics(shell=shell)
    except TraitError as exc:  # a bad c.MemoryMagics.* value in the config
        raise UsageError(f"nbmemory not loaded: {one_line(exc)}") from None
    line_table = manager.magics["line"]
    magics._saved = {name: line_table.get(name) for name in ("recall", "rep")}
    shell.register_magics(magics)
    line_table["rep"] = _history_recall(shell)
    cleanup = shell.input_transformers_cleanup
    cleanup[:] = [t for t in cleanup if not is_ours(t)]
    cleanup.insert(0, protect_questions)


def unload_ipython_extension(shell: Any) -> None:
    """Remove the magics and the transformer, restore ``%recall``/``%rep``, close the store."""
    manager = shell.magics_manager
    magics = manager.registry.pop("MemoryMagics", None)
    cleanup = shell.input_transformers_cleanup
    cleanup[:] = [t for t in cleanup if not is_ours(t)]
    if not isinstance(magics, MemoryMagics):
        return
    for kind, table in manager.magics.items():
        for name in magics.magics.get(kind, {}):
            if _bound_to(table.get(name), magics):
                del table[name]
    for name, previous in magics._saved.items():
        if previous is None or _bound_to(previous, magics) or _spent(previous, manager):
            previous = _history_recall(shell)
        manager.magics["line"][name] = previous
    with contextlib.suppress(ValueError):
        shell.configurables.remove(magics)
    magics.close()


def _bound_to(entry: Any, magics: MemoryMagics) -> bool:
    # no getattr on the entry: IPython's LazyMagic placeholders import on attribute access
    return isinstance(entry, types.MethodType) and entry.__self__ is magics


def _spent(entry: Any, manager: Any) -> bool:
    """An IPython ``LazyMagic`` placeholder whose module was loaded meanwhile (``%config``
    loads every lazy magic): it can no longer load, so put back it would break ``%recall``."""
    spec = vars(entry).get("spec") if type(entry).__name__ == "LazyMagic" else None
    return spec is not None and spec in getattr(manager, "_loaded_lazy", ())
