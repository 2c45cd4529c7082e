"""Lance's own tokenizer, ``lance.tokenize``, for a few texts.

The index's tokens are Lance's (docs/signatures.md): the numba tokenizer
(``kernels/tokenize.py``) reproduces them from per-code-point tables for throughput,
and a few query texts are tokenized here by Lance itself (about 20 us a text), so a
single search needs no compiled kernel (``query/query_sign.py``).
"""

from __future__ import annotations

from typing import Any

import lance

__all__ = ["lance_tokens"]


def lance_tokens(text: str, options: dict[str, Any]) -> list[str]:
    """The tokens of ``text`` under ``options`` (``TokenizerParams.lance_tokenize_kwargs()``)."""
    return [t.text for t in lance.tokenize(text, **options)]
