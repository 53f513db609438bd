"""End to end on local Spark: queue rows through both front doors, a query killed mid-batch.

The source rows come from emulated ordered tables (queues): their ``$tablet_index`` /
``$row_index`` are read back with ``select_rows`` and handed to Spark as a file stream under
SPYT's service column names, one file per micro-batch. The query is killed mid-batch by a
non-retriable proxy error on the data insert of batch 1 (some partitions written, some not),
restarted from its checkpoint, and the output must hold exactly one row per source row.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from conftest import OUT, rows_schema, table_rows

import eosink
from eosink_yt_emulator.kit import sink_options
from eosink_yt_dynamic import SPYT_ROW_INDEX, SPYT_TABLET_INDEX, create_output_table, with_queue_id
from eosink_yt_dynamic.tables import ensure_dynamic_table

SOURCE_SCHEMA = (
    f"{SPYT_TABLET_INDEX} long, {SPYT_ROW_INDEX} long, id long, name string, amount double"
)


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark(2)
    eosink.register_data_sources(session)
    return session


def make_queue(yt, path: str, rows_per_tablet: int, id_base: int) -> None:
    ensure_dynamic_table(
        yt,
        path,
        [{"name": "id", "type": "int64"}, {"name": "name", "type": "string"}],
        attributes={"tablet_count": 2},
    )
    rows = []
    for tablet in (0, 1):
        for i in range(rows_per_tablet):
            rows.append(
                {"$tablet_index": tablet, "id": id_base + tablet * 1000 + i, "name": f"q{id_base}"}
            )
    yt.insert_rows(path, rows)


def queue_files(yt, queue: str, directory, files: int) -> list[dict]:
    """The queue's rows as ``files`` JSON files (micro-batches), service columns named as SPYT's."""
    rows = list(yt.select_rows(f"[$tablet_index], [$row_index], id, name from [{queue}]"))
    rows = [
        {
            SPYT_TABLET_INDEX: r["$tablet_index"],
            SPYT_ROW_INDEX: r["$row_index"],
            "id": r["id"],
            "name": r["name"],
            "amount": r["id"] / 4,
        }
        for r in rows
    ]
    assert rows and all(r[SPYT_TABLET_INDEX] is not None for r in rows)
    chunks = [rows[i::files] for i in range(files)]
    os.makedirs(directory, exist_ok=True)
    return chunks


def drop(directory, n: int, rows: list[dict]) -> None:
    with open(os.path.join(directory, f"part-{n:03d}.json"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def run_available(stream_writer) -> None:
    stream_writer.trigger(availableNow=True).start().awaitTermination(120)


def kill_mid_batch(emulator) -> None:
    """The next data insert fails for good: its task, then the batch, then the query die."""
    emulator.faults.fail_next(
        "insert_rows", code=1, message="injected: executor lost", match={"path": OUT}
    )


def test_foreach_batch_killed_mid_batch_and_restarted(spark, yt_emulator, yt, tmp_path):
    make_queue(yt, "//q/a", rows_per_tablet=30, id_base=0)
    source = tmp_path / "in"
    batches = queue_files(yt, "//q/a", source, files=3)
    create_output_table(yt, OUT, rows_schema())
    sink = eosink.sink(
        "yt-dynamic",
        path=OUT,
        **sink_options(yt_emulator),
    )

    def query():
        df = (
            spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        )
        return (
            df.repartition(2)
            .writeStream.foreachBatch(eosink.foreach_batch(sink, writer_id="orders"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )

    drop(source, 0, batches[0])
    run_available(query())
    drop(source, 1, batches[1])
    kill_mid_batch(yt_emulator)
    with pytest.raises(Exception, match="executor lost"):
        run_available(query())
    drop(source, 2, batches[2])
    run_available(query())

    held = table_rows(yt)
    expected = sorted(r["id"] for b in batches for r in b)
    assert sorted(r["id"] for r in held) == expected  # one row per source row
    assert {(r["tablet_index"], r["row_index"]) for r in held} == {
        (r[SPYT_TABLET_INDEX], r[SPYT_ROW_INDEX]) for b in batches for r in b
    }


def test_data_source_two_queues_killed_mid_batch_and_restarted(spark, yt_emulator, yt, tmp_path):
    make_queue(yt, "//q/a", rows_per_tablet=20, id_base=0)
    make_queue(yt, "//q/b", rows_per_tablet=20, id_base=100_000)  # same coordinates as //q/a
    dirs = {q: tmp_path / q.strip("/").replace("/", "_") for q in ("//q/a", "//q/b")}
    batches = {q: queue_files(yt, q, d, files=2) for q, d in dirs.items()}

    def query():
        streams = [
            with_queue_id(
                spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).json(str(d)),
                q,
            )
            for q, d in dirs.items()
        ]
        df = streams[0].unionByName(streams[1])
        return (
            df.writeStream.format("eosink-yt-dynamic")
            .option("writerId", "two-queues")
            .option("proxy", yt_emulator.url)
            .option("path", OUT)
            .option("proxyDiscovery", "false")
            .option("createTable", "true")
            .option("clientConfig", json.dumps(yt_emulator.client_config()))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )

    for q, d in dirs.items():
        drop(d, 0, batches[q][0])
    run_available(query())
    for q, d in dirs.items():
        drop(d, 1, batches[q][1])
    kill_mid_batch(yt_emulator)
    with pytest.raises(Exception, match="executor lost"):
        run_available(query())
    run_available(query())

    held = table_rows(yt)
    expected = sorted(r["id"] for q in batches for b in batches[q] for r in b)
    assert sorted(r["id"] for r in held) == expected  # none overwritten by the other queue
    assert {r["queue_id"] for r in held} == {"//q/a", "//q/b"}


def test_foreach_batch_fan_out_with_a_shared_progress_path(spark, yt_emulator, yt, tmp_path):
    """foreach_batch(sink_a, sink_b, writer_id=...) with one progress table for both outputs:
    every batch lands in both, and a restart skips it in both."""
    make_queue(yt, "//q/a", rows_per_tablet=10, id_base=0)
    source = tmp_path / "in"
    batches = queue_files(yt, "//q/a", source, files=2)
    outputs = [f"{OUT}_a", f"{OUT}_b"]
    sinks = []
    for path in outputs:
        create_output_table(yt, path, rows_schema())
        sinks.append(
            eosink.sink(
                "yt-dynamic",
                path=path,
                progress_path="//home/eosink/progress",
                **sink_options(yt_emulator),
            )
        )
    writer = eosink.foreach_batch(*sinks, writer_id="orders")
    df = spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = df.writeStream.foreachBatch(writer).option("checkpointLocation", str(tmp_path / "ckpt"))
    for n, rows in enumerate(batches):
        drop(source, n, rows)
    run_available(query)

    expected = sorted(r["id"] for b in batches for r in b)
    for path in outputs:
        assert sorted(r["id"] for r in table_rows(yt, path)) == expected
    assert writer.committed == 2 * len(batches) and writer.skipped == 0


def test_data_source_transactional_change_feed_killed_mid_batch_and_restarted(
    spark, yt_emulator, yt, tmp_path
):
    """The transactional mode through the data-source door: an append stream upserted by its
    key (a change feed: later batches update ids of earlier ones). A batch whose insert fails
    leaves nothing visible; after the restart each id holds its latest row."""
    table = "//home/eosink/feed"
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])
    create_output_table(yt, table, schema, key=["id"])
    source = tmp_path / "in"
    os.makedirs(source)
    feed = [
        [{"id": i, "name": f"v{n}", "amount": float(n)} for i in range(n, n + 6)] for n in (0, 3)
    ]

    def query():
        df = spark.readStream.schema("id long, name string, amount double").json(str(source))
        return (
            df.repartition(2)
            .writeStream.format("eosink-yt-dynamic")
            .option("writerId", "feed")
            .option("mode", "transactional")
            .option("proxy", yt_emulator.url)
            .option("path", table)
            .option("proxyDiscovery", "false")
            .option("clientConfig", json.dumps(yt_emulator.client_config()))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )

    drop(source, 0, feed[0])
    run_available(query())
    drop(source, 1, feed[1])
    yt_emulator.faults.fail_next(
        "insert_rows", code=1, message="injected: executor lost", match={"path": table}
    )
    with pytest.raises(Exception, match="executor lost"):
        run_available(query())
    assert {r["id"]: r["name"] for r in yt.select_rows(f"* from [{table}]")} == {
        i: "v0" for i in range(6)
    }
    run_available(query())
    expected = {i: "v0" for i in range(3)} | {i: "v3" for i in range(3, 9)}
    assert {r["id"]: r["name"] for r in yt.select_rows(f"* from [{table}]")} == expected
    assert yt_emulator.state.txm.active_ids() == []  # the failed batch's transaction too
