"""Iceberg's own Spark streaming sink and eosink-iceberg write one table side by side, each
exactly once, while Iceberg's Spark procedures maintain the table between their batches.

Writer I is Iceberg's streaming sink (Iceberg 1.12's runtime on Spark 4.1, in a process of its
own: :mod:`eosink.testing.reference_spark`), a file-source query over a folder of JSON files,
one file a micro-batch, run to the end of its input (``trigger(availableNow=True)``) each time;
its checkpoint makes it exactly once, and Iceberg's sink skips an epoch a snapshot of the
table's current lineage already carries (its summary holds the query's id and the epoch).
Iceberg's sink finds an epoch by walking the current snapshot's ancestors: an epoch whose
snapshot an expiry removed, run again, is committed again (its rows twice). So each expiry here
keeps the snapshot of I's last epoch (``retain_last => 3``), as a user who replays must.
Writer E is eosink-iceberg, its batches driven through the protocol in this process as a
streaming query's ``foreachBatch`` drives them (one writer id, two tasks a batch).

The story, all on one table (pyiceberg creates it; the catalog is shared, as in
``test_jvm_iceberg_spark_reads.py``):

* E commits batches 0 and 1. E's batch 2 writes its files; before it commits, one Spark
  process runs I over its first two files (batches 0 and 1), then ``rewrite_data_files`` (every
  file, E's among them, compacted), ``rewrite_manifests``, and ``expire_snapshots`` down to the
  three newest (E's snapshots go; I's last stays in the lineage). E's batch 2 commits then.
* E commits batch 3; E's replays of batch 3 (its snapshot current) and of batch 1 (its
  snapshot expired, its proof a table property) are skipped.
* I's checkpoint loses its last commit (Spark's ``commits/1``) and I gets two more files. E's
  batch 4 writes; before it commits, Spark runs I again (batch 1 again, which Iceberg's sink
  must skip, then batches 2 and 3) and the three procedures again. E's batch 4 commits; its
  replay and that of batch 2 are skipped; E commits batch 5.
* I's checkpoint loses ``commits/3``; a last Spark process runs I (batch 3 again, after the
  procedures: Iceberg's sink must skip it) and reads the table.

Judged by pyiceberg's scan and the runtime's ``SELECT``: every row of both writers exactly once
(counted per id), and a filtered read of each.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from eosink_iceberg.proof import property_key
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, load, make_namespace, run, spark_session_conf

from eosink.testing.faults import BeforeCommit
from eosink.testing.reference_spark import Sql, StepResult, Stream, run_reference

UTC = dt.timezone.utc
#: The Spark Iceberg's runtime 1.12 is built for (3rdparty/jvm/spark-envs.txt).
ICEBERG_SPARK_VERSION = "4.1.4"
SPARK_TABLE = f"eosink.{TABLE}"
SCHEMA = "id long, src string, batch int"
#: Rows per batch (E: two tasks of two rows; I: one JSON file of four rows).
ROWS = 4
#: The ids of a writer's rows start here: a doubled or lost row names its writer and batch.
BASE = {"I": 0, "E": 100_000}
WRITER = "w"


def ids(writer: str, batch: int) -> list[int]:
    return [BASE[writer] + batch * 100 + i for i in range(ROWS)]


def e_parts(batch: int) -> list[pa.RecordBatch]:
    rows = pa.record_batch(
        {
            "id": pa.array(ids("E", batch), pa.int64()),
            "src": pa.array(["E"] * ROWS, pa.string()),
            "batch": pa.array([batch] * ROWS, pa.int32()),
        }
    )
    return [rows.slice(0, 2), rows.slice(2)]


class IcebergStream:
    """Writer I: its input folder (one JSON file a micro-batch) and its checkpoint."""

    def __init__(self, folder: Path) -> None:
        self.input, self.checkpoint = folder / "in-I", folder / "checkpoint-I"
        self.input.mkdir()
        self.files = 0

    def drop(self) -> None:
        n = self.files
        path = self.input / f"{n:04d}.json"
        records = [{"id": i, "src": "I", "batch": n} for i in ids("I", n)]
        path.with_suffix(".tmp").write_text("".join(json.dumps(r) + "\n" for r in records))
        os.rename(path.with_suffix(".tmp"), path)
        # the file source takes files in the order of their times: one second apart
        stamp = time.time() - 1000 + n
        os.utime(path, (stamp, stamp))
        self.files += 1

    def forget_last_commit(self) -> int:
        """Delete the last file of the checkpoint's ``commits/``: Spark runs that batch again."""
        commits = self.checkpoint / "commits"
        last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        for name in (str(last), f".{last}.crc"):
            if (commits / name).exists():
                (commits / name).unlink()
        return last

    def step(self) -> Stream:
        return Stream(
            source=str(self.input),
            table=SPARK_TABLE,
            checkpoint=str(self.checkpoint),
            schema=SCHEMA,
            options={"maxFilesPerTrigger": "1"},
        )


