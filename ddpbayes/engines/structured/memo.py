"""One bounded memo for the structured engine's repeated work (a chain's ddp adversaries walk the same days, take
the same sups and ask about the same known sets): values by key up to a cap on a size, one policy past it."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np


def array_key(array: np.ndarray) -> tuple:
    """An array as part of a key: its dtype, shape and bytes (equal bytes of another dtype or shape differ)."""
    return array.dtype, array.shape, array.tobytes()


def vectors_key(vectors: list[np.ndarray]) -> tuple:
    """Several 1-D arrays as one key: their lengths and their concatenation's `array_key` (one dtype that holds
    each value; one concatenation instead of a key per array)."""
    return tuple(map(len, vectors)), array_key(np.concatenate(vectors))


class BoundedMemo:
    """Values remembered by key while their sizes (`size(key, value)`) add up to at most `cap`: an entry that would
    pass the cap clears the memo first (it starts over), and one larger than the cap alone is not kept. An entry
    also holds the objects `keep` (those whose ids are in its key: no id is reused while it lives). A read is one
    lookup, so a threaded scheduler's other audit clearing the memo meanwhile costs a recomputation, no error."""

    def __init__(self, cap: int, size: Callable[[Hashable, Any], int]):
        self.cap, self.size = cap, size
        self._entries: dict[Hashable, tuple[tuple, Any]] = {}
        self._held = 0

    def get(self, key: Hashable) -> Any:
        """The value under `key`, or None."""
        hit = self._entries.get(key)
        return None if hit is None else hit[1]

    def put(self, key: Hashable, value: Any, keep: tuple = ()) -> None:
        """Remember `value` under `key` with the objects `keep` (the policy above)."""
        if key in self._entries:  # already there: twice in one batch, or put meanwhile by another thread
            return
        size = self.size(key, value)
        if self._held + size > self.cap:
            self._entries.clear()
            self._held = 0
        if size <= self.cap:
            self._entries[key] = (keep, value)
            self._held += size

    def remember(self, key: Hashable, make: Callable[[], Any], keep: tuple = ()) -> Any:
        """The value under `key`, else `make()` remembered (None included)."""
        hit = self._entries.get(key)
        if hit is not None:
            return hit[1]
        value = make()
        self.put(key, value, keep)
        return value

    def __iter__(self) -> Iterator[Hashable]:
        """The keys held now (a copy: the memo may change meanwhile)."""
        return iter(list(self._entries))
