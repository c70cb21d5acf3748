"""Which daemon replica keeps which table's stats (DESIGN §10, "shard tables across daemon
replicas by stable hash of the table id").

With ``[shards] count = N`` every replica reads the same config, and replica ``index``
processes only the tables ``shard_of(name, N) == index``. The hash is Lamping and Veach's
*jump consistent hash* ("A Fast, Minimal Memory, Consistent Hash Algorithm", 2014) over
the first 8 bytes of SHA-256 of the table's configured name:

* stable: it depends on the name and N alone — not on the order of the tables in the file,
  the other tables, the process or the Python version (``hash()`` is salted per process);
* consistent: going from N to N + 1 replicas moves only the tables the new replica takes,
  about 1 / (N + 1) of them, and every table that moves goes to it; the others keep their
  replica and, with a per-replica state volume, their stored sketches;
* balanced: each replica gets 1 / N of the tables, with the binomial spread of a random
  split.

The assignment is part of the deployment contract: changing the hash would move tables
between replicas (each rebuilding what it takes), so it is pinned by tests.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

MAX_SHARDS = 4096
_LCG_MULTIPLIER = 2862933555777941757  # the paper's 64-bit linear congruential step
_MASK64 = (1 << 64) - 1


def table_key(name: str) -> int:
    """The table's 64-bit hash key: SHA-256 of its UTF-8 name, first 8 bytes, big endian."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")


def jump_hash(key: int, buckets: int) -> int:
    """Jump consistent hash of a 64-bit ``key`` into ``range(buckets)``."""
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    key &= _MASK64
    bucket, jump = -1, 0
    while jump < buckets:
        bucket = jump
        key = (key * _LCG_MULTIPLIER + 1) & _MASK64
        jump = int((bucket + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return bucket


def shard_of(table_name: str, count: int) -> int:
    """The replica (0 … count - 1) that keeps ``table_name``'s stats."""
    return jump_hash(table_key(table_name), count)


@dataclass(frozen=True)
class ShardPlan:
    """The tables of one config split among ``count`` replicas, seen from ``index``."""

    index: int
    count: int
    owners: tuple[tuple[str, int], ...]  # (table name, its replica), in config order

    @property
    def own(self) -> tuple[str, ...]:
        return tuple(name for name, shard in self.owners if shard == self.index)

    def owner(self, name: str) -> int | None:
        """The replica keeping ``name``; None for a table the config does not name."""
        return next((shard for table, shard in self.owners if table == name), None)


def plan_shards(names: tuple[str, ...], index: int, count: int) -> ShardPlan:
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} is not in 0 … {count - 1}")
    return ShardPlan(index, count, tuple((name, shard_of(name, count)) for name in names))
