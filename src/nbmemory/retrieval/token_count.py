"""A caller's token counter, run so that what it does wrong is said in one line.

``Memory(token_counter=...)`` takes any ``text -> int`` (a model's tokenizer, most
often).  ``Context.to_prompt`` promises ``token_counter(prompt) <= max_tokens``: a
counter that raises, or answers with something that is not a whole number of 0 or
more (a string, -1, NaN), would break that promise silently or escape as the
counter's own error, so its answer is checked here, as the embedder's and the
reranker's are.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

from ..errors import InvalidInput

_FIX = "give Memory(token_counter=...) a function text -> whole number of tokens, 0 or more"


def count_tokens(counter: Callable[[str], int], text: str) -> int:
    """``counter(text)`` as an int; :class:`~nbmemory.errors.InvalidInput` naming the
    fault when the counter raises or its answer is not a whole number ≥ 0."""
    try:
        answer: object = counter(text)
    except Exception as exc:  # the caller's code: any failure is theirs to fix
        raise InvalidInput(
            f"the token counter failed on a text of {len(text)} characters "
            f"({type(exc).__name__}: {exc}); {_FIX}"
        ) from exc
    whole = isinstance(answer, numbers.Integral) and not isinstance(answer, bool)
    if isinstance(answer, float) and math.isfinite(answer):
        whole = answer.is_integer()
    if whole and int(answer) >= 0:  # type: ignore[call-overload]
        return int(answer)  # type: ignore[call-overload]
    shown = repr(answer) if len(repr(answer)) <= 40 else type(answer).__name__
    raise InvalidInput(f"the token counter answered {shown} for a text; {_FIX}")
