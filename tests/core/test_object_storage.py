"""Tables on object storage: read, sketched and published over S3.

AWS cannot exist here: an S3 server on 127.0.0.1 stands in (moto's, a real HTTP server
speaking the S3 API; ``tests/object_store.py``), reached by every client through the
standard AWS environment. lakestats itself is given nothing but ``s3://`` locations.

* Tables written by real engines (Spark, Databricks, Java Paimon, Impala's Java Iceberg),
  copied to a bucket, must get the stats their local copies get (which the fixture tests
  check against DuckDB and the formats' own readers).
* Tables written straight to S3 by their writers (delta-rs, pyiceberg through a catalog),
  analyzed commit by commit, must equal a from-scratch analysis and the rows read back
  from S3 by the writer's own reader; a catalog table's Puffin file and a Delta table's
  sidecar land on S3.
* What needs Spark's Hadoop to read S3 (the SQL job) says which connector is missing.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Mapping
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from datasketches import compact_theta_sketch
from deltalake import DeltaTable, write_deltalake
from pyiceberg.table.puffin import PuffinFile
from pyiceberg.transforms import IdentityTransform
from structlog.testing import capture_logs

from delta_tables import FIXTURES as DELTA_FIXTURES
from delta_tables import assert_describes_live_rows
from foreign import FIXTURES as ICEBERG_FIXTURES
from foreign import location_map
from lakestats.analyze import analyze_table
from lakestats.cli import main
from lakestats.config import Config
from lakestats.sketches.hashing import THETA_SEED
from lakestats.store import atomic
from lakestats.tables import open_table
from lakestats.testing import IcebergWarehouse
from lakestats.unclaimed import claims_of, forget_folder, unclaimed_folders
from object_store import S3Server
from paimon_fixtures import fixture as paimon_fixture
from paimon_tables import PaimonWarehouse

pytestmark = [pytest.mark.spark]

# what differs between two analyses of one table by design: when, where it was published
_NOT_COMPARED = ("computed_at_ms", "published", "table")


def cli(*args: str, code: int = 0) -> str:
    out = io.StringIO()
    got = main(list(args), out=out)
    assert got == code, out.getvalue()
    return out.getvalue()


def stats(location: str, state: Path | str, *extra: str) -> dict[str, Any]:
    cli("analyze", location, "--state-dir", str(state), "-q", *extra)
    doc = json.loads(cli("show", location, "--state-dir", str(state), "--json", *extra))
    # A Delta commit without a timestamp of its own is as old as its log file (the
    # protocol's rule), and a copy's files on S3 are as old as the upload.
    del doc["commit"]["timestamp_ms"]
    return {k: v for k, v in doc.items() if k not in _NOT_COMPARED}


def _map_args(mapping: Mapping[str, str]) -> list[str]:
    return [
        arg
        for source, target in mapping.items()
        for arg in ("--map-location", f"{source}={target}")
    ]


# (copied from, location in the copy): written by Spark, Databricks, Java Paimon and Impala
REAL_ENGINE_TABLES = {
    "delta: Spark, deletion vectors and a checkpoint": (
        DELTA_FIXTURES / "delta-golden/dv-partitioned-with-checkpoint",
        "",
    ),
    "delta: Databricks, column mapping": (
        DELTA_FIXTURES / "delta-rs/table_with_column_mapping",
        "",
    ),
    "paimon: Java, renamed and retyped columns": (
        paimon_fixture("append_table_with_alter_table"),
        "",
    ),
    "paimon: Java, primary key with deletion vectors": (
        paimon_fixture("pk_table_scan_and_read_dv"),
        "",
    ),
    "paimon: Java, timestamps of every precision and zone": (
        paimon_fixture("append_with_multiple_ts_precision_and_timezone"),
        "",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REAL_ENGINE_TABLES))
def test_a_real_engines_table_on_s3_has_the_stats_of_its_local_copy(
    name: str, s3_server: S3Server, spark: Any, tmp_path: Path
) -> None:
    source, inside = REAL_ENGINE_TABLES[name]
    local = tmp_path / "local"
    shutil.copytree(source, local)  # analyzing a local Delta table publishes into it
    for path in [local, *local.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    bucket = s3_server.new_bucket()
    s3_server.sync(local, f"{bucket}/copy")
    suffix = f"/{inside}" if inside else ""

    on_s3 = stats(f"{bucket}/copy{suffix}", tmp_path / "s3-state")
    here = stats(f"{local}{suffix}", tmp_path / "local-state")

    assert on_s3 == here
    assert on_s3["record_count"] > 0 and on_s3["columns"]
    assert any(c.get("ndv") for c in on_s3["columns"].values())  # sketched, not metadata only


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["iceberg_v2_delete_positional", "iceberg_v2_partitioned_position_deletes"]
)
def test_an_impala_written_iceberg_table_mapped_to_s3_has_the_stats_of_the_local_one(
    name: str, s3_server: S3Server, spark: Any, tmp_path: Path
) -> None:
    """Java Iceberg's absolute ``hdfs://`` paths, mapped to a bucket; position deletes read
    from S3 by the Arrow engine's tasks."""
    bucket = s3_server.new_bucket()
    s3_server.sync(ICEBERG_FIXTURES, f"{bucket}/ice")
    to_s3 = dict.fromkeys(location_map(), f"{bucket}/ice/")

    on_s3 = stats(f"{bucket}/ice/{name}", tmp_path / "s3-state", *_map_args(to_s3))
    here = stats(str(ICEBERG_FIXTURES / name), tmp_path / "local-state", *_map_args(location_map()))

    assert on_s3 == here
    assert on_s3["row_deletes"]["deleted_records"] > 0
    assert on_s3["merged_record_count"] < on_s3["record_count"]


