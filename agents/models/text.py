"""Word matching shared by the offline model and the capability router."""

from __future__ import annotations

import re

__all__ = ["terms"]

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its me my of on or "
    "our please so that the their then this to us was we what when where which who why will with "
    "you your agent agents delegate task tasks returns answer capabilities tool tools "
    "about also into give get make".split()
)
_SUFFIXES = ("ations", "ation", "ing", "ers", "ies", "ed", "es", "er", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def terms(text: str) -> set[str]:
    """The significant, crudely stemmed words of a text ("checking facts" -> {"check", "fact"})."""
    return {
        _stem(w)
        for w in _WORD.findall(text.lower().replace("_", " "))
        if len(w) > 2 and w not in _STOPWORDS
    }
