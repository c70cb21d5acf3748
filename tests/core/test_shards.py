"""Tables shared out among daemon replicas: the jump consistent hash and its contract."""

from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path

import pytest

from lakestats.config import Config, load_config
from lakestats.exceptions import ConfigError
from lakestats.notify import daemon_url
from lakestats.shards import MAX_SHARDS, jump_hash, plan_shards, shard_of, table_key

NAMES = [f"db{i % 37}.table_{i}" for i in range(20_000)]


def guava_consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)``, transcribed independently of ours:
    the same linear congruential generator, drawn as doubles, with Java's signed 64-bit
    arithmetic."""

    def signed(x: int) -> int:
        x &= (1 << 64) - 1
        return x - (1 << 64) if x >> 63 else x

    state = signed(key)
    candidate = 0
    while True:
        state = signed(2862933555777941757 * state + 1)
        unsigned_shift = (state & ((1 << 64) - 1)) >> 33  # Java's >>>
        next_double = float(unsigned_shift + 1) / 2.0**31
        nxt = int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def test_jump_hash_is_guavas_consistent_hash() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        key = rng.getrandbits(64)
        buckets = rng.choice([1, 2, 3, 5, 7, 10, 64, 100, 1000, MAX_SHARDS])
        assert jump_hash(key, buckets) == guava_consistent_hash(key, buckets), (key, buckets)


def test_the_key_is_the_first_8_bytes_of_sha256_of_the_name() -> None:
    for name in ("sales", "db.sales", "ünïcode", ""):
        digest = hashlib.sha256(name.encode("utf-8")).digest()
        assert table_key(name) == int.from_bytes(digest[:8], "big")


def test_the_assignment_is_pinned() -> None:
    """The deployment contract: an upgrade must not move tables between replicas (each
    would rebuild what it takes). These were computed once by this code; changing the hash
    breaks them on purpose."""
    pinned = {("sales", 3): 1, ("returns", 3): 1, ("orders", 3): 1, ("events", 3): 0}
    assert {key: shard_of(*key) for key in pinned} == pinned
    assert [shard_of(f"t{i}", 10) for i in range(12)] == [2, 3, 2, 4, 5, 6, 5, 8, 7, 4, 5, 1]


def test_growing_by_one_replica_moves_only_the_tables_it_takes() -> None:
    for count in (1, 2, 3, 7, 16):
        before = [shard_of(n, count) for n in NAMES]
        after = [shard_of(n, count + 1) for n in NAMES]
        moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
        assert all(a == count for _, a in moved), "a table moved between old replicas"
        # each table moves with probability 1 / (count + 1): within 5 binomial sigmas
        p = 1 / (count + 1)
        sigma = math.sqrt(len(NAMES) * p * (1 - p))
        assert abs(len(moved) - len(NAMES) * p) < 5 * sigma, (count, len(moved))


@pytest.mark.parametrize("count", [2, 3, 10, 64])
def test_replicas_get_their_share_of_the_tables(count: int) -> None:
    sizes = [0] * count
    for name in NAMES:
        sizes[shard_of(name, count)] += 1
    p = 1 / count
    sigma = math.sqrt(len(NAMES) * p * (1 - p))
    assert all(abs(size - len(NAMES) * p) < 5 * sigma for size in sizes), sizes


def test_a_plan_does_not_depend_on_the_order_or_the_other_tables() -> None:
    names = tuple(NAMES[:50])
    plan = plan_shards(names, 1, 4)
    reordered = plan_shards(tuple(reversed(names[10:])), 1, 4)
    for name in names[10:]:
        assert plan.owner(name) == reordered.owner(name) == shard_of(name, 4)
    assert set(plan.own) == {n for n in names if shard_of(n, 4) == 1}
    assert plan.owner("not configured") is None
    with pytest.raises(ValueError, match="not in 0"):
        plan_shards(names, 4, 4)
    with pytest.raises(ValueError, match="at least 1"):
        jump_hash(1, 0)


def _config(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    path = tmp_path / "lakestats.toml"
    path.write_text(text)
    return load_config(path, env=env or {})


TABLES = """
[[table]]
name = "sales"
location = "/data/sales"
[[table]]
name = "events"
location = "/data/events"
"""


def test_shards_config_takes_an_index_or_a_pod_name(tmp_path: Path) -> None:
    text = "[shards]\ncount = 3\n" + TABLES
    assert _config(tmp_path, text).shards.index == 0
    for given, index in (("2", 2), ("lakestatsd-1", 1), ("stats-shard-0", 0)):
        config = _config(tmp_path, text, {"LAKESTATS_SHARDS__INDEX": given})
        assert config.shards.index == index
        assert config.shard_plan().own == tuple(
            name for name in ("sales", "events") if shard_of(name, 3) == index
        )


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("[shards]\ncount = 0\n", {}, "key shards.count: .*greater than or equal to 1"),
        ("[shards]\ncount = 5000\n", {}, "key shards.count: .*less than or equal to 4096"),
        ("[shards]\ncount = 2\nindex = 2\n", {}, "key shards.index: index 2 is not below count 2"),
        (
            "[shards]\ncount = 3\n",
            {"LAKESTATS_SHARDS__INDEX": "lakestatsd-3"},
            "environment variable LAKESTATS_SHARDS__INDEX: key shards.index: .*not below",
        ),
        ("[shards]\ncount = 3\n", {"LAKESTATS_SHARDS__INDEX": "web"}, "-<ordinal>"),
        ("[shards]\nreplicas = 3\n", {}, "key shards.replicas: unknown key"),
        ('[http]\nurl = "http://x-{index}:1"\n', {}, r"only placeholder .*\{shard\}"),
        ('[http]\nurl = "ftp://x-{shard}"\n', {}, "http:// or https://"),
    ],
)
def test_bad_shards_config_names_the_key(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, text + TABLES, env)


def test_notify_reaches_the_replica_keeping_the_table(tmp_path: Path) -> None:
    text = '[shards]\ncount = 4\n[http]\nurl = "https://stats-{shard}.svc:8765/"\n' + TABLES
    config = _config(tmp_path, text)
    for name in ("sales", "events"):
        assert daemon_url(config, name) == f"https://stats-{shard_of(name, 4)}.svc:8765"
    with pytest.raises(ValueError, match="give the table"):
        daemon_url(config)
    plain = _config(tmp_path, '[http]\nurl = "http://one:8765"\n' + TABLES)
    assert daemon_url(plain, "sales") == daemon_url(plain) == "http://one:8765"