# KLL merges depend on their order: an incremental run's quantiles differ from a
# rebuild's within the rank error (checked against the rows by _assert_quantiles)
_ORDER_DEPENDENT = ("quantiles", "histogram")


def _comparable(doc: Mapping[str, Any]) -> dict[str, Any]:
    columns = {
        name: {k: v for k, v in column.items() if k not in _ORDER_DEPENDENT}
        for name, column in doc["columns"].items()
    }
    return {**doc, "columns": columns}


def _assert_quantiles(doc: Mapping[str, Any], rows: pa.Table, name: str) -> None:
    values = sorted(rows.column(name).drop_null().to_pylist())
    column = doc["columns"][name]
    error = column["sketch"]["quantiles"]["normalized_rank_error"]
    for q, value in column["quantiles"].items():
        rank = sum(1 for v in values if v <= value) / len(values)
        assert abs(rank - float(q)) <= 2 * error + 1 / len(values), (name, q)


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i % 97}" if i % 7 else None for i in ids], pa.string()),
            "price": pa.array([i * 0.5 for i in ids], pa.float64()),
            "region": pa.array(["north", "south", "east", "west"][i % 4] for i in ids),
        }
    )


@pytest.mark.slow
def test_delta_rs_writing_to_s3_analyzed_commit_by_commit_equals_a_rebuild_and_the_rows(
    s3_server: S3Server, spark: Any, tmp_path: Path
) -> None:
    uri = f"{s3_server.new_bucket()}/sales"
    options = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}  # one writer: no lock table needed
    state = tmp_path / "state"
    write_deltalake(uri, _rows(0, 2_000), storage_options=options)
    stats(uri, state)
    write_deltalake(uri, _rows(2_000, 500), mode="append", storage_options=options)
    stats(uri, state)
    DeltaTable(uri, storage_options=options).delete("id < 300")  # rewrites the first file
    incremental = stats(uri, state)
    sidecar = f"{uri}/_delta_log/_lakestats"
    index = json.loads(s3_server.read(f"{sidecar}/index.json"))["versions"]
    published = json.loads(s3_server.read(f"{sidecar}/{index[str(incremental['snapshot_id'])]}"))

    rows = DeltaTable(uri, storage_options=options).to_pyarrow_table()  # read back from S3
    assert sorted(index, key=int) == ["0", "1", "2"]  # every version, published on S3
    assert published["columns"] == incremental["columns"]
    assert published["merged_record_count"] == incremental["merged_record_count"]

    assert _comparable(incremental) == _comparable(stats(uri, tmp_path / "rebuilt"))
    assert_describes_live_rows(incremental, rows, ndv=True)
    _assert_quantiles(incremental, rows, "id")
    assert incremental["merged_record_count"] == 2_200


