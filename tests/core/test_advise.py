"""The advisor's analysis (``lakestats.advise``), pure: per-file facts in, advice out.

Inputs carry real datasketches sketches built from known values, so every figure can be
checked against a brute-force count over the same files' bounds and values.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from datasketches import kll_doubles_sketch, update_theta_sketch

from lakestats.advise import (
    AdviceKind,
    AdviceSettings,
    Bounds,
    ColumnInput,
    FileColumn,
    advise,
    analyze_column,
    render_report,
    report_json,
)
from lakestats.model import UNPARTITIONED, PartitionKey
from lakestats.sketches.frequent import DOUBLES, STRINGS, frequent_items_of_counts
from lakestats.sketches.hashing import THETA_SEED
from lakestats.sketches.merge import kll_normalized_rank_error

SETTINGS = AdviceSettings()


def file_of(
    values: Sequence[Any],
    i: int,
    *,
    nulls: int = 0,
    kll: bool = True,
    partition: PartitionKey = UNPARTITIONED,
    size: int | None = None,
    frequent: bool = False,
) -> FileColumn:
    """A file holding ``values`` (plus ``nulls`` nulls), sketched as the pipeline would;
    ``frequent``: with a frequent-items sketch of 256 items (strings without ``kll``)."""
    theta = update_theta_sketch(12, seed=THETA_SEED)
    sketch = kll_doubles_sketch(200)
    for v in values:
        theta.update(v)
        if kll:
            sketch.update(float(v))
    frequent_blob = None
    if frequent and values:
        kind = DOUBLES if kll else STRINGS
        keys, counts = np.unique(np.asarray(values, float if kll else object), return_counts=True)
        frequent_blob = frequent_items_of_counts(keys, counts.astype(np.int64), 256, kind=kind)
    return FileColumn(
        path=f"f{i}",
        partition=partition,
        records=len(values) + nulls,
        file_bytes=size if size is not None else 1000 + i,
        lower=(float(min(values)) if kll else min(values)) if values else None,
        upper=(float(max(values)) if kll else max(values)) if values else None,
        has_values=bool(values),
        null_count=nulls,
        theta=bytes(theta.compact().serialize(False)) if values else None,
        kll=bytes(sketch.serialize()) if kll and values else None,
        frequent=frequent_blob,
    )


def column(files: Sequence[FileColumn], type_str: str = "long") -> ColumnInput:
    return ColumnInput(1, "c", type_str, tuple(files))


def brute_files(files: Sequence[FileColumn], a: Any, b: Any) -> int:
    return sum(
        1
        for f in files
        if f.has_values and (f.lower is None or f.upper is None or (f.lower <= b and f.upper >= a))
    )


def exact_point_expectation(
    chunks: Sequence[Sequence[float]], files: Sequence[FileColumn]
) -> float:
    """E over rows of the files a lookup of that row's value reads: the exact figure the
    KLL-weighted expectation estimates."""
    everything = [v for chunk in chunks for v in chunk]
    return sum(brute_files(files, v, v) for v in everything) / len(everything)


def to_number(text: str) -> float:
    return float(int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "big"))


def brute_spread(files: Sequence[FileColumn]) -> float:
    """The no-KLL model by brute force: each file's rows spread evenly over its [min, max]
    (strings placed by their first 8 bytes); integrate the cover piece by piece."""
    spans = [(to_number(f.lower), to_number(f.upper)) for f in files]
    cuts = sorted({x for span in spans for x in span})
    rows = [f.records - (f.null_count or 0) for f in files]
    total = 0.0
    for (lo, hi), weight in zip(spans, rows, strict=True):
        if hi == lo:
            cover = float(sum(1 for a, b in spans if a <= lo <= b))
        else:
            pieces = [(a, b) for a, b in itertools.pairwise(cuts) if lo <= a and b <= hi]
            cover = sum(
                (b - a) * sum(1 for c, d in spans if c < (a + b) / 2 < d) for a, b in pieces
            ) / (hi - lo)
        total += weight * cover
    return total / sum(rows)


def test_bounds_counts_match_brute_force() -> None:
    rng = random.Random(1)
    files = []
    for i in range(300):
        lo = rng.uniform(0, 1000)
        hi = lo + rng.expovariate(1 / 50)
        files.append(FileColumn(f"f{i}", UNPARTITIONED, 10, rng.randrange(1, 10**6), lo, hi))
    files.append(FileColumn("unknown", UNPARTITIONED, 10, 77))  # values, bounds unknown
    files.append(FileColumn("empty", UNPARTITIONED, 10, 5, has_values=False))
    bounds = Bounds(files)
    probes = [rng.uniform(-10, 1200) for _ in range(500)] + [f.lower for f in files[:50]]
    for a in probes:
        b = a + rng.choice([0.0, 1.0, 30.0, 300.0])
        want = [f for f in files if brute_files([f], a, b)]
        assert bounds.files_overlapping(a, b) == len(want)
        assert bounds.bytes_overlapping(a, b) == sum(f.file_bytes for f in want)
    # the worst value is at some file's lower bound (intervals are closed)
    depth = max(brute_files(files, f.lower, f.lower) for f in files[:300])
    assert bounds.max_depth()[0] == depth
    heaviest = max(
        sum(g.file_bytes for g in files if brute_files([g], f.lower, f.lower)) for f in files[:300]
    )
    assert bounds.max_depth()[1] == heaviest


def test_sorted_files_read_one_file_per_lookup() -> None:
    chunks = [list(range(i * 1000, (i + 1) * 1000)) for i in range(10)]
    files = [file_of(c, i) for i, c in enumerate(chunks)]
    advice = analyze_column(column(files), SETTINGS)
    assert advice.point is not None
    assert advice.point.files_expected == 1.0
    assert advice.point.files_max == 1
    assert advice.distribution == "kll"
    # a 1 % range holds 100 values: it crosses a file boundary for 1 start in 10
    one = advice.ranges[0]
    assert one.selectivity == 0.01 and one.files_max == 2
    assert 1.0 < one.files_expected < 1.2
    assert advice.recommendation.kind is AdviceKind.NONE
    assert "well clustered" in advice.recommendation.reason
    # each file covers its own tenth of the rows: a diagonal overlap profile, one file
    # per part, two where a part's (approximate) boundary touches the next file
    shares = [round(b.share, 2) for b in advice.overlap]
    assert set(shares) <= {0.1, 0.2} and shares.count(0.1) >= len(shares) // 2


def test_shuffled_key_reads_every_file_and_gets_a_bloom_filter() -> None:
    rng = random.Random(2)
    values = list(range(20_000))
    rng.shuffle(values)
    chunks = [values[i * 2000 : (i + 1) * 2000] for i in range(10)]
    files = [file_of(c, i) for i, c in enumerate(chunks)]
    advice = analyze_column(column(files), SETTINGS)
    assert advice.point is not None
    exact = exact_point_expectation(chunks, files)
    assert advice.point.files_expected == pytest.approx(exact, abs=0.05)
    assert advice.point.files_max == 10
    assert advice.ranges[1].files_expected == pytest.approx(10.0, abs=0.01)
    rec = advice.recommendation
    assert rec.kind is AdviceKind.BLOOM_FILTER, rec.reason
    assert rec.bloom is not None
    n = advice.ndv_per_file_mean
    assert n is not None and abs(n - 2000) <= 3 * 0.016 * 2000
    # m = -n ln p / (ln 2)^2 for the NDV per file
    assert rec.bloom.bits_per_file == math.ceil(-n * math.log(0.01) / math.log(2) ** 2)
    assert rec.bloom.hashes == round(rec.bloom.bits_per_file / n * math.log(2))
    # a unique key: one file truly holds each value
    assert advice.files_per_value == pytest.approx(1.0, abs=0.05)
    assert rec.files_per_lookup_after == pytest.approx(1 + 0.01 * 9, abs=0.05)
    # sorted, a point lookup would read ≈ 1 file
    assert advice.files_per_lookup_sorted == pytest.approx(1.0, abs=0.01)


def test_expectation_follows_the_value_distribution_not_the_domain() -> None:
    # 90 % of the rows sit in [0, 100), covered by 9 overlapping files; the tenth file
    # holds a long sparse tail [100, 100_000]. Uniform over the domain, a lookup would read
    # ≈ 1 file; over the rows it reads ≈ 9 · 0.9 + 1 · 0.1.
    rng = random.Random(3)
    chunks = [[rng.randrange(100) for _ in range(1000)] for _ in range(9)]
    chunks.append(sorted(rng.sample(range(100, 100_001), 1000)))
    files = [file_of(c, i) for i, c in enumerate(chunks)]
    advice = analyze_column(column(files), SETTINGS)
    assert advice.point is not None
    exact = exact_point_expectation(chunks, files)
    assert exact == pytest.approx(8.2, abs=0.01)
    # rows ranked within KLL's error can land on either side of the 100 boundary
    tolerance = 9 * kll_normalized_rank_error(200) + 0.01
    assert advice.point.files_expected == pytest.approx(exact, abs=tolerance)
    assert advice.point.files_max == 9


def test_low_cardinality_strings_use_spread_within_bounds_and_get_a_value_set_or_partition() -> (
    None
):
    rng = random.Random(4)
    # 8 values over 40 files, each file holding 2 neighbouring values: a lookup of v_k
    # reads the files of pairs (k-1, k) and (k, k+1), ≈ 11 of 40. Partitioning or sorting
    # would leave ≈ 1 + 40/8 = 6 (not the 2× the rule asks), and a value set cannot do
    # better than the ≈ 10 files that truly hold the value: nothing to do.
    names = [f"v{i}" for i in range(8)]
    files = [file_of([names[i % 7], names[i % 7 + 1]] * 50, i, kll=False) for i in range(40)]
    advice = analyze_column(column(files, "string"), SETTINGS)
    assert advice.distribution == "spread_within_bounds"
    assert advice.ranges == ()
    assert advice.point is not None and advice.point.files_max == 12
    assert advice.point.files_expected == pytest.approx(brute_spread(files), rel=1e-12)
    assert advice.files_per_lookup_sorted == pytest.approx(6.0, rel=0.05)
    assert advice.files_per_value == pytest.approx(10.0, rel=0.01)
    assert advice.recommendation.kind is AdviceKind.NONE, advice.recommendation.reason
    assert "files that hold the value" in advice.recommendation.reason

    # 20 values, each file a random 8 of them: min/max spans nearly everything; with
    # fewer values than files, each value is a file's worth of rows: partition
    many = [f"k{i:03d}" for i in range(20)]
    files = [file_of(rng.sample(many, 8) * 10, i, kll=False) for i in range(40)]
    advice = analyze_column(column(files, "string"), SETTINGS)
    assert advice.point is not None
    assert advice.point.files_expected == pytest.approx(brute_spread(files), rel=1e-12)
    assert advice.point.files_expected > 30
    assert advice.recommendation.kind is AdviceKind.PARTITION
    # partitioned: ≈ 1 + files · (1 / NDV)
    assert advice.ndv is not None
    assert advice.recommendation.files_per_lookup_after == pytest.approx(
        1 + 40 / advice.ndv, rel=1e-9
    )

    # 5,000 values, 30 per file: too many to partition by, few per file: a value set
    lots = [f"k{i:04d}" for i in range(5000)]
    files = [file_of(rng.sample(lots, 30), i, kll=False) for i in range(40)]
    advice = analyze_column(column(files, "string"), SETTINGS)
    assert advice.recommendation.kind is AdviceKind.VALUE_SET, advice.recommendation.reason
    assert advice.files_per_value is not None and advice.files_per_value < 1.5


def exact_point_selectivity(chunks: Sequence[Sequence[Any]]) -> float:
    """Σ p_v² over every value of the files, counted."""
    counts: dict[Any, int] = {}
    for chunk in chunks:
        for v in chunk:
            counts[v] = counts.get(v, 0) + 1
    total = sum(counts.values())
    return sum((c / total) ** 2 for c in counts.values())


def test_skewed_strings_measure_their_heavy_values_with_frequent_items() -> None:
    rng = random.Random(16)
    # three statuses, 85 / 10 / 5 % of the rows, in every one of 20 files: with the NDV
    # alone a lookup matches a third of the rows and partitioning looks like a 3× gain;
    # the frequent-items sketches count them exactly (σ = 0.735), and a partition holding
    # 85 % of the rows saves nothing: min/max already reads only the files holding it
    chunks = [rng.choices(["ok", "warn", "err"], [85, 10, 5], k=1000) for _ in range(20)]
    files = [file_of(c, i, kll=False, frequent=True) for i, c in enumerate(chunks)]
    advice = analyze_column(column(files, "string"), SETTINGS)
    assert advice.point_selectivity == pytest.approx(exact_point_selectivity(chunks), rel=1e-9)
    assert advice.recommendation.kind is AdviceKind.NONE, advice.recommendation.reason
    bare = analyze_column(
        column([file_of(c, i, kll=False) for i, c in enumerate(chunks)], "string"), SETTINGS
    )
    assert bare.ndv is not None and bare.point_selectivity == pytest.approx(1 / bare.ndv)
    assert bare.recommendation.kind is AdviceKind.PARTITION, bare.recommendation.reason

    # two hot values over 3,000 rare ones: each file holds more distinct values than its
    # sketch keeps, so the counts carry an error (the merged offset) and the rare values
    # are the rows no listed value holds, spread over the NDV left
    rare = [f"code-{i:04d}" for i in range(3000)]
    chunks = [
        rng.choices(["alpha", "beta"], [3, 1], k=3000) + rng.choices(rare, k=2000)
        for _ in range(10)
    ]
    files = [file_of(c, i, kll=False, frequent=True) for i, c in enumerate(chunks)]
    advice = analyze_column(column(files, "string"), SETTINGS)
    exact = exact_point_selectivity(chunks)
    hot = (0.6 * 0.75) ** 2 + (0.6 * 0.25) ** 2
    assert exact == pytest.approx(hot, rel=0.05)  # the rare values add ~ 0.4² / 3,000
    assert advice.point_selectivity == pytest.approx(exact, rel=0.02)


def test_rule_edges() -> None:
    rng = random.Random(5)
    shuffled = [[rng.randrange(10**6) for _ in range(500)] for _ in range(10)]
    # few files: nothing to gain
    few = analyze_column(column([file_of(c, i) for i, c in enumerate(shuffled[:3])]), SETTINGS)
    assert few.recommendation.kind is AdviceKind.NONE and "only 3 file" in (
        few.recommendation.reason
    )
    # mostly null
    sparse = [file_of(c[:5], i, nulls=495) for i, c in enumerate(shuffled)]
    advice = analyze_column(column(sparse), SETTINGS)
    assert advice.null_fraction == pytest.approx(0.99)
    assert advice.recommendation.kind is AdviceKind.MIN_MAX
    # booleans: min/max is already exact
    flags = [file_of([True, False], i, kll=False) for i in range(10)]
    assert analyze_column(column(flags, "boolean"), SETTINGS).recommendation.kind is (
        AdviceKind.MIN_MAX
    )
    # high-NDV doubles with poor overlap: sorting, never a Bloom filter for floats
    floats = [file_of([rng.random() for _ in range(500)], i) for i in range(10)]
    advice = analyze_column(column(floats, "double"), SETTINGS)
    assert advice.recommendation.kind is AdviceKind.SORT
    # 80 % of the rows are one value, the rest spread thin: every file spans the domain,
    # but sorting leaves the hot value over ≈ 80 % of the files (≈ 1 + 10 · 0.64), so no
    # structure halves the reads; the NDV per file is too high for a value set
    skewed = [
        file_of([0] * 1200 + [rng.randrange(1, 10**6) for _ in range(300)], i) for i in range(10)
    ]
    advice = analyze_column(column(skewed), SETTINGS)
    assert advice.point_selectivity == pytest.approx(0.8**2, abs=0.03)
    assert advice.recommendation.kind is AdviceKind.MIN_MAX, advice.recommendation.reason
    # a heavy value fills whole parts of the overlap chart: each counts its files
    assert advice.overlap[5].lower == advice.overlap[5].upper == 0.0
    assert advice.overlap[5].files == 10
    # all null, and files without bounds are read by every lookup
    empty = [file_of([], i, nulls=10) for i in range(5)]
    assert analyze_column(column(empty), SETTINGS).recommendation.kind is AdviceKind.NONE
    unknown = [
        *[file_of(list(range(i * 10, i * 10 + 10)), i) for i in range(5)],
        FileColumn("nobounds", UNPARTITIONED, 10, 1, null_count=0),
    ]
    advice = analyze_column(column(unknown), SETTINGS)
    assert advice.files_without_bounds == 1
    assert advice.point is not None and advice.point.files_max == 2
    assert advice.point.files_expected == pytest.approx(2.0)


def test_report_per_partition_json_and_text() -> None:
    a, b = PartitionKey(0, (("day", "2026-01-01"),)), PartitionKey(0, (("day", "2026-01-02"),))
    rng = random.Random(6)
    files = [file_of(list(range(i * 100, i * 100 + 100)), i, partition=a) for i in range(5)]
    files += [
        file_of([rng.randrange(1000) for _ in range(100)], 5 + i, partition=b) for i in range(5)
    ]
    report = advise("t", 42, [column(files)], SETTINGS)
    assert [p.partition for p in report.partitions] == [a, b]
    sorted_part, shuffled_part = (p.columns[0] for p in report.partitions)
    assert sorted_part.point is not None and sorted_part.point.files_expected == 1.0
    assert shuffled_part.point is not None and shuffled_part.point.files_max == 5
    assert sorted_part.recommendation.kind is AdviceKind.NONE
    assert shuffled_part.recommendation.kind is not AdviceKind.NONE
    doc = json.loads(json.dumps(report_json(report), allow_nan=False))
    assert doc["snapshot_id"] == 42 and doc["files"] == 10
    assert doc["partitions"][0]["partition"] == {"day": "2026-01-01"}
    col = doc["columns"][0]
    assert col["point_lookup"]["files_max"] == report.columns[0].point.files_max  # type: ignore[union-attr]
    assert len(col["overlap"]["bins"]) == SETTINGS.overlap_bins
    assert isinstance(col["overlap"]["bins"][0]["lower"], int)  # a long, back in its terms
    text = render_report(report, per_partition=True)
    assert "point lookup" in text and "█" in text and "day=2026-01-02" in text
    assert "per partition" not in render_report(report)
    # partitions of fewer than min_files files are counted, not analysed one by one
    c = PartitionKey(0, (("day", "2026-01-03"),))
    lone = [file_of([1, 2, 3], 99, partition=c)]
    report = advise("t", 43, [column([*files, *lone])], SETTINGS)
    assert [p.partition for p in report.partitions] == [a, b]
    assert report.small_partitions == 1 and report.files == 11
    assert report_json(report)["small_partitions"] == 1
    assert "1 partition(s) with fewer than 4 files" in render_report(report)


def test_dates_display_in_their_own_terms() -> None:
    import datetime as dt

    from lakestats.advise import display_value, order_key

    day = dt.date(2026, 11, 23)
    assert display_value("date", order_key("date", day)) == "2026-11-23"
    stamp = dt.datetime(2026, 11, 23, 9, 30, tzinfo=dt.UTC)
    assert display_value("timestamptz", order_key("timestamptz", stamp)) == stamp.isoformat()
    assert order_key("string", "x") == "x"


def test_without_sketches_numbers_use_the_spread_model() -> None:
    # `analyze --no-sketches`: bounds only. Files [10i, 10i + 20]: each overlaps the next.
    files = [
        FileColumn(
            f"f{i}", UNPARTITIONED, 100, 1000, float(10 * i), float(10 * i + 20), null_count=0
        )
        for i in range(10)
    ]
    advice = analyze_column(column(files), SETTINGS)
    assert advice.distribution == "spread_within_bounds" and advice.ndv is None
    assert advice.point is not None and advice.point.files_max == 3  # at 20, 30, …
    # rows spread evenly over [10i, 10i + 20]: inner files see 2 files everywhere
    # (themselves and a neighbour on each half), the two end files 1.5 on average
    assert advice.point.files_expected == pytest.approx((8 * 2 + 2 * 1.5) / 10)
    # 1.9 ≤ 1 + 0.1 · 9: well clustered (the rule needs no NDV for that)
    assert advice.recommendation.kind is AdviceKind.NONE
    assert advice.files_per_lookup_sorted is None  # no NDV: no estimate after sorting
    assert advice.overlap_split == "equal_width" and advice.overlap[0].files == 1


def test_files_from_before_a_column_existed_are_all_null() -> None:
    from lakestats.advise_io import file_column
    from lakestats.model import Column, ColumnMetrics, DataFile, FileContent

    old = DataFile(
        "old", FileContent.DATA, "PARQUET", 50, 999, UNPARTITIONED, field_ids=frozenset({1})
    )
    new = DataFile(
        "new",
        FileContent.DATA,
        "PARQUET",
        50,
        999,
        UNPARTITIONED,
        columns={2: ColumnMetrics(value_count=50, null_count=10, lower=3, upper=9)},
        field_ids=frozenset({1, 2}),
    )
    added = Column(2, "added", "long")
    before, after = file_column(old, added), file_column(new, added)
    assert not before.has_values and before.null_count == 50
    assert after.has_values and (after.lower, after.upper, after.null_count) == (3.0, 9.0, 10)
    advice = analyze_column(ColumnInput(2, "added", "long", (before, after)), SETTINGS)
    assert advice.files == 2 and advice.files_with_values == 1
    assert advice.null_fraction == pytest.approx(60 / 100)
    assert advice.point is not None and advice.point.files_max == 1


def test_store_reading_honours_tombstones(tmp_path: Path) -> None:
    from lakestats.advise_io import advise_store
    from lakestats.model import (
        Column,
        ColumnMetrics,
        DataFile,
        FileContent,
        SegmentEntry,
        StateVersion,
        TableSchema,
    )
    from lakestats.store import StatsStore

    def data_file(i: int) -> DataFile:
        return DataFile(
            f"file:///t/{i}.parquet",
            FileContent.DATA,
            "PARQUET",
            10,
            100 + i,
            UNPARTITIONED,
            columns={
                1: ColumnMetrics(value_count=10, null_count=0, lower=i * 10, upper=i * 10 + 9)
            },
            field_ids=frozenset({1}),
        )

    store = StatsStore(tmp_path, "t")
    seg = store.write_segment(1, [data_file(i) for i in range(6)], {1: "long"})
    # files 0 and 5 were removed by a later commit: tombstones, not rewrites
    entry = SegmentEntry(
        1, seg, seg, 6, dead_files=frozenset({data_file(0).path, data_file(5).path})
    )
    store.commit(StateVersion(1, "t", "iceberg", "file:///t", 2, segments=(entry,)))
    schema = TableSchema(0, (Column(1, "id", "long"),))
    report = advise_store(store, schema, table="t")
    advice = report.columns[0]
    assert report.snapshot_id == 2 and report.files == 4 and advice.files == 4
    assert advice.point is not None and advice.point.bytes_max == max(100 + i for i in (1, 2, 3, 4))
    assert advice.distribution == "spread_within_bounds"  # no sketches stored


def test_without_sketches_a_narrow_integer_column_gets_a_part_per_value() -> None:
    # ten values 0…9 across files [i, i + 2]: equal widths would cut 20 parts, half of them
    # between two integers, labelled 0, 0, 1, 1, …; a part per value counts its files
    files = [
        FileColumn(f"f{i}", UNPARTITIONED, 100, 1000, float(i), float(min(i + 2, 9)), null_count=0)
        for i in range(9)
    ]
    advice = analyze_column(column(files), SETTINGS)
    assert SETTINGS.overlap_bins > 10 and advice.overlap_split == "equal_width"
    assert [(b.lower, b.upper) for b in advice.overlap] == [(float(v), float(v)) for v in range(10)]
    expected = [sum(1 for f in files if f.lower <= v <= f.upper) for v in range(10)]
    assert [b.files for b in advice.overlap] == expected
    assert [b.share for b in advice.overlap] == [k / len(files) for k in expected]


def test_a_narrow_file_next_to_very_wide_ones_is_not_lost_in_rounding() -> None:
    # [−1e20, 0], [0, 1], [1, 1e20]: each file's rows read only that file (the others
    # touch it at a single point). In doubles the prefix integral 1e20 + 1 rounds to 1e20
    # and the middle file's cover came out 0, the expectation 2/3 of a file.
    bounds = [(-1e20, 0.0), (0.0, 1.0), (1.0, 1e20)]
    files = [
        FileColumn(f"f{i}", UNPARTITIONED, 10, 100, lo, hi, null_count=0)
        for i, (lo, hi) in enumerate(bounds)
    ]
    advice = analyze_column(column(files, "double"), SETTINGS)
    assert advice.point is not None
    assert advice.point.files_expected == pytest.approx(1.0, rel=1e-12)
    assert advice.point.bytes_expected == pytest.approx(100.0, rel=1e-12)
    assert advice.point.files_max == 2


def test_nanosecond_timestamps_are_placed_by_microseconds() -> None:
    # timestamp_ns has no KLL sketch (Paimon's TIMESTAMP(9)): bounds stay datetimes and
    # take the spread model, on the same line as the numbers of
    # test_without_sketches_numbers_use_the_spread_model: files [10i, 10i + 20] minutes
    import datetime as dt

    from lakestats.advise import display_value, order_key

    for type_str, zone in (("timestamp_ns", None), ("timestamptz_ns", dt.UTC)):
        start = dt.datetime(2026, 11, 23, tzinfo=zone)

        def at(minutes: int, start: dt.datetime = start, type_str: str = type_str) -> Any:
            return order_key(type_str, start + dt.timedelta(minutes=minutes))

        files = [
            FileColumn(f"f{i}", UNPARTITIONED, 100, 1000, at(10 * i), at(10 * i + 20), null_count=0)
            for i in range(10)
        ]
        advice = analyze_column(column(files, type_str), SETTINGS)
        assert advice.point is not None and advice.point.files_max == 3
        assert advice.point.files_expected == pytest.approx((8 * 2 + 2 * 1.5) / 10)
        labels = [display_value(type_str, b.lower) for b in advice.overlap]
        # 20 parts of 110 minutes: 5.5 minutes each
        expected = [(start + dt.timedelta(seconds=330 * k)).isoformat() for k in range(20)]
        assert labels == expected


def test_a_nan_bound_is_unknown() -> None:
    from lakestats.advise import order_key

    assert order_key("double", math.nan) is None and order_key("float", 1.5) == 1.5
