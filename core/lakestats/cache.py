"""One memory budget for everything a process caches of its tables' files.

A daemon keeps every table it watches open, with two handles each (a worker's and a
reader's), and each handle caches what it has read: the stats store's aggregates, segment
listings and merged views, the format's manifests or commit logs. Per handle, such caches
were bounded in entries, not bytes — an Iceberg manifest of 10,000 files held ~35 MB of
entries, and a daemon's memory grew with its tables and their files. Here every such cache
is a ``CacheView`` on one ``MemoryCache``: a least-recently-used map of (owner, key) to a
value and its weight, in bytes of memory it is estimated to hold, whose entries together
stay within the budget. The files behind the entries are immutable (a store's files, an
Iceberg manifest; a Delta commit or a Paimon manifest keyed by what names its content), so
two handles of one table share one entry, and an entry is never stale: a dropped one is
read again when next needed.

The process's cache is ``process_cache()``: ``DEFAULT_BYTES`` until the daemon or the
command line applies the configured ``cache_size`` (``configure``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, cast

V = TypeVar("V")

DEFAULT_BYTES = 512 * 2**20


class MemoryCache:
    """A thread-safe least-recently-used map whose entries weigh at most ``max_bytes`` in
    all; an entry heavier than that alone is not kept."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self._max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def held_bytes(self) -> int:
        """What the entries weigh now."""
        with self._lock:
            return self._total

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def held_by_kind(self) -> dict[str, int]:
        """What the entries of each ``CacheView`` kind weigh now."""
        with self._lock:
            items = list(self._items.items())
        out: dict[str, int] = {}
        for key, (_, weight) in items:
            scope = key[0] if isinstance(key, tuple) and key else None
            kind = scope[0] if isinstance(scope, tuple) and scope else "other"
            out[str(kind)] = out.get(str(kind), 0) + weight
        return out

    def resize(self, max_bytes: int) -> None:
        """A new budget; the least recently used entries go until the rest fit."""
        with self._lock:
            self._max_bytes = max_bytes
            self._shrink()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any, weight: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._total -= old[1]
            if weight > self._max_bytes:
                return
            self._items[key] = (value, weight)
            self._total += weight
            self._shrink()

    def pop(self, key: Hashable) -> Any | None:
        """Drop ``key``'s entry (superseded: no reader will ask for it again); its value."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is None:
                return None
            self._total -= old[1]
            return old[0]

    def _shrink(self) -> None:
        while self._total > self._max_bytes and self._items:
            _, (_, dropped) = self._items.popitem(last=False)
            self._total -= dropped


class CacheView(Generic[V]):
    """One owner's entries of one ``kind`` in a ``MemoryCache`` (a handle's manifests, a
    store's aggregates): its keys are its own, values of type ``V`` weighed by
    ``weight``."""

    def __init__(self, cache: MemoryCache, kind: str, weight: Callable[[V], int]) -> None:
        self._cache = cache
        self._scope = (kind, object())  # no other view's keys meet these
        self._weight = weight

    def get(self, key: Hashable) -> V | None:
        return cast("V | None", self._cache.get((self._scope, key)))

    def put(self, key: Hashable, value: V) -> None:
        self._cache.put((self._scope, key), value, self._weight(value))

    def pop(self, key: Hashable) -> V | None:
        return cast("V | None", self._cache.pop((self._scope, key)))


_process = MemoryCache()


def process_cache() -> MemoryCache:
    """The cache every table opened in this process shares."""
    return _process


def configure(max_bytes: int) -> None:
    """Apply a configured budget (``Config.cache_size``) to the process's cache."""
    _process.resize(max_bytes)