def test_opening_a_table_reads_its_newest_state_on_s3_once(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """Choosing a table's store folder reads ``<id>/``'s newest state (whose location it
    is): the store keeps it, so the run's first ``current()`` asks only whether it is still
    the newest (two HEADs), not the log's listing and the state again (a LIST, a GET).
    Counted at the server."""
    bucket = s3_server.new_bucket()
    table = tmp_path / "t"
    shutil.copytree(DELTA_FIXTURES / "delta-rs" / "simple_table", table)
    s3_server.sync(table, f"{bucket}/t")
    config = Config.model_validate(
        {"state_dir": f"{bucket}/state", "table": [{"name": "t", "location": f"{bucket}/t"}]}
    )
    analyze_table("t", config=config, sketcher=None)
    with s3_server.request_log() as requests:
        opened = open_table("t", config)
        requests.take()
        state = opened.store.current()
        assert requests.take()[0] == {"HEAD": 2}
    assert state is not None and state.last_snapshot_id == opened.table.current_snapshot_id()


@pytest.mark.slow
def test_a_stats_store_on_s3_holds_what_a_local_store_holds(
    s3_server: S3Server, spark: Any, tmp_path: Path
) -> None:
    """``state_dir = "s3://…"``: a table and its stats store both on S3, analyzed commit by
    commit (appends, a delete that rewrites a file, so a re-merge from stored per-file
    sketches), serve what the same runs with a local store serve."""
    bucket = s3_server.new_bucket()
    uri, state_uri = f"{bucket}/sales", f"{bucket}/lakestats"
    options = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    write_deltalake(uri, _rows(0, 1_000), storage_options=options)
    on_s3, here = stats(uri, state_uri), stats(uri, tmp_path / "state")
    assert on_s3 == here
    write_deltalake(uri, _rows(1_000, 400), mode="append", storage_options=options)
    DeltaTable(uri, storage_options=options).delete("id < 150")
    on_s3, here = stats(uri, state_uri), stats(uri, tmp_path / "state")

    assert on_s3 == here
    assert on_s3["merged_record_count"] == 1_250
    rows = DeltaTable(uri, storage_options=options).to_pyarrow_table()
    assert_describes_live_rows(on_s3, rows, ndv=True)
    keys = [k.removeprefix(f"{state_uri}/") for k in s3_server.keys(state_uri)]
    (table_id,) = {k.split("/", 1)[0] for k in keys}
    assert {k.split("/")[1] for k in keys} == {"log", "segments", "aggregates", "stats"}
    local = sorted(
        p.relative_to(tmp_path / "state").as_posix()
        for p in (tmp_path / "state").rglob("*")
        if p.is_file() and p.name != "lakestats-spark.log"
    )
    assert [k.split("/", 1)[1] for k in keys if k.startswith(f"{table_id}/log/")] == [
        k.split("/", 1)[1] for k in local if k.split("/")[1] == "log"
    ]


@pytest.mark.slow
def test_a_catalog_table_on_s3_is_analyzed_and_its_puffin_stats_land_on_s3(
    s3_server: S3Server, spark: Any, tmp_path: Path
) -> None:
    warehouse = IcebergWarehouse(
        tmp_path / "catalog",
        warehouse=f"{s3_server.new_bucket()}/wh",
        io_properties=s3_server.iceberg_io,
    )
    warehouse.create_table(
        "sales", _rows(0, 1).schema, partition_by=[("region", IdentityTransform())]
    )
    warehouse.append("sales", _rows(0, 1_500))
    config = tmp_path / "lakestats.toml"
    properties = "\n".join(f'"{k}" = "{v}"' for k, v in warehouse.catalog_properties.items())
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n\n'
        f'[[table]]\nname = "sales"\ncatalog = "{warehouse.catalog_name}"\n'
        f'identifier = "{warehouse.identifier("sales")}"\n\n'
        f"[catalog.{warehouse.catalog_name}]\n{properties}\n"
    )
    cli("analyze", "sales", "--config", str(config), "-q")
    warehouse.append("sales", _rows(1_500, 700))
    warehouse.delete("sales", "id < 100")
    cli("analyze", "sales", "--config", str(config), "-q")
    doc = json.loads(cli("show", "sales", "--config", str(config), "--json"))

    table = warehouse.table("sales")
    rows = table.scan().to_arrow()  # pyiceberg reads them back from S3
    assert_describes_live_rows(doc, rows, ndv=True, partition="region", table_format="iceberg")
    _assert_quantiles(doc, rows, "price")
    current = table.metadata.current_snapshot_id
    (puffin_entry,) = [s for s in table.metadata.statistics if s.snapshot_id == current]
    assert puffin_entry.statistics_path.startswith("s3://")
    data = s3_server.read(puffin_entry.statistics_path)
    assert puffin_entry.file_size_in_bytes == len(data)
    ndv = {
        blob.fields[0]: compact_theta_sketch.deserialize(
            PuffinFile(data).get_blob_payload(blob), THETA_SEED
        ).get_estimate()
        for blob in PuffinFile(data).footer.blobs
    }
    by_name = {f.name: f.field_id for f in table.schema().fields}
    assert round(ndv[by_name["id"]]) == doc["columns"]["id"]["ndv"]
    (partitions_entry,) = [
        p for p in table.metadata.partition_statistics if p.snapshot_id == current
    ]
    partitions = pq.read_table(io.BytesIO(s3_server.read(partitions_entry.statistics_path)))
    assert sorted(r["region"] for r in partitions.column("partition").to_pylist()) == [
        "east",
        "north",
        "south",
        "west",
    ]
    assert pc.sum(partitions.column("data_record_count")).as_py() == 2_100
    assert (
        f"iceberg statistics (Puffin, theta NDV): {puffin_entry.statistics_path}"
        in doc["published"]
    )