def procedures() -> list[Sql]:
    """Iceberg's maintenance as its docs give it: compaction of every file, the manifests
    rewritten, the snapshots expired down to the three newest (``retain_last``)."""
    cutoff = (dt.datetime.now(UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    return [
        Sql(
            f"CALL eosink.system.rewrite_data_files(table => '{TABLE}', "
            "options => map('rewrite-all', 'true'))"
        ),
        Sql(f"CALL eosink.system.rewrite_manifests('{TABLE}')"),
        Sql(
            f"CALL eosink.system.expire_snapshots(table => '{TABLE}', "
            f"older_than => TIMESTAMP '{cutoff} UTC', retain_last => 3)"
        ),
    ]


#: The table's snapshots, oldest first, with their summaries.
SNAPSHOTS = Sql(
    f"SELECT snapshot_id, parent_id, operation, summary FROM {SPARK_TABLE}.snapshots "
    "ORDER BY committed_at"
)


def icebergs_epochs(snapshots: StepResult) -> list[int]:
    """The epochs of I's commits among ``snapshots`` (Iceberg's streaming sink writes the
    query's id and the epoch into each snapshot's summary), in order."""
    return [
        int(s["summary"]["spark.sql.streaming.epochId"])
        for s in snapshots.ok()
        if "spark.sql.streaming.epochId" in (s["summary"] or {})
    ]


def batches_run(result: StepResult) -> list[tuple[int, int]]:
    """The micro-batches a :class:`Stream` step ran: (batch id, input rows)."""
    return [(r["batchId"], r["numInputRows"]) for r in result.ok() if r["numInputRows"]]


@pytest.fixture(scope="module")
def story(tmp_path_factory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("iceberg-streaming-beside")
    catalog = catalog_properties(folder)
    make_namespace(catalog)
    from pyiceberg.catalog import load_catalog

    load_catalog("eosink", **catalog).create_table(
        TABLE,
        schema=pa.schema([("id", pa.int64()), ("src", pa.string()), ("batch", pa.int32())]),
    )
    conf = spark_session_conf(folder)
    stream = IcebergStream(folder)
    sink = IcebergSink(table=TABLE, catalog=catalog)
    out: dict[str, Any] = {"catalog": catalog, "runs": []}

    def e(batch: int, *, then: list[Any] | None = None) -> str:
        """E's batch ``batch``; with ``then``, one Spark process runs those steps after the
        batch's tasks wrote and before its commit."""
        plugins: tuple = ()
        if then is not None:
            steps = then
            plugins = (
                BeforeCommit(
                    lambda: out["runs"].append(
                        run_reference(ICEBERG_SPARK_VERSION, ["iceberg"], steps, conf)
                    )
                ),
            )
        return run(sink, batch, e_parts(batch), writer_id=WRITER, plugins=plugins).status

    assert e(0) == "committed"
    assert e(1) == "committed"
    stream.drop()
    stream.drop()
    assert e(2, then=[stream.step(), *procedures()]) == "committed"
    out["snapshots_after_first_maintenance"] = len(load(catalog).snapshots())
    assert e(3) == "committed"
    out["replays"] = {3: e(3), 1: e(1)}
    out["proof_after_expiry"] = load(catalog).properties.get(property_key(WRITER))

    out["forgot"] = [stream.forget_last_commit()]
    stream.drop()
    stream.drop()
    assert e(4, then=[stream.step(), SNAPSHOTS, *procedures()]) == "committed"
    out["replays"].update({4: e(4), 2: e(2)})
    assert e(5) == "committed"
    out["proof_at_end"] = load(catalog).properties.get(property_key(WRITER))

    out["forgot"].append(stream.forget_last_commit())
    out["runs"].append(
        run_reference(
            ICEBERG_SPARK_VERSION,
            ["iceberg"],
            [
                stream.step(),
                Sql(f"SELECT id, src, batch FROM {SPARK_TABLE}"),
                Sql(f"SELECT id FROM {SPARK_TABLE} WHERE batch BETWEEN 1 AND 2"),
                SNAPSHOTS,
            ],
            conf,
        )
    )
    return out


def expected_ids(where_batches: range | None = None) -> Counter:
    batches = where_batches or range(6)
    return Counter(
        [i for b in batches for i in ids("E", b)]
        + [i for b in batches if b < 4 for i in ids("I", b)]
    )


def test_icebergs_streaming_sink_ran_each_batch(story) -> None:
    """Spark ran I's batches 0 and 1, then batch 1 again (its commit forgotten) with 2 and 3,
    then batch 3 again. The compactions rewrote every file: E's four and I's two, then the
    compacted one, E's four and I's two; each expiry removed snapshots."""
    first, second, last = story["runs"]
    assert story["forgot"] == [1, 3]
    assert batches_run(first[0]) == [(0, ROWS), (1, ROWS)]
    assert batches_run(second[0]) == [(1, ROWS), (2, ROWS), (3, ROWS)]
    assert batches_run(last[0]) == [(3, ROWS)]
    for run_, files in ((first, 6), (second, 7)):
        compacted, _, expired = (result.ok() for result in run_[-3:])
        assert compacted[0]["rewritten_data_files_count"] == files, compacted
        assert expired[0]["deleted_manifest_lists_count"] > 0, expired  # snapshots expired


def test_icebergs_streaming_sink_skipped_its_replays(story) -> None:
    """Each replayed epoch's snapshot was still in the table's lineage (the expiry kept the
    three newest snapshots): Iceberg's sink committed each epoch once, and nothing on the
    replays. After the second run's query: epoch 1 (the first run's commit, kept by the
    expiry), 2 and 3; after the last run: epoch 3 only (the rest expired since), and the
    newest snapshot is E's."""
    _, second, last = story["runs"]
    assert icebergs_epochs(second[1]) == [1, 2, 3]
    assert icebergs_epochs(last[3]) == [3]
    assert last[3].ok()[-1]["summary"].get("eosink.batch") == "5"


def test_eosinks_replays_are_skipped_after_the_procedures(story) -> None:
    """E's replays are skipped: of its current batch, and of batches whose snapshots Spark's
    ``expire_snapshots`` removed (the proof is a table property; the procedures keep it)."""
    assert story["replays"] == {3: "skipped", 1: "skipped", 4: "skipped", 2: "skipped"}
    assert story["proof_after_expiry"] is not None
    assert story["proof_at_end"] is not None
    # the three snapshots the first expiry kept (I's epoch 1, the compaction, the manifests'
    # rewrite) and E's batch 2: E's batches 0 and 1 and I's epoch 0 expired
    assert story["snapshots_after_first_maintenance"] == 4


def test_pyiceberg_reads_each_row_once(story) -> None:
    table = load(story["catalog"])
    rows = table.scan().to_arrow()
    assert Counter(rows.column("id").to_pylist()) == expected_ids()
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual

    where = And(GreaterThanOrEqual("batch", 1), LessThanOrEqual("batch", 2))
    filtered = table.scan(row_filter=where).to_arrow().column("id").to_pylist()
    assert Counter(filtered) == expected_ids(range(1, 3))


def test_icebergs_runtime_reads_each_row_once(story) -> None:
    last = story["runs"][-1]
    whole, filtered, snapshots = (result.ok() for result in last[1:4])
    shown = [(s["operation"], s["summary"]) for s in snapshots]
    assert Counter(r["id"] for r in whole) == expected_ids(), shown
    assert Counter(r["id"] for r in filtered) == expected_ids(range(1, 3)), shown
    assert {(r["src"], r["batch"]) for r in whole} == {
        (w, b) for w in "EI" for b in range(6) if w == "E" or b < 4
    }
