"""What the research toolkit asks of the memory it studies: a :class:`~nbmemory.Memory`.

The toolkit sits below the facade (``Memory`` hands itself to it through
``mem.research``), so it names the parts it reads in this protocol instead of
importing ``Memory``: no import circle, not even one for type checkers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pandas as pd

from ..config import Settings
from ..core import Core
from ..retrieval import Context
from ..retrieval.rerank import Reranker
from ..store import Store


class MemoryLike(Protocol):
    """The parts of a ``Memory`` the research functions read (``Memory`` has them all)."""

    @property
    def namespace(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def model_name(self) -> str: ...

    @property
    def core(self) -> Core: ...

    @property
    def store(self) -> Store: ...

    @property
    def reranker(self) -> Reranker | None: ...

    @property
    def path(self) -> str: ...

    #: ``mem.embeddings`` and ``mem.research``: groups of the facade, read loosely here.
    @property
    def embeddings(self) -> Any: ...

    @property
    def research(self) -> Any: ...

    @property
    def search(self) -> Callable[..., pd.DataFrame]: ...

    @property
    def get_context(self) -> Callable[..., Context]: ...

    @property
    def flush(self) -> Callable[..., bool]: ...

    @property
    def add_events(self) -> Callable[..., list[str]]: ...

    def configure(self, **changes: Any) -> Settings: ...