@pytest.mark.slow
def test_a_primary_key_table_on_s3_is_merged_by_key_without_sparks_s3_connector(
    s3_server: S3Server, spark: Any, tmp_path: Path
) -> None:
    """pypaimon commits updating and deleting keys: each commit's buckets are merged by
    key (``arrow_sketch/key_winners.py``) with every input read from S3 in the Arrow
    engine's tasks; the stats are the local copy's and describe pypaimon's merged read."""
    warehouse = PaimonWarehouse(tmp_path / "wh")
    local = warehouse.create(
        "orders",
        [("id", "long"), ("status", "string"), ("amount", "long")],
        primary_keys=["id"],
        options={"metadata.stats-mode": "full", "bucket": "2"},
    )
    uri = f"{s3_server.new_bucket()}/orders"
    s3_state, local_state = tmp_path / "s3-state", tmp_path / "local-state"
    for step, ids in enumerate([range(0, 120), range(60, 150), range(100, 130)]):
        warehouse.write(
            "orders",
            {
                "id": list(ids),
                "status": [f"s{(i + step) % 5}" for i in ids],
                "amount": [i * 10 + step for i in ids],
            },
        )
        s3_server.sync(local, uri)
        with capture_logs() as logs:
            on_s3 = stats(uri, s3_state)
        assert not [e for e in logs if e["event"] == "arrow_deletes_declined"]
        here = stats(str(local), local_state)
        assert on_s3 == here, step

    rows = warehouse.read("orders")
    assert on_s3["merged_record_count"] == rows.num_rows == 150
    assert on_s3["record_count"] > rows.num_rows  # the files hold every version
    assert on_s3["columns"]["amount"]["max"] == pc.max(rows.column("amount")).as_py()
    assert on_s3["columns"]["status"]["ndv"] == len(pc.unique(rows.column("status")))


def test_the_sql_job_on_s3_names_the_missing_hadoop_connector(
    s3_server: S3Server, spark: Any, tmp_path: Path
) -> None:
    """A merge the Arrow engine leaves to the SQL job (here: inputs written before a
    column's type changed) is read by Spark's own Hadoop, which without an S3 connector
    (none is installed here) cannot."""
    uri = f"{s3_server.new_bucket()}/pk"
    s3_server.sync(paimon_fixture("pk_table_with_mor"), uri)
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err):
        code = main(["analyze", uri, "--state-dir", str(tmp_path / "state"), "-q"], out=out)

    assert code == 1
    (line,) = [e for e in err.getvalue().splitlines() if e.startswith("lakestats: error:")]
    assert "Spark cannot read s3:// files" in line
    assert "spark.hadoop.fs.s3.impl" in line and "Traceback" not in err.getvalue()


def test_a_folder_no_configured_table_uses_is_listed_and_forgotten_on_s3(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """Two copies of one table (one id) analyzed into one S3 state dir, then only one
    configured: the other's folder is listed as unclaimed and ``forget`` deletes its objects
    and nothing of the configured table's."""
    bucket = s3_server.new_bucket()
    local = tmp_path / "t"
    shutil.copytree(DELTA_FIXTURES / "delta-rs" / "simple_table", local)
    for copy in ("a", "b"):
        s3_server.sync(local, f"{bucket}/{copy}")
    state = f"{bucket}/state"
    tables = [{"name": name, "location": f"{bucket}/{name}"} for name in ("a", "b")]
    for table in tables:
        analyze_table(
            table["name"],
            config=Config.model_validate({"state_dir": state, "table": tables}),
            sketcher=None,
        )
    config = Config.model_validate({"state_dir": state, "table": tables[1:]})
    claims = claims_of(config)
    [left] = unclaimed_folders(state, claims)
    assert left.table == "a" and left.location == f"{bucket}/a"
    kept = [k for k in s3_server.keys(state) if not k.startswith(f"{state}/{left.name}/")]
    assert len(s3_server.keys(state)) == len(kept) + left.files
    # an empty folder marker, as pyarrow's delete_file left after each cleanup delete
    s3_server.filesystem.create_dir(f"{state}/{left.name}/segments".removeprefix("s3://"))
    with s3_server.request_log() as requests:
        report = forget_folder(config, left.name, now_ms=left.newest_file_ms + 3_600_000)
        counts = requests.take()[0]
    assert len(report.files) == left.files
    # a HEAD and a DELETE per object, then one per folder still listed (the marker's)
    # and the table folder's own; no marker PUT
    assert counts["DELETE"] == left.files + 2 and counts["PUT"] == 0
    assert left.name not in atomic.list_subdirs(state)
    assert s3_server.keys(state) == kept
    assert unclaimed_folders(state, claims) == []
