"""litellm's default tokenizer, loaded when something tokenizes rather than at a first call.

`litellm.completion` hands its default tokenizer (tiktoken's cl100k table) to every provider
(`encoding=litellm.main._get_encoding()`), so a process's first model call loads it whether or
not it is used: 0.12-0.3 s of CPU in every agent host's warm-up. Providers use it only to count
tokens that the reply did not report; the built-in models, and providers that report usage,
never do. `litellm.main.encoding` is the module attribute litellm itself fills lazily; this puts
a stand-in there that loads the real tokenizer on its first use and then defers to it.
"""

from __future__ import annotations

import functools
from typing import Any

import agents.models.litellm_env  # noqa: F401  (litellm reads these settings at import)

# isort: split
import litellm.main

__all__ = ["TokenizerOnUse", "defer_default_tokenizer"]


@functools.cache
def _default_tokenizer() -> Any:
    from litellm._lazy_imports import get_default_encoding

    return get_default_encoding()


class TokenizerOnUse:
    """Stands for litellm's default tokenizer until an attribute of it is needed."""

    @property
    def loaded(self) -> bool:
        """Whether the real tokenizer is loaded in this process."""
        return _default_tokenizer.cache_info().currsize > 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy and pickle probes: a plain object, nothing loaded
            raise AttributeError(name)
        return getattr(_default_tokenizer(), name)


def defer_default_tokenizer() -> None:
    """Put the stand-in where litellm looks for its tokenizer, unless it is loaded already."""
    if "encoding" not in vars(litellm.main):
        litellm.main.encoding = TokenizerOnUse()  # type: ignore[assignment]  # duck-typed
